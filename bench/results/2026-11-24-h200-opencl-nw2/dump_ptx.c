/* Builds kernel sources (files joined in order) with options on NVIDIA's OpenCL and writes the
 * program binary (PTX) to OUT. Usage: dump_ptx OUT DIR "OPTIONS" FILE... */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *slurp(const char *dir, const char *f, size_t *n) {
    char p[512]; snprintf(p, sizeof p, "%s/%s", dir, f); FILE *fp = fopen(p, "rb"); if (!fp) { perror(p); exit(1); }
    fseek(fp, 0, SEEK_END); long l = ftell(fp); fseek(fp, 0, SEEK_SET); char *s = malloc(l + 1); if (fread(s, 1, l, fp) != (size_t)l) exit(1); s[l] = 0; fclose(fp); *n = l; return s; }
int main(int argc, char **argv) {
    if (argc < 5) return 2;
    int nf = argc - 4; const char *srcs[16]; size_t lens[16];
    for (int i = 0; i < nf; i++) srcs[i] = slurp(argv[2], argv[4 + i], &lens[i]);
    cl_platform_id ps[8]; cl_uint np = 0; clGetPlatformIDs(8, ps, &np);
    for (cl_uint p = 0; p < np; p++) {
        char pn[256]; clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        if (!strstr(pn, "NVIDIA")) continue;
        cl_device_id dev; clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
        cl_int err; cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
        cl_program prog = clCreateProgramWithSource(ctx, nf, srcs, lens, &err);
        err = clBuildProgram(prog, 1, &dev, argv[3], NULL, NULL);
        if (err != CL_SUCCESS) { static char log[1 << 16]; clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL); fprintf(stderr, "%s\n", log); return 1; }
        size_t sz = 0; clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL);
        unsigned char *bin = malloc(sz); clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
        FILE *o = fopen(argv[1], "wb"); fwrite(bin, 1, sz, o); fclose(o); return 0;
    }
    return 1;
}
