/* mma_xe_tile.cl's instructions on Intel GPUs with XMX (Xe-HPG, Xe-HPC,
 * Xe2) through Intel's OpenCL compiler, after mma_plain.cl: DPAS from
 * cl_intel_subgroup_matrix_multiply_accumulate (8 rows, k16, f16 or bf16)
 * and sub-group shuffles from cl_intel_subgroups. XE_SG is the sub-group
 * size the device's DPAS takes (its smallest: 16 on Xe-HPC and Xe2, 8 on
 * Xe-HPG), and the kernel requires it. Compile-checked in CI (ocloc, pvc
 * and dg2-g10: tests/vendor_compile.sh); it has not run on an Intel GPU.
 * Where the compiler or the device lacks the builtins, the probe fails and
 * the scalar kernel runs. */

#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#ifndef XE_SG
#define XE_SG 16
#endif
#define MX_XS_WORDS 0
#define MX_WARP XE_SG
#define XE_AW (XE_SG == 16 ? 4 : 8) /* uints of A's operand per lane */
#define MX_UNROLL _Pragma("unroll")
#define MX_KERNEL_ATTR __attribute__((intel_reqd_sub_group_size(XE_SG)))

/* Declared here too: older compilers (Debian 12's, 22.43) build the
 * builtins without declaring them. */
#if XE_SG == 16
typedef short8 mx_xe_a;
#else
typedef int8 mx_xe_a;
#endif
float8 __attribute__((overloadable)) intel_sub_group_f16_f16_matrix_mad_k16(mx_xe_a a, int8 b, float8 acc);
float8 __attribute__((overloadable)) intel_sub_group_bf16_bf16_matrix_mad_k16(mx_xe_a a, int8 b, float8 acc);

inline void mx_dpas(float c[8], const uint a[XE_AW], const uint b[8], __local uint *xs) {
#if XE_SG == 16
    const mx_xe_a av = as_short8((uint4)(a[0], a[1], a[2], a[3]));
#else
    const mx_xe_a av = as_int8((uint8)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]));
#endif
    const int8 bv = as_int8((uint8)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]));
    float8 acc = (float8)(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
#if DTYPE == 2
    acc = intel_sub_group_bf16_bf16_matrix_mad_k16(av, bv, acc);
#else
    acc = intel_sub_group_f16_f16_matrix_mad_k16(av, bv, acc);
#endif
    c[0] = acc.s0, c[1] = acc.s1, c[2] = acc.s2, c[3] = acc.s3;
    c[4] = acc.s4, c[5] = acc.s5, c[6] = acc.s6, c[7] = acc.s7;
}

inline float mx_sg_max(float x, __local uint *xs) {
    for (uint m = XE_SG / 2; m > 0; m >>= 1) x = fmax(x, intel_sub_group_shuffle_xor(x, m));
    return x;
}

inline float mx_sg_sum(float x, __local uint *xs) {
    for (uint m = XE_SG / 2; m > 0; m >>= 1) x += intel_sub_group_shuffle_xor(x, m);
    return x;
}
