/* The matrix-unit primitives of flash_mma.cl on NVIDIA GPUs (compute 8.0
 * and later) through NVIDIA's OpenCL compiler, which passes inline PTX
 * (asm) through to its JIT. The host prepends this file only where the
 * probe kernel below built and computed its tile (ocl_mma.c); mma_emu.cl
 * is the same interface in plain OpenCL C, with the same fragment layouts.
 *
 * The interface, per work-item of a 32-wide warp (work-items 32w .. 32w+31
 * of the group are warp w; NVIDIA's OpenCL maps them so):
 *   mx_ldsm / mx_ldsm_t(r, base, off, xs): ldmatrix .x4 (.trans): lane l
 *     names row l % 8 of 8x8 matrix l / 8 at base + off (16 bytes, 16-byte
 *     aligned); r[i] gets matrix i's fragment.
 *   mx_mma(c, a, b0, b1, xs): c += A B for one m16n8k16 tile in f16 or
 *     bf16 (DTYPE 1 or 2) with float32 accumulation, PTX's fragment layout;
 *     for f32 (DTYPE 0) one m16n8k8 tile in TF32.
 *   mx_quad_max / mx_quad_sum(x, xs): over the 4 lanes of a quad.
 *   mx_cp16(dst, src, bytes): 16 bytes to local memory, the first `bytes`
 *     from src (16-byte aligned when bytes > 0), the rest zero; completes
 *     at mx_cp_wait(n) (all but the last n groups of mx_cp_commit).
 *   mx_exp2(x), mx_pack2(lo, hi): exp2 (-inf gives 0), two floats to the
 *     storage type packed in a uint, lo in the low half (rounded to nearest).
 *   MX_UNROLL: the pragma the kernel puts on its fragment loops.
 *   mx_warp_sync(): the warp's lanes meet, their local-memory writes and
 *     completed copies visible to each other (decode_mma.cl; files without
 *     one get a group barrier there).
 *   mx_pin(x): x, opaque to the compiler (mma_nv_tile.cl says why).
 * xs is the warp's scratch (MX_XS_WORDS words; none here: NULL). Every
 * primitive is called by all work-items of the group together. */

#define MX_XS_WORDS 0
#define MX_WARP 32 /* lanes per warp (wave) */
#define MX_KERNEL_ATTR /* nothing the kernel must declare */

/* The kernel's fragment loops: unrolled, so fragments stay in registers. */
#define MX_UNROLL _Pragma("unroll")

/* A __local pointer is an address in the shared window under NVIDIA's
 * OpenCL (its PTX addresses __local data with st.shared / ld.shared), so
 * its low 32 bits are what ldmatrix and cp.async take. */
inline uint mx_shared(__local const void *p) { return (uint)(ulong)p; }

/* An asm move the compiler cannot see through: addresses computed from its
 * result are computed where they are used, not hoisted out of the loop. */
inline int mx_pin(int x) {
    asm volatile("mov.b32 %0, %0;" : "+r"(x));
    return x;
}

inline void mx_ldsm(uint r[4], __local const ushort *base, int off, __local uint *xs) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(mx_shared(base + off)));
}

inline void mx_ldsm_t(uint r[4], __local const ushort *base, int off, __local uint *xs) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(mx_shared(base + off)));
}

inline void mx_mma(float c[4], const uint a[4], uint b0, uint b1, __local uint *xs) {
#if DTYPE == 0 /* TF32: the f32 bits as they are (the unit ignores the low 13 mantissa bits) */
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif DTYPE == 2
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

inline float mx_shfl_xor(float x, int m) {
    float y;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 31, 0xffffffff;" : "=f"(y) : "f"(x), "r"(m));
    return y;
}

inline float mx_quad_max(float x, __local uint *xs) {
    x = fmax(x, mx_shfl_xor(x, 1));
    return fmax(x, mx_shfl_xor(x, 2));
}

inline float mx_quad_sum(float x, __local uint *xs) {
    x += mx_shfl_xor(x, 1);
    return x + mx_shfl_xor(x, 2);
}

inline void mx_cp16(__local ushort *dst, __global const ushort *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(mx_shared(dst)),
                 "l"((ulong)src), "r"(bytes)
                 : "memory");
}

inline void mx_cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }

#define MX_WARP_SYNC 1
inline void mx_warp_sync(void) { asm volatile("bar.warp.sync -1;" ::: "memory"); }

#define mx_cp_wait(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")

inline float mx_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

inline uint mx_pack2(float lo, float hi) {
    uint r;
#if DTYPE == 2
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
