/* Can an OpenCL kernel on NVIDIA's driver use more than the 48 KiB of local memory the device
 * reports? Tries a dynamic __local argument of several sizes (sets the whole buffer, reads it back
 * reversed) and a static __local array of 64 KiB. Prints each step's status. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *src =
    "__kernel void dyn(__global uint *out, __local uint *sm, uint n) {\n"
    "  const uint t = get_local_id(0), nt = get_local_size(0);\n"
    "  for (uint i = t; i < n; i += nt) sm[i] = i * 2654435761u + 7u;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  uint bad = 0;\n"
    "  for (uint i = t; i < n; i += nt) { uint j = n - 1 - i; bad += sm[j] != j * 2654435761u + 7u; }\n"
    "  out[get_global_id(0)] = bad;\n"
    "}\n";
/* WORDS comes from the build options. */
static const char *src_static =
    "__kernel void st(__global uint *out) {\n"
    "  __local uint sm[WORDS];\n"
    "  const uint t = get_local_id(0);\n"
    "  for (uint i = t; i < WORDS; i += 128) sm[i] = i * 2654435761u + 7u;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  uint bad = 0;\n"
    "  for (uint i = t; i < WORDS; i += 128) { uint j = WORDS - 1 - i; bad += sm[j] != j * 2654435761u + 7u; }\n"
    "  out[get_global_id(0)] = bad;\n"
    "}\n";
int main(void) {
    cl_platform_id ps[8];
    cl_uint np = 0;
    clGetPlatformIDs(8, ps, &np);
    for (cl_uint p = 0; p < np; p++) {
        char pn[256];
        clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        if (!strstr(pn, "NVIDIA")) continue;
        cl_device_id dev;
        clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
        cl_ulong lm = 0;
        clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
        printf("CL_DEVICE_LOCAL_MEM_SIZE %llu\n", (unsigned long long)lm);
        cl_int err;
        cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
        cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
        cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
        err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
        printf("build dyn %d\n", err);
        cl_kernel k = clCreateKernel(prog, "dyn", &err);
        cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4 * 128 * 264, NULL, &err);
        const size_t sizes[] = {32768, 49152, 49168, 65536, 98304, 131072, 163840, 200704, 232448};
        for (int s = 0; s < 9; s++) {
            cl_uint n = (cl_uint)(sizes[s] / 4);
            cl_int e1 = clSetKernelArg(k, 0, sizeof out, &out);
            cl_int e2 = clSetKernelArg(k, 1, sizes[s], NULL);
            cl_int e3 = clSetKernelArg(k, 2, sizeof n, &n);
            size_t g = 128 * 264, l = 128;
            cl_int e4 = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL);
            cl_int e5 = clFinish(q);
            static cl_uint host[128 * 264];
            memset(host, 0xff, sizeof host);
            cl_int e6 = clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
            unsigned long long bad = 0;
            for (int i = 0; i < 128 * 264; i++) bad += host[i];
            printf("dyn %zu bytes: setarg %d %d %d enqueue %d finish %d read %d mismatches %llu\n",
                   sizes[s], e1, e2, e3, e4, e5, e6, bad);
        }
        const int kib[] = {48, 64, 96, 112, 160, 200, 227, 228};
        for (int s = 0; s < 8; s++) {
            char opt[64];
            snprintf(opt, sizeof opt, "-DWORDS=%d", kib[s] * 256);
            cl_program p2 = clCreateProgramWithSource(ctx, 1, &src_static, NULL, &err);
            err = clBuildProgram(p2, 1, &dev, opt, NULL, NULL);
            char log[4096] = "";
            clGetProgramBuildInfo(p2, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
            if (err != CL_SUCCESS) {
                printf("static %d KiB: build %d %.300s\n", kib[s], err, log);
                continue;
            }
            cl_kernel k2 = clCreateKernel(p2, "st", &err);
            cl_ulong klm = 0;
            clGetKernelWorkGroupInfo(k2, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof klm, &klm, NULL);
            clSetKernelArg(k2, 0, sizeof out, &out);
            size_t g = 128 * 264, l = 128;
            static cl_uint host[128 * 264];
            memset(host, 0xff, sizeof host);
            cl_int e4 = clEnqueueNDRangeKernel(q, k2, 1, NULL, &g, &l, 0, NULL, NULL);
            cl_int e5 = clFinish(q);
            cl_int e6 = clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
            unsigned long long bad = 0;
            for (int i = 0; i < 128 * 264; i++) bad += host[i];
            printf("static %d KiB: kernel local %llu, enqueue %d finish %d read %d mismatches %llu\n",
                   kib[s], (unsigned long long)klm, e4, e5, e6, bad);
            clReleaseKernel(k2);
            clReleaseProgram(p2);
        }
        return 0;
    }
    printf("no NVIDIA platform\n");
    return 1;
}
