/* Builds kernels_cl/flash_mma.cl (after storage/ragged/variants and mma_nv.cl) for NVIDIA OpenCL
 * with -cl-nv-verbose per shape; prints ptxas's register / spill / shared lines. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *slurp(const char *dir, const char *f, size_t *n) {
    char p[512]; snprintf(p, sizeof p, "%s/%s", dir, f); FILE *fp = fopen(p, "rb"); if (!fp) { perror(p); exit(1); }
    fseek(fp, 0, SEEK_END); long l = ftell(fp); fseek(fp, 0, SEEK_SET); char *s = malloc(l + 1); fread(s, 1, l, fp); s[l] = 0; fclose(fp); *n = l; return s; }
int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "kernels_cl";
    const char *files[] = {"storage.cl", "ragged.cl", "variants.cl", "mma_common.cl", "mma_nv.cl", "mma_nv_tile.cl", "flash_mma.cl"};
    const char *srcs[7]; size_t lens[7];
    for (int i = 0; i < 7; i++) srcs[i] = slurp(dir, files[i], &lens[i]);
    cl_platform_id ps[8]; cl_uint np = 0; clGetPlatformIDs(8, ps, &np);
    for (cl_uint p = 0; p < np; p++) {
        char pn[256]; clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        if (!strstr(pn, "NVIDIA")) continue;
        cl_device_id dev; clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
        cl_int err; cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
        for (int s = 2; s < argc; s++) { int dt = 1, rag = 0; const char *shapes[64]; shapes[s] = argv[s];
            char opt[512]; snprintf(opt, sizeof opt, "-cl-std=CL1.2 -cl-nv-verbose -DDTYPE=%d %s%s", dt, shapes[s], rag ? " -DFATTN_RAGGED=1" : "");
            cl_program prog = clCreateProgramWithSource(ctx, 7, srcs, lens, &err);
            err = clBuildProgram(prog, 1, &dev, opt, NULL, NULL);
            static char log[1 << 16]; log[0] = 0; clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
            printf("=== dtype %d %s rag %d: %s\n", dt, shapes[s], rag, err == CL_SUCCESS ? "built" : "FAILED");
            char *line = strtok(log, "\n");
            for (; line; line = strtok(NULL, "\n"))
                if (err != CL_SUCCESS || strstr(line, "registers") || strstr(line, "spill") || strstr(line, "smem") || strstr(line, "error")) printf("  %s\n", line);
            clReleaseProgram(prog);
        }
    }
    return 0;
}
