/* Session 2026-11-23d probe: shared-address forms for ldmatrix / cp.async under NVIDIA OpenCL,
 * bf16 mma, shfl.sync, ex2.approx; dumps the PTX of the address kernel. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
static const char *src =
"inline uint sh_cvta(__local void *p) { ulong g; asm(\"cvta.to.shared.u64 %0, %1;\" : \"=l\"(g) : \"l\"((ulong)p)); return (uint)g; }\n"
"inline uint sh_raw(__local void *p) { return (uint)(ulong)p; }\n"
"__kernel void k_addr(__global const uint *in, __global uint *out) {\n"
"  __local uint sm[256] __attribute__((aligned(16))); uint lane = get_local_id(0); sm[lane] = lane; barrier(CLK_LOCAL_MEM_FENCE);\n"
"  ulong raw = (ulong)(sm + lane); uint isp; asm(\"{ .reg .pred p; isspacep.shared p, %1; selp.u32 %0, 1, 0, p; }\" : \"=r\"(isp) : \"l\"(raw));\n"
"  out[lane*4+0] = (uint)raw; out[lane*4+1] = (uint)(raw >> 32); out[lane*4+2] = sh_cvta(sm + lane); out[lane*4+3] = isp;\n"
"}\n"
"__kernel void k_ldsm_cvta(__global const uint *in, __global uint *out) {\n"
"  __local uint sm[128] __attribute__((aligned(16))); uint lane = get_local_id(0);\n"
"  for (int i = lane; i < 128; i += 32) sm[i] = in[i]; barrier(CLK_LOCAL_MEM_FENCE);\n"
"  uint r0, r1, r2, r3; uint addr = sh_cvta(sm + lane * 4);\n"
"  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(addr));\n"
"  out[lane*4+0] = r0; out[lane*4+1] = r1; out[lane*4+2] = r2; out[lane*4+3] = r3;\n"
"}\n"
"__kernel void k_ldsm_gen(__global const uint *in, __global uint *out) {\n"
"  __local uint sm[128] __attribute__((aligned(16))); uint lane = get_local_id(0);\n"
"  for (int i = lane; i < 128; i += 32) sm[i] = in[i]; barrier(CLK_LOCAL_MEM_FENCE);\n"
"  uint r0, r1, r2, r3; ulong addr = (ulong)(sm + lane * 4);\n"
"  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"l\"(addr));\n"
"  out[lane*4+0] = r0; out[lane*4+1] = r1; out[lane*4+2] = r2; out[lane*4+3] = r3;\n"
"}\n"
"__kernel void k_cpa_cvta(__global const uint *in, __global uint *out) {\n"
"  __local uint sm[128] __attribute__((aligned(16))); uint lane = get_local_id(0);\n"
"  uint sa = sh_cvta(sm + lane * 4); ulong ga = (ulong)(in + lane * 4);\n"
"  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(sa), \"l\"(ga) : \"memory\");\n"
"  asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  for (int i = 0; i < 4; i++) out[lane*4+i] = sm[lane*4+i];\n"
"}\n"
"__kernel void k_cpa_zfill(__global const uint *in, __global uint *out) {\n"
"  __local uint sm[128] __attribute__((aligned(16))); uint lane = get_local_id(0);\n"
"  uint sa = sh_cvta(sm + lane * 4); ulong ga = (ulong)(in + lane * 4); uint n = lane & 1 ? 16 : 0;\n"
"  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(sa), \"l\"(ga), \"r\"(n) : \"memory\");\n"
"  asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  for (int i = 0; i < 4; i++) out[lane*4+i] = sm[lane*4+i];\n"
"}\n"
"__kernel void k_mma_bf16(__global const uint *in, __global uint *out) {\n"
"  uint lane = get_local_id(0); float d[4] = {0,0,0,0};\n"
"  uint a0 = 0x3f803f80u, b0 = 0x3f803f80u;\n"
"  asm(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
"    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a0), \"r\"(a0), \"r\"(a0), \"r\"(a0), \"r\"(b0), \"r\"(b0));\n"
"  for (int i = 0; i < 4; i++) out[lane*4+i] = (uint)d[i];\n"
"}\n"
"__kernel void k_shfl_ex2(__global const uint *in, __global uint *out) {\n"
"  uint lane = get_local_id(0); uint x = lane * 10, y; float e, f = (float)lane * 0.25f;\n"
"  asm volatile(\"shfl.sync.bfly.b32 %0, %1, 1, 31, 0xffffffff;\" : \"=r\"(y) : \"r\"(x));\n"
"  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(e) : \"f\"(f));\n"
"  out[lane*4+0] = y; out[lane*4+1] = as_uint(e); out[lane*4+2] = 0; out[lane*4+3] = 0;\n"
"}\n";
static const char *names[] = {"k_addr", "k_ldsm_cvta", "k_ldsm_gen", "k_cpa_cvta", "k_cpa_zfill", "k_mma_bf16", "k_shfl_ex2"};
enum { NK = sizeof names / sizeof names[0] };
static char *one_kernel(const char *name) {
    const char *start = strstr(src, name) - strlen("__kernel void ");
    const char *end = strstr(start + 10, "__kernel"); size_t n = end ? (size_t)(end - start) : strlen(start);
    const char *pre_end = strstr(src, "__kernel"); size_t pre = (size_t)(pre_end - src);
    char *s = malloc(pre + n + 1); memcpy(s, src, pre); memcpy(s + pre, start, n); s[pre + n] = 0; return s;
}
int main(void) {
    cl_platform_id ps[8]; cl_uint np = 0; clGetPlatformIDs(8, ps, &np);
    for (cl_uint p = 0; p < np; p++) {
        char pn[256]; clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        if (!strstr(pn, "NVIDIA")) continue;
        cl_device_id dev; if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL) != CL_SUCCESS) continue;
        char dn[256], dv[256], ver[256]; cl_ulong lm = 0; clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dn, dn, NULL); clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof dv, dv, NULL);
        clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof ver, ver, NULL); clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
        printf("platform %s, device %s, driver %s, %s, local mem %llu\n", pn, dn, dv, ver, (unsigned long long)lm);
        cl_int err; unsigned in[128], out[128];
        for (int i = 0; i < 128; i++) in[i] = 0x10001u * (unsigned)i + 0x00100000u;
        for (int kk = 0; kk < NK; kk++) {
            cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
            cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
            char *s1 = one_kernel(names[kk]); const char *cs = s1;
            cl_program prog = clCreateProgramWithSource(ctx, 1, &cs, NULL, &err);
            err = clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
            char log[8192] = ""; clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
            if (err != CL_SUCCESS) { printf("  %-12s BUILD FAILED (%d): %.1500s\n", names[kk], err, log); free(s1); continue; }
            if (kk == 0 || kk == 3 || kk == 6) { size_t bs = 0; clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bs, &bs, NULL);
                unsigned char *bin = malloc(bs + 1); unsigned char *bp[1] = {bin}; clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bp, bp, NULL); bin[bs] = 0;
                printf("----- PTX of %s -----\n%s\n-----\n", names[kk], (char *)bin); free(bin); }
            cl_kernel k = clCreateKernel(prog, names[kk], &err);
            cl_mem m0 = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof in, in, &err);
            cl_mem m1 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof out, NULL, &err);
            clSetKernelArg(k, 0, sizeof m0, &m0); clSetKernelArg(k, 1, sizeof m1, &m1);
            size_t g = 32, l = 32; err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL);
            cl_int fin = clFinish(q);
            if (err || fin) { printf("  %-12s RUN FAILED (%d/%d)\n", names[kk], err, fin); free(s1); continue; }
            memset(out, 0, sizeof out); clEnqueueReadBuffer(q, m1, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
            int bad = 0;
            for (int t = 0; t < 32; t++) for (int m = 0; m < 4; m++) {
                unsigned want = 0, got = out[t*4+m];
                switch (kk) {
                case 1: case 2: want = in[32*m + t]; break;
                case 3: want = in[t*4+m]; break;
                case 4: want = (t & 1) ? in[t*4+m] : 0; break;
                case 5: want = 16; break;
                case 6: if (m == 0) want = (t ^ 1) * 10; else if (m == 1) { float f; memcpy(&f, &got, 4); want = got; if (f < 0.99f * __builtin_exp2f(t*0.25f) || f > 1.01f * __builtin_exp2f(t*0.25f)) bad++; } else want = 0; break;
                default: want = got;
                }
                if (want != got) bad++;
            }
            printf("  %-12s ran: %s", names[kk], bad ? "WRONG" : "correct");
            if (kk == 0) printf(" lane0 raw %08x:%08x cvta %08x isspacep %u; lane1 raw %08x cvta %08x", out[1], out[0], out[2], out[3], out[4], out[6]);
            printf("\n");
            free(s1); clReleaseCommandQueue(q); clReleaseContext(ctx);
        }
    }
    return 0;
}
