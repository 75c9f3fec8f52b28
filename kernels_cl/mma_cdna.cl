/* mma_cdna_tile.cl's instructions on AMD CDNA GPUs (gfx90a and later,
 * wave64) through AMD's clang-based OpenCL compiler, after mma_plain.cl:
 * MFMA 16x16x16 (__builtin_amdgcn_mfma_f32_16x16x16f16 and
 * _16x16x16bf16_1k) and the cross-lane exchange through ds_bpermute.
 * Compile-checked in CI (clang's amdgcn target, gfx90a); it has not run on
 * an AMD GPU. Where the compiler or the device lacks the builtins, the
 * probe fails to build and the scalar kernel runs. */

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define MX_XS_WORDS 0
#define MX_WARP 64 /* lanes per wave */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */
#define MX_UNROLL _Pragma("unroll")

typedef float mx_f4 __attribute__((ext_vector_type(4)));
typedef half mx_h4 __attribute__((ext_vector_type(4)));
typedef short mx_s4 __attribute__((ext_vector_type(4)));
typedef uint mx_u2 __attribute__((ext_vector_type(2)));

inline uint mx_xchg(uint x, int lane_xor, __local uint *xs) {
    return (uint)__builtin_amdgcn_ds_bpermute((MX_LANE ^ lane_xor) << 2, (int)x);
}

inline void mx_mfma(float c[4], const uint a[2], const uint b[2], __local uint *xs) {
    const mx_u2 av = (mx_u2)(a[0], a[1]), bv = (mx_u2)(b[0], b[1]);
    mx_f4 acc = (mx_f4)(c[0], c[1], c[2], c[3]);
#if DTYPE == 2
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_astype(av, mx_s4),
                                                     __builtin_astype(bv, mx_s4), acc, 0, 0, 0);
#else
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_astype(av, mx_h4),
                                                 __builtin_astype(bv, mx_h4), acc, 0, 0, 0);
#endif
    c[0] = acc.s0, c[1] = acc.s1, c[2] = acc.s2, c[3] = acc.s3;
}
