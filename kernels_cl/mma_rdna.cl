/* mma_rdna_tile.cl's instructions on AMD RDNA3 GPUs (gfx11, wave32) through
 * AMD's clang-based OpenCL compiler, after mma_plain.cl: WMMA 16x16x16
 * (__builtin_amdgcn_wmma_f32_16x16x16_{f16,bf16}_w32) and the half-wave
 * exchange through ds_bpermute. Compile-checked in CI (clang's amdgcn
 * target, gfx1100); it has not run on an AMD GPU. Where the compiler or
 * the device lacks the builtins, the probe fails to build and the scalar
 * kernel runs. */

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define MX_XS_WORDS 0
#define MX_WARP 32 /* lanes per warp (wave) */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */
#define MX_UNROLL _Pragma("unroll")

typedef float mx_f8 __attribute__((ext_vector_type(8)));
typedef half mx_h16 __attribute__((ext_vector_type(16)));
typedef short mx_s16 __attribute__((ext_vector_type(16)));
typedef uint mx_u8 __attribute__((ext_vector_type(8)));

inline uint mx_swap16(uint x, __local uint *xs) {
    return (uint)__builtin_amdgcn_ds_bpermute((MX_LANE ^ 16) << 2, (int)x);
}

inline void mx_wmma(float c[8], const uint a[8], const uint b[8], __local uint *xs) {
    const mx_u8 av = (mx_u8)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    const mx_u8 bv = (mx_u8)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    mx_f8 acc = (mx_f8)(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
#if DTYPE == 2
    acc = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_astype(av, mx_s16),
                                                      __builtin_astype(bv, mx_s16), acc);
#else
    acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_astype(av, mx_h16),
                                                     __builtin_astype(bv, mx_h16), acc);
#endif
    c[0] = acc.s0, c[1] = acc.s1, c[2] = acc.s2, c[3] = acc.s3;
    c[4] = acc.s4, c[5] = acc.s5, c[6] = acc.s6, c[7] = acc.s7;
}
