/* The tiled loop's bf16 kernel for x86-64 with AMX (Sapphire Rapids and
 * later): both products on the tile unit (TDPBF16PS: a 16x16 float tile +=
 * 16x32 bf16 times 32x16 bf16), the online softmax on AVX-512.
 *
 * Per key tile, for 32 query rows (two 16-row blocks):
 *   S = Q K^T  (Q: the caller's bf16 rows, unscaled; K^T packed so that
 *               each 64-byte tile row holds one pair of dims for 16 keys)
 *   softmax    (per row over its keys: scale, mask, max, exp, sum; P is
 *               rounded to bf16 row by row, as the GPU kernels round it)
 *   O += P V   (O in float, rescaled by the row's alpha first; V packed so
 *               that each tile row holds one pair of keys for 16 dims)
 * Tiles: 0-3 accumulate (2 row blocks x 2 key or dim blocks), 4-5 hold the
 * A operands (Q or P of each row block), 6-7 the B operands (K^T or V). */
#define _GNU_SOURCE /* syscall() */
#include <string.h>

#include "cpu_avx512.h" /* TARGET512, exp16 */

#ifdef CPU_X86_KERNELS

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define TARGETAMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16,avx2,fma,f16c")))
#define INLINEAMX static inline __attribute__((always_inline)) TARGETAMX

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

int cpu_amx_enable(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    /* Linux hands out the 8 KiB of tile state only on request, per
     * process (5.16 and later); a refusal leaves AMX off. */
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

/* A 16 x 16 matrix of dwords, one row per register, transposed in place:
 * at each of four levels b the off-diagonal b x b blocks of every 2b x 2b
 * block trade places, a two-source permute per row (idx[2 l], idx[2 l + 1]:
 * level l's indices for the upper and the lower row of a pair). */
typedef struct transpose_idx {
    __m512i idx[8];
} transpose_idx;

INLINEAMX transpose_idx transpose_indices(void) {
    transpose_idx t;
    for (int level = 0, b = 8; b >= 1; level++, b >>= 1) {
        int lo_idx[16], hi_idx[16];
        for (int c = 0; c < 16; c++) {
            lo_idx[c] = c & b ? 16 + c - b : c; /* row i keeps its low half */
            hi_idx[c] = c & b ? 16 + c : c + b; /* row i + b takes row i's high half */
        }
        t.idx[2 * level] = _mm512_loadu_si512(lo_idx);
        t.idx[2 * level + 1] = _mm512_loadu_si512(hi_idx);
    }
    return t;
}

/* Rows i and i + b of level `level` (the pairs written out, so that the
 * sixteen rows stay in registers: a loop left them on the stack). */
#define TRANSPOSE_PAIR(level, i, b)                                                        \
    do {                                                                                   \
        const __m512i x_ = r[i], y_ = r[(i) + (b)];                                        \
        r[i] = _mm512_permutex2var_epi32(x_, t->idx[2 * (level)], y_);                     \
        r[(i) + (b)] = _mm512_permutex2var_epi32(x_, t->idx[2 * (level) + 1], y_);         \
    } while (0)

INLINEAMX void transpose16(__m512i r[16], const transpose_idx *t) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) TRANSPOSE_PAIR(0, i, 8);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) TRANSPOSE_PAIR(1, k % 4 + k / 4 * 8, 4);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) TRANSPOSE_PAIR(2, k % 2 + k / 2 * 4, 2);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) TRANSPOSE_PAIR(3, 2 * k, 1);
}

TARGETAMX void cpu_amx_pack_k(const void *const *k, int64_t keys, int64_t keys_pad,
                              int64_t head_dim, uint32_t *kt) {
    const int64_t steps = head_dim / 32;
    const transpose_idx ti = transpose_indices();
    for (int64_t kb = 0; kb < keys_pad / 16; kb++)
        for (int64_t ks = 0; ks < steps; ks++) {
            __m512i r[16];
            for (int n = 0; n < 16; n++) {
                const int64_t j = kb * 16 + n;
                r[n] = j < keys ? _mm512_loadu_si512((const uint16_t *)k[j] + ks * 32)
                                : _mm512_setzero_si512();
            }
            transpose16(r, &ti);
            uint32_t *out = kt + (kb * steps + ks) * 256;
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(out + i * 16, r[i]);
        }
}

TARGETAMX void cpu_amx_pack_v(const void *const *v, int64_t keys, int64_t keys_pad,
                              int64_t head_dim_v, uint32_t *vp) {
    /* Words 2n and 2n + 1 of a packed row: dim n of the pair's two keys. */
    int16_t lo_idx[32], hi_idx[32];
    for (int n = 0; n < 16; n++) {
        lo_idx[2 * n] = (int16_t)n, lo_idx[2 * n + 1] = (int16_t)(32 + n);
        hi_idx[2 * n] = (int16_t)(16 + n), hi_idx[2 * n + 1] = (int16_t)(48 + n);
    }
    const __m512i il = _mm512_loadu_si512(lo_idx), ih = _mm512_loadu_si512(hi_idx);
    const int64_t blocks = head_dim_v / 16;
    for (int64_t j = 0; j < keys_pad; j += 2) {
        const uint16_t *a = j < keys ? v[j] : NULL, *b = j + 1 < keys ? v[j + 1] : NULL;
        const int64_t kp = j / 32, r = (j % 32) / 2;
        for (int64_t d = 0; d < head_dim_v; d += 32) {
            const __m512i x = a ? _mm512_loadu_si512(a + d) : _mm512_setzero_si512();
            const __m512i y = b ? _mm512_loadu_si512(b + d) : _mm512_setzero_si512();
            uint32_t *out = vp + (kp * blocks + d / 16) * 256 + r * 16;
            _mm512_storeu_si512(out, _mm512_permutex2var_epi16(x, il, y));
            _mm512_storeu_si512(out + 256, _mm512_permutex2var_epi16(x, ih, y));
        }
    }
}

/* The online softmax of one row's scores s[0 .. keys_pad) (keys [lo, hi)
 * visible): p to bf16 at pb, m and l updated, o (dv floats) rescaled. */
INLINEAMX void softmax_row(float *s, uint16_t *pb, float *m, float *l, float *o, int64_t dv,
                           int64_t keys_pad, int32_t lo, int32_t hi, float scale) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
    const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* max(x, mx) keeps mx where x is NaN: a NaN score makes its row NaN
     * through the sum, as in the scalar loop. */
    __m512 mx = ninf;
    for (int64_t c = 0; c < keys_pad; c += 16) {
        const __m512i j = _mm512_add_epi32(iota, _mm512_set1_epi32((int)c));
        const __mmask16 in = _mm512_cmp_epi32_mask(j, vlo, _MM_CMPINT_NLT) &
                             _mm512_cmp_epi32_mask(j, vhi, _MM_CMPINT_LT);
        const __m512 x = _mm512_mask_mul_ps(ninf, in, _mm512_loadu_ps(s + c), sc);
        _mm512_storeu_ps(s + c, x);
        mx = _mm512_max_ps(x, mx);
    }
    const float m_old = *m, top = _mm512_reduce_max_ps(mx);
    const float m_new = top > m_old ? top : m_old;
    /* Never -inf - (-inf): a row that has seen no key shifts by 0. */
    const float shift = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = expf(m_old - shift); /* 0 while m_old is -inf */
    const __m512 vs = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t c = 0; c < keys_pad; c += 32) {
        const __m512 p0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + c), vs));
        const __m512 p1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + c + 16), vs));
        sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
        _mm512_storeu_si512(pb + c, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
    }
    *l = *l * alpha + _mm512_reduce_add_ps(sum);
    *m = m_new;
    if (alpha != 1.0f) {
        const __m512 a = _mm512_set1_ps(alpha);
        for (int64_t d = 0; d < dv; d += 16)
            _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), a));
    }
}

TARGETAMX void cpu_amx_run(const cpu_amx_tile *t) {
    const int64_t D = t->head_dim, Dv = t->head_dim_v, kp = t->keys_pad, steps = D / 32;
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    _tile_loadconfig(&cfg);

    /* S = Q K^T, 32 keys (two 16-key blocks) at a time. */
    const uint16_t *q0 = t->q, *q1 = t->q + 16 * D;
    float *s = t->s;
    for (int64_t kb = 0; kb < kp / 16; kb += 2) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        const uint32_t *k0 = t->kt + kb * steps * 256, *k1 = k0 + steps * 256;
        for (int64_t ks = 0; ks < steps; ks++) {
            _tile_loadd(4, q0 + ks * 32, D * 2);
            _tile_loadd(5, q1 + ks * 32, D * 2);
            _tile_loadd(6, k0 + ks * 256, 64);
            _tile_loadd(7, k1 + ks * 256, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, s + kb * 16, kp * 4);
        _tile_stored(1, s + kb * 16 + 16, kp * 4);
        _tile_stored(2, s + 16 * kp + kb * 16, kp * 4);
        _tile_stored(3, s + 16 * kp + kb * 16 + 16, kp * 4);
    }

    for (int r = 0; r < 32; r++)
        softmax_row(s + r * kp, t->p + r * kp, t->m + r, t->l + r, t->o + r * Dv, Dv, kp,
                    t->lo[r], t->hi[r], t->scale);

    /* O += P V, 32 dims (two 16-dim blocks) at a time. */
    const uint16_t *p0 = t->p, *p1 = t->p + 16 * kp;
    float *o0 = t->o, *o1 = t->o + 16 * Dv;
    for (int64_t db = 0; db < Dv / 16; db += 2) {
        _tile_loadd(0, o0 + db * 16, Dv * 4);
        _tile_loadd(1, o0 + db * 16 + 16, Dv * 4);
        _tile_loadd(2, o1 + db * 16, Dv * 4);
        _tile_loadd(3, o1 + db * 16 + 16, Dv * 4);
        for (int64_t c = 0; c < kp / 32; c++) {
            const uint32_t *v0 = t->vp + (c * (Dv / 16) + db) * 256;
            _tile_loadd(4, p0 + c * 32, kp * 2);
            _tile_loadd(5, p1 + c * 32, kp * 2);
            _tile_loadd(6, v0, 64);
            _tile_loadd(7, v0 + 256, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, o0 + db * 16, Dv * 4);
        _tile_stored(1, o0 + db * 16 + 16, Dv * 4);
        _tile_stored(2, o1 + db * 16, Dv * 4);
        _tile_stored(3, o1 + db * 16 + 16, Dv * 4);
    }
    _tile_release();
}

#endif /* CPU_X86_KERNELS */
