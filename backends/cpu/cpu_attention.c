/* CPU attention: the tiled online-softmax algorithm (one work item per
 * (sequence, KV head, tile of its query heads' rows, key split), streaming
 * key/value tiles; variable-length sequences and paged caches resolved per
 * sequence through backend.h's rules), and the naive baseline that
 * materialises scores and probabilities. Both take every variant of
 * desc->mask and head_dim_v: the window narrows each row's keys (key tiles
 * outside every row's window are not visited), softcap, ALiBi and the bias
 * rewrite a row's scores after the dot products (score_variants), and a
 * sink joins the denominator when a row is finished (cpu_finish_row).
 * The AVX2 kernels take tiles that need none of the per-score work. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "half.h"

#ifdef CPU_X86_KERNELS
#include <cpuid.h>
#endif

/* The tiled loop is built twice: for the baseline the library targets, and
 * for AVX2 with FMA and F16C (x86-64 since 2013), picked at run time; the
 * build's baseline x86-64 does float math 4 lanes wide. The AVX2 build hands
 * tiles whose rows share their keys to cpu_avx2.c's kernel (FMA, a
 * polynomial exp: not the baseline's bits, as accurate); other tiles take
 * the same float operations in the same order in both builds (no FMA
 * contraction in ISO C mode). */
#if (defined(CPU_X86_KERNELS) || defined(CPU_NEON_KERNELS)) && defined(__GNUC__) && \
    !defined(__clang__) && defined(__FLT16_MAX__)
/* GCC 12+: _Float16, converted by F16C where enabled, by AArch64's FCVT
 * (every AArch64 CPU has it). */
#define CPU_HAVE_F16 1
#endif
#define CPU_INLINE static inline __attribute__((always_inline))

/* Converts n elements to float, times mul. With f16c (the AVX2 build of the
 * tiled loop, and AArch64's), f16 goes through the hardware conversion,
 * which is exact like fattn_f16_to_f32 (a NaN may come out quieted, still
 * NaN). */
CPU_INLINE void load_row(float *restrict dst, const void *src, fattn_dtype t, int64_t n, float mul,
                         int f16c) {
    if (t == FATTN_F32) {
        const float *restrict s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = s[i] * mul;
        return;
    }
    const uint16_t *restrict s = src;
#ifdef CPU_HAVE_F16
    if (f16c && t == FATTN_F16) {
        const _Float16 *restrict h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)h[i] * mul;
        return;
    }
#else
    (void)f16c;
#endif
    if (t == FATTN_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = fattn_f16_to_f32(s[i]) * mul;
    else
        for (int64_t i = 0; i < n; i++) dst[i] = fattn_bf16_to_f32(s[i]) * mul;
}

void cpu_load_row(float *dst, const void *src, fattn_dtype t, int64_t n, float mul) {
    load_row(dst, src, t, n, mul, 0);
}

void cpu_store_row(void *dst, const float *src, fattn_dtype t, int64_t n) {
    if (t == FATTN_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else {
        uint16_t *d = dst;
        if (t == FATTN_F16)
            for (int64_t i = 0; i < n; i++) d[i] = fattn_f32_to_f16(src[i]);
        else
            for (int64_t i = 0; i < n; i++) d[i] = fattn_f32_to_bf16(src[i]);
    }
}

/* Asks for the cache lines of a row that will be read soon. */
CPU_INLINE void prefetch_row(const void *row, int64_t bytes) {
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)row + off);
}

/* Eight lanes of floats (GCC and clang vector extensions): one AVX
 * register, or two SSE registers in the baseline build. Helpers take and
 * give them through pointers, which keeps vectors out of the calling
 * convention (they are inlined anyway). */
typedef float v8f __attribute__((vector_size(32)));
#define LD8(p) (*(const v8f_u *)(const void *)(p))
#define ST8(p, x) (*(v8f_u *)(void *)(p) = (x))
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
CPU_INLINE float sum8(const v8f *v) {
    const v8f s = *v;
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Eight partial sums (lane x sums elements x, x + 8, ...), then the lanes
 * and the tail: the one order every score is formed in. */
CPU_INLINE float dot(const float *restrict a, const float *restrict b, int64_t n) {
    v8f s = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) s += LD8(a + i) * LD8(b + i);
    float t = 0.0f;
    for (; i < n; i++) t += a[i] * b[i];
    return sum8(&s) + t;
}

/* dot(q, k[c], n) for four keys at once: four independent chains hide the
 * adds' latency, and each sum is formed in dot's order, so a score does not
 * depend on which keys were grouped. */
CPU_INLINE void dot4(const float *restrict q, const float *const k[4], int64_t n, float out[4]) {
    v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const v8f qx = LD8(q + i);
        s0 += qx * LD8(k[0] + i);
        s1 += qx * LD8(k[1] + i);
        s2 += qx * LD8(k[2] + i);
        s3 += qx * LD8(k[3] + i);
    }
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (; i < n; i++)
        for (int c = 0; c < 4; c++) t[c] += q[i] * k[c][i];
    out[0] = sum8(&s0) + t[0];
    out[1] = sum8(&s1) + t[1];
    out[2] = sum8(&s2) + t[2];
    out[3] = sum8(&s3) + t[3];
}

/* a += p[0] v[0] + ... + p[3] v[3], added in that order (as four single
 * updates would), with one pass over a instead of four. */
CPU_INLINE void axpy4(float *restrict a, const float p[4], const float *const v[4], int64_t n) {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        ST8(a + d,
            (((LD8(a + d) + p[0] * LD8(v[0] + d)) + p[1] * LD8(v[1] + d)) + p[2] * LD8(v[2] + d)) +
                p[3] * LD8(v[3] + d));
    for (; d < n; d++)
        a[d] = (((a[d] + p[0] * v[0][d]) + p[1] * v[1][d]) + p[2] * v[2][d]) + p[3] * v[3][d];
}

/* 1 when p's scores are rewritten after the dot products (softcap, ALiBi,
 * bias); the window and sinks leave them as they are. */
static inline int score_variants_on(const fattn_problem *p) {
    return p->var.on && (p->var.softcap > 0.0f || p->var.alibi.mem || p->var.bias.mem);
}

/* Element (b, h, i, j) of the bias as float. */
static inline float bias_at(const fattn_variants *v, int64_t b, int64_t h, int64_t i, int64_t j) {
    const fattn_operand *x = &v->bias;
    const int64_t off = x->offset + b * x->stride_batch + h * x->stride_head + i * x->stride_seq +
                        j * v->bias_stride_dim;
    if (v->bias_dtype == FATTN_F32) return ((const float *)x->mem)[off];
    const uint16_t e = ((const uint16_t *)x->mem)[off];
    return v->bias_dtype == FATTN_F16 ? fattn_f16_to_f32(e) : fattn_bf16_to_f32(e);
}

/* Rewrites the scores S[jlo .. jn) of row i (within sequence b, query head
 * h), whose key is j0 + their index, by fattn.h's rules and in their
 * order: softcap, then ALiBi (the distance to the bottom-right diagonal
 * i + diag_off), then the bias. */
static void score_variants(const fattn_problem *p, int64_t b, int64_t h, int64_t i,
                           int64_t diag_off, float *S, int64_t j0, int64_t jlo, int64_t jn) {
    const fattn_variants *v = &p->var;
    const float c = v->softcap;
    if (c > 0.0f) {
        const float inv = 1.0f / c;
        for (int64_t j = jlo; j < jn; j++) S[j] = c * tanhf(S[j] * inv);
    }
    if (v->alibi.mem) {
        const float slope =
            ((const float *)v->alibi
                 .mem)[v->alibi.offset + b * v->alibi.stride_batch + h * v->alibi.stride_head];
        const int64_t diag = i + diag_off;
        for (int64_t j = jlo; j < jn; j++) {
            const int64_t dist = diag - (j0 + j);
            S[j] -= slope * (float)(dist < 0 ? -dist : dist);
        }
    }
    if (v->bias.mem)
        for (int64_t j = jlo; j < jn; j++) S[j] += bias_at(v, b, h, i, j0 + j);
}

/* The value a row's scores are shifted by before exp: its running max, or 0
 * while that is -inf (no finite score yet), so that exp never sees
 * -inf - (-inf). A NaN score never becomes the max and reaches l as NaN. */
static inline float shift_of(float m) { return m == -INFINITY ? 0.0f : m; }

/* Writes a finished row: O = acc / l and LSE = m + log(l); a row with no
 * finite score (l == 0) gets 0 and -inf, and a NaN l (a NaN or +inf score)
 * stays NaN in both. With sinks, the head's sink logit joins l first (on the
 * larger of m and the sink as the shift): a row with no key then gets O = 0
 * and lse = the sink; a sink of -inf is none, a NaN one makes the row NaN.
 * acc is overwritten. */
void cpu_finish_row(const fattn_problem *p, int64_t b, int64_t h, int64_t i, float *acc, float m,
                    float l) {
    const int64_t D = p->head_dim_v;
    float mul = 1.0f;
    if (p->var.on && p->var.sinks.mem) {
        const float sink =
            ((const float *)p->var.sinks.mem)[p->var.sinks.offset + h * p->var.sinks.stride_head];
        if (sink != sink) {
            l = sink;
        } else if (sink != -INFINITY) {
            const float shift = l == 0.0f || sink > m ? sink : m;
            mul = l == 0.0f ? 0.0f : expf(m - shift);
            l = l * mul + expf(sink - shift);
            m = shift;
        }
    }
    const float inv = l == 0.0f ? 0.0f : mul / l;
    for (int64_t d = 0; d < D; d++) acc[d] *= inv;
    cpu_store_row((void *)cpu_elem(&p->o, p->dtype, b, h, i), acc, p->dtype, D);
    if (p->has_lse) {
        float *lse = (float *)(void *)cpu_elem(&p->lse, FATTN_F32, b, h, i);
        *lse = l == 0.0f ? -INFINITY : m + logf(l);
    }
}

/* Output rows of O (and lse): [batch, heads_q, seq_q], or [1, heads_q,
 * total_q] for packed variable-length queries. */
static int64_t out_rows_per_head(const fattn_problem *p) {
    return p->rag.on && p->rag.cu_seqlens_q.mem ? p->rag.total_q : p->seq_q;
}
static int64_t out_batches(const fattn_problem *p) {
    return p->rag.on && p->rag.cu_seqlens_q.mem ? 1 : p->batch;
}

uint64_t cpu_split_workspace(const fattn_problem *p, int64_t splits) {
    if (splits <= 1) return 0;
    uint64_t n;
    const uint64_t rows = (uint64_t)out_batches(p) * (uint64_t)p->heads_q,
                   per = (uint64_t)p->head_dim_v + 2;
    if (__builtin_mul_overflow(rows, (uint64_t)out_rows_per_head(p), &n) ||
        __builtin_mul_overflow(n, per, &n) || __builtin_mul_overflow(n, (uint64_t)splits, &n) ||
        __builtin_mul_overflow(n, (uint64_t)sizeof(float), &n) || n > UINT64_MAX - 64)
        return UINT64_MAX;
    return n + 64;
}

/* One work item of the tiled path: a tile of tq rows of one (sequence, KV
 * head)'s query heads, packed row-major as r = i * group + g (query row i
 * of head hk * group + g), so that each K/V tile is loaded once for every
 * query head that reads it (GQA packing), against one split of the keys. */
typedef struct tiled_job {
    const fattn_problem *p;
    int64_t tq, tkv, group, tiles, splits, chunk;
    const void *cu_q, *cu_kv, *used, *table; /* host pointers of the index tables */
    float *part;                             /* splits > 1: [split][out row][m, l, acc[D]] */
    int64_t part_rows;                       /* output rows, for the split stride */
} tiled_job;

/* Rows of a tile rounded up to cpu_key_tile's fours. */
static inline int64_t rows4(int64_t n) { return (n + 3) & ~(int64_t)3; }

int cpu_amx_fits(const fattn_problem *p, int64_t tq) {
    return p->dtype == FATTN_BF16 && tq % 32 == 0 && p->head_dim % 32 == 0 &&
           p->head_dim_v % 32 == 0 && !score_variants_on(p);
}

/* Keys of a tile rounded up to the AMX kernel's pairs of 16-key blocks. */
static inline int64_t keys32(int64_t n) { return (n + 31) & ~(int64_t)31; }

/* Scratch layout per thread, in floats (Dv: head_dim_v): key row
 * pointers, Q, K, V, scores, acc, m, l, then for the lane kernel (tiles of
 * 16 rows) its lo and hi, Q transposed (then O's rows at the end) and its
 * 16 x round16(tkv) scores, then with `amx`, from the next 64-byte line,
 * the AMX kernel's packed K^T and V, its 32 rows' scores (float) and P,
 * the tile's Q (bf16) and O (float, in place of acc). */
static size_t tiled_scratch(int64_t tq, int64_t tkv, int64_t D, int64_t Dv, int amx) {
    const int64_t tr = rows4(tq), wide = D > Dv ? D : Dv, kp = keys32(tkv),
                  lanes = tq % CPU_LANES ? 0 : tq * (2 + wide) + 2 * CPU_LANES * (tkv + 15),
                  tiles = amx ? 16 + kp * (D + Dv) / 2 + 48 * kp + tq * (D / 2 + Dv) : 0;
    return (size_t)(4 * tkv /*K,V row pointers*/ + tr * D /*Q*/ + tkv * (D + Dv) /*K,V*/ +
                    4 * (tkv + 1) /*scores*/ + tr * Dv /*acc*/ + 2 * tr + lanes + tiles);
}

/* Key j of sequence b: its row in K or V (a page's slot when paged). */
static inline const unsigned char *key_row(const tiled_job *job, const fattn_operand *x,
                                           const fattn_seq *s, int64_t b, int64_t hk, int64_t j) {
    const fattn_problem *p = job->p;
    if (p->rag.page_size) {
        const int64_t ps = p->rag.page_size;
        const int64_t page = fattn_table_at(&p->rag.block_table, job->table, b, j / ps);
        return cpu_elem(x, p->dtype, page, hk, j % ps);
    }
    return cpu_elem(x, p->dtype, s->kv_batch, hk, s->kv_row0 + j);
}

/* Index of an output row in the partial results of one split. */
static inline int64_t part_row(const tiled_job *job, const fattn_seq *s, int64_t h, int64_t i) {
    const fattn_problem *p = job->p;
    return (s->q_batch * p->heads_q + h) * out_rows_per_head(p) + s->q_row0 + i;
}

/* The tiled loop's body, built for instruction set `isa` (cpu_isa). With
 * AVX-512 and tiles of 16 rows (the default) every tile of a problem with
 * no per-score variant goes to the lane kernel, which keeps the rows' O
 * transposed in acc until the end; else AVX2's kernel takes the tiles every
 * row sees whole, and the scalar loop the rest. */
CPU_INLINE void tiled_body(void *arg, int64_t item, float *scratch, int isa) {
    const int avx2 = CPU_X86_AT_LEAST(isa, CPU_ISA_AVX2);
    const int hw_f16 = avx2 || isa == CPU_ISA_NEON; /* load_row's hardware f16 */
    const tiled_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim, Dv = p->head_dim_v, tq = job->tq, tkv = job->tkv,
                  group = job->group;
    const int64_t split = item % job->splits;
    const int64_t tile = (item / job->splits) % job->tiles;
    const int64_t bh = item / job->splits / job->tiles;
    const int64_t b = bh / p->heads_kv, hk = bh % p->heads_kv;
    fattn_seq s;
    fattn_seq_resolve(p, job->cu_q, job->cu_kv, job->used, b, &s);
    const int64_t r0 = tile * tq, rows = s.len_q * group;
    if (r0 >= rows) return; /* a shorter sequence than the longest */
    const int64_t nr = (rows - r0) < tq ? (rows - r0) : tq;

    /* Rows of the K and V tile: float32 inputs are read where they lie,
     * others converted into K and V, except for the AVX2 kernel, which
     * reads every type where it lies (Kr, Vr; the same slots). */
    const float **Kp = (const float **)(void *)scratch, **Vp = Kp + tkv;
    const void **Kr = (const void **)(void *)scratch, **Vr = Kr + tkv;
    const int64_t tr = rows4(tq), nr4 = rows4(nr);
    float *Q = scratch + 4 * tkv, *K = Q + tr * D, *V = K + tkv * D, *S = V + tkv * Dv;
    float *acc = S + 4 * (tkv + 1), *m = acc + tr * Dv, *l = m + tr;
    const int scores = score_variants_on(p);
    /* The AMX kernel: bf16 tiles in groups of 32 rows, with O (in acc), m,
     * l, lo and hi row by row, against each packed K/V tile. */
    const int amx = isa == CPU_ISA_AMX && cpu_amx_fits(p, tq);
    /* The lane kernel: tq / 16 groups of 16 rows, each with its own Q^T,
     * O^T (in acc), m, l, lo and hi, against each packed K/V tile. */
    const int lanes = !amx && cpu_isa_has_lanes(isa) && tq % CPU_LANES == 0 && !scores;
    int32_t *lo = (int32_t *)(void *)(l + tr), *hi = lo + tq;
    float *qt = l + tr + 2 * tq, *SL = qt + tq * (D > Dv ? D : Dv);
    /* The AMX kernel's buffers start at a 64-byte line, so that no tile
     * row straddles two lines (a misaligned layout ran at half the speed);
     * their sizes keep that alignment. */
    uint32_t *kt = NULL, *vt = NULL;
    float *sa = NULL;
    uint16_t *pa = NULL, *qa = NULL;
    if (amx) { /* (only then is the scratch that long) */
        const int64_t kp = keys32(tkv);
        kt = (uint32_t *)(((uintptr_t)(SL + 2 * CPU_LANES * (tkv + 15)) + 63) & ~(uintptr_t)63);
        vt = kt + kp * D / 2;
        sa = (float *)(void *)(vt + kp * Dv / 2);
        pa = (uint16_t *)(void *)(sa + 32 * kp), qa = pa + 32 * kp;
        acc = (float *)(void *)(qa + tq * D); /* O's rows, aligned */
    }
    for (int64_t r = 0; r < nr; r++) {
        const int64_t i = (r0 + r) / group, h = hk * group + (r0 + r) % group;
        const void *row = cpu_elem(&p->q, p->dtype, s.q_batch, h, s.q_row0 + i);
        if (amx) { /* bf16 as it lies; the kernel scales the scores */
            memcpy(qa + r * D, row, (size_t)D * 2);
            continue;
        }
        /* Folding the scale into Q saves a multiply per score. */
        load_row(Q + r * D, row, p->dtype, D, p->scale, hw_f16);
    }
    /* The kernel's padding rows: zero Q, no key seen yet. */
    const int64_t pad = lanes || amx ? tq : nr4;
    if (amx)
        memset(qa + nr * D, 0, (size_t)((pad - nr) * D) * 2);
    else
        memset(Q + nr * D, 0, (size_t)((pad - nr) * D) * sizeof(float));
    for (int64_t r = 0; r < pad; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(acc, 0, (size_t)(pad * Dv) * sizeof(float));
    if (lanes) /* group g's Q^T at qt + g * 16 * D */
        for (int64_t r = 0; r < tq; r++)
            for (int64_t d = 0; d < D; d++)
                qt[(r / CPU_LANES * D + d) * CPU_LANES + r % CPU_LANES] = Q[r * D + d];

    /* This split's keys; keys outside what the tile's rows see are never
     * loaded: causal tiles above the diagonal and key tiles outside every
     * row's window are skipped, not masked. Both ends of a row's keys grow
     * with the row, so the first row has the lowest and the last the
     * highest. */
    const int64_t row_bytes = D * fattn_esize(p->dtype), vrow_bytes = Dv * fattn_esize(p->dtype);
    int64_t k_lo, k_hi, first_hi, last_lo;
    fattn_seq_keys(p, &s, r0 / group, &k_lo, &first_hi);
    fattn_seq_keys(p, &s, (r0 + nr - 1) / group, &last_lo, &k_hi);
    if (job->splits > 1) {
        if (k_lo < split * job->chunk) k_lo = split * job->chunk;
        if (k_hi > (split + 1) * job->chunk) k_hi = (split + 1) * job->chunk;
    }
    for (int64_t j0 = k_lo; j0 < k_hi; j0 += tkv) {
        const int64_t nk = (k_hi - j0) < tkv ? (k_hi - j0) : tkv;
        /* The AVX2 kernel takes tiles every row sees whole, with no
         * per-score work and V as wide as K. */
        const int kernel = !lanes && !amx && avx2 && D % 8 == 0 && Dv == D && !scores &&
                           first_hi >= j0 + nk && last_lo <= j0;
        for (int64_t j = 0; j < nk; j++) {
            /* The next tile's rows are fetched while this one is computed:
             * a head's key rows lie apart (BSHD, pages), which the hardware
             * prefetchers do not follow; decoding is bound by this stream. */
            if (!lanes && !amx && j0 + j + tkv < k_hi) {
                prefetch_row(key_row(job, &p->k, &s, b, hk, j0 + j + tkv), row_bytes);
                prefetch_row(key_row(job, &p->v, &s, b, hk, j0 + j + tkv), vrow_bytes);
            }
            const void *kr = key_row(job, &p->k, &s, b, hk, j0 + j);
            const void *vr = key_row(job, &p->v, &s, b, hk, j0 + j);
            if (kernel || amx) {
                Kr[j] = kr, Vr[j] = vr;
                continue;
            }
            if (p->dtype == FATTN_F32 && !lanes) { /* the lane kernel takes packed rows */
                Kp[j] = kr, Vp[j] = vr;
                continue;
            }
            load_row(K + j * D, kr, p->dtype, D, 1.0f, hw_f16);
            load_row(V + j * Dv, vr, p->dtype, Dv, 1.0f, hw_f16);
            Kp[j] = K + j * D, Vp[j] = V + j * Dv;
        }
#ifdef CPU_X86_KERNELS
        if (kernel) {
            const cpu_key_tile t = {.q = Q,
                                    .k = Kr,
                                    .v = Vr,
                                    .acc = acc,
                                    .m = m,
                                    .l = l,
                                    .scores = S,
                                    .rows = nr4,
                                    .keys = nk,
                                    .head_dim = D,
                                    .dtype = p->dtype};
            cpu_key_tile_avx2(&t);
            continue;
        }
#endif
#if defined(CPU_X86_KERNELS) || defined(CPU_NEON_KERNELS)
        if (lanes || amx) {
            for (int64_t r = 0; r < tq; r++) {
                int64_t jlo = 0, jn = 0;
                if (r < nr) {
                    fattn_seq_keys(p, &s, (r0 + r) / group, &jlo, &jn);
                    jlo = jlo > j0 ? jlo - j0 : 0;
                    jn = jn - j0 < nk ? jn - j0 : nk;
                    if (jn < jlo) jn = jlo;
                }
                lo[r] = (int32_t)jlo, hi[r] = (int32_t)jn;
            }
        }
#endif
#ifdef CPU_X86_KERNELS
        if (amx) {
            const int64_t nkp = keys32(nk);
            cpu_amx_pack_k((const void *const *)Kr, nk, nkp, D, kt);
            cpu_amx_pack_v((const void *const *)Vr, nk, nkp, Dv, vt);
            for (int64_t x = 0; x < nr; x += 32) {
                const cpu_amx_tile t = {.q = qa + x * D,
                                        .kt = kt,
                                        .vp = vt,
                                        .o = acc + x * Dv,
                                        .m = m + x,
                                        .l = l + x,
                                        .s = sa,
                                        .p = pa,
                                        .lo = lo + x,
                                        .hi = hi + x,
                                        .keys_pad = nkp,
                                        .head_dim = D,
                                        .head_dim_v = Dv,
                                        .scale = p->scale};
                cpu_amx_run(&t);
            }
            continue;
        }
#endif
#if defined(CPU_X86_KERNELS) || defined(CPU_NEON_KERNELS)
        if (lanes) {
            /* Groups in pairs: each K and V element loaded feeds both. */
            for (int64_t x = 0; x < nr; x += 2 * CPU_LANES) {
                const cpu_lane_tile t = {.qt = qt + x * D,
                                         .k = Kp,
                                         .v = Vp,
                                         .ot = acc + x * Dv,
                                         .m = m + x,
                                         .l = l + x,
                                         .scores = SL,
                                         .lo = lo + x,
                                         .hi = hi + x,
                                         .keys = nk,
                                         .head_dim = D,
                                         .head_dim_v = Dv,
                                         .groups = nr - x > CPU_LANES ? 2 : 1};
#ifdef CPU_NEON_KERNELS
                cpu_lane_tile_neon(&t);
#else
                cpu_lane_tile_avx512(&t);
#endif
            }
            continue;
        }
#endif
        for (int64_t r = 0; r < nr; r++) {
            /* This row's keys of the tile: S[jlo .. jn). */
            const int64_t i = (r0 + r) / group;
            int64_t jlo, jn;
            fattn_seq_keys(p, &s, i, &jlo, &jn);
            jlo = jlo > j0 ? jlo - j0 : 0;
            jn = jn - j0 < nk ? jn - j0 : nk;
            if (jn <= jlo) continue;
            const float *q = Q + r * D;
            int64_t j = jlo;
            for (; j + 4 <= jn; j += 4) dot4(q, Kp + j, D, S + j);
            for (; j < jn; j++) S[j] = dot(q, Kp[j], D);
            if (scores)
                score_variants(p, b, hk * group + (r0 + r) % group, i, s.len_kv - s.len_q, S, j0,
                               jlo, jn);
            float mx = -INFINITY;
            for (j = jlo; j < jn; j++) mx = S[j] > mx ? S[j] : mx;
            const float m_new = mx > m[r] ? mx : m[r];
            const float shift = shift_of(m_new);
            const float alpha = expf(m[r] - shift); /* 0 while m[r] is -inf */
            float sum = 0.0f, pj[4];
            float *a = acc + r * Dv;
            for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
            for (j = jlo; j + 4 <= jn; j += 4) {
                for (int c = 0; c < 4; c++) sum += pj[c] = expf(S[j + c] - shift);
                axpy4(a, pj, Vp + j, Dv);
            }
            for (; j < jn; j++) {
                const float w = expf(S[j] - shift);
                const float *vj = Vp[j];
                sum += w;
                for (int64_t d = 0; d < Dv; d++) a[d] += w * vj[d];
            }
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
        }
    }
    if (lanes) { /* O back to a row per Dv floats, through qt's room */
        for (int64_t r = 0; r < nr; r++)
            for (int64_t d = 0; d < Dv; d++)
                qt[r * Dv + d] = acc[(r / CPU_LANES * Dv + d) * CPU_LANES + r % CPU_LANES];
        memcpy(acc, qt, (size_t)(nr * Dv) * sizeof(float));
    }
    for (int64_t r = 0; r < nr; r++) {
        const int64_t i = (r0 + r) / group, h = hk * group + (r0 + r) % group;
        if (job->splits == 1) {
            cpu_finish_row(p, s.q_batch, h, s.q_row0 + i, acc + r * Dv, m[r], l[r]);
            continue;
        }
        /* A split writes its running state; an empty split writes m = -inf,
         * l = 0, which the merge skips. The sink joins at the merge. */
        float *out = job->part + (split * job->part_rows + part_row(job, &s, h, i)) * (Dv + 2);
        out[0] = m[r];
        out[1] = l[r];
        memcpy(out + 2, acc + r * Dv, (size_t)Dv * sizeof(float));
    }
}

static void tiled_item(void *arg, int64_t item, float *scratch) {
    tiled_body(arg, item, scratch, CPU_ISA_PORTABLE);
}

/* Scratch of an all-heads work item, in floats: key row pointers, then per
 * head its padded rows' Q and acc, m and l, and their scores. */
static size_t heads_scratch(const fattn_problem *p, int64_t tkv) {
    const int64_t hr = p->heads_kv * rows4(p->seq_q * (p->heads_q / p->heads_kv));
    return (size_t)(4 * tkv + 2 * CPU_HEADS_AHEAD + 2 * hr * p->head_dim + 2 * hr + hr * (tkv + 1));
}

cpu_tiled_kind cpu_tiled_kind_of(const fattn_problem *p, int64_t tq, int64_t tkv, int isa) {
    const int64_t rows = p->seq_q * (p->heads_q / p->heads_kv);
    /* A quarter of a 1 MiB L2: 8 KV heads x 4 rows at d128 take 40 KiB. */
    const size_t most = 256 << 10;
    /* The kernel does no per-score work, takes V as wide as K, and every
     * row must see the same keys (with a window: one query row). */
    const int window = p->var.on && (p->var.window_left >= 0 || p->var.window_right >= 0);
    if (!CPU_X86_AT_LEAST(isa, CPU_ISA_AVX2) || p->head_dim % 8 != 0 || p->head_dim_v != p->head_dim ||
        score_variants_on(p) || ((p->causal || window) && p->seq_q != 1) || rows > tq ||
        (p->heads_kv > 1 &&
         (p->k.stride_head >= p->k.stride_seq || p->v.stride_head >= p->v.stride_seq)) ||
        heads_scratch(p, tkv) * sizeof(float) > most)
        return CPU_TILED_PER_HEAD;
    return CPU_TILED_ALL_HEADS;
}

#ifdef CPU_X86_KERNELS
/* One work item of the all-heads path: every KV head of one sequence (its
 * rows packed per head as in tiled_body) against one split of the keys. */
static void heads_item(void *arg, int64_t item, float *scratch) {
    const tiled_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim, tkv = job->tkv, group = job->group, H = p->heads_kv;
    const int64_t split = item % job->splits, b = item / job->splits;
    fattn_seq s;
    fattn_seq_resolve(p, job->cu_q, job->cu_kv, job->used, b, &s);
    const int64_t nr = s.len_q * group, R = rows4(nr);
    if (nr == 0) return;
    const void **Kr = (const void **)(void *)scratch, **Vr = Kr + tkv + CPU_HEADS_AHEAD;
    float *Q = scratch + 4 * tkv + 2 * CPU_HEADS_AHEAD, *acc = Q + H * R * D, *m = acc + H * R * D,
          *l = m + H * R;
    float *S = l + H * R;
    for (int64_t hk = 0; hk < H; hk++)
        for (int64_t r = 0; r < R; r++) {
            float *q = Q + (hk * R + r) * D;
            const int64_t i = r / group, h = hk * group + r % group;
            if (r < nr) /* the scale folded into Q, as in tiled_body */
                load_row(q, cpu_elem(&p->q, p->dtype, s.q_batch, h, s.q_row0 + i), p->dtype, D,
                         p->scale, 1);
            else
                memset(q, 0, (size_t)D * sizeof(float));
            m[hk * R + r] = -INFINITY;
            l[hk * R + r] = 0.0f;
        }
    memset(acc, 0, (size_t)(H * R * D) * sizeof(float));

    /* Every row sees the same keys (cpu_tiled_kind_of): the last row's. */
    int64_t k_lo, k_hi;
    fattn_seq_keys(p, &s, s.len_q - 1, &k_lo, &k_hi);
    if (job->splits > 1) {
        if (k_lo < split * job->chunk) k_lo = split * job->chunk;
        if (k_hi > (split + 1) * job->chunk) k_hi = (split + 1) * job->chunk;
    }
    const int64_t es = fattn_esize(p->dtype);
    cpu_heads_block blk = {.q = Q,
                           .k = Kr,
                           .v = Vr,
                           .k_head = p->k.stride_head * es,
                           .v_head = p->v.stride_head * es,
                           .acc = acc,
                           .m = m,
                           .l = l,
                           .scores = S,
                           .heads = H,
                           .rows = R,
                           .max_keys = tkv,
                           .head_dim = D,
                           .dtype = p->dtype};
    for (int64_t j0 = k_lo; j0 < k_hi; j0 += tkv) {
        blk.keys = (k_hi - j0) < tkv ? (k_hi - j0) : tkv;
        blk.ahead = k_hi - j0 - blk.keys < CPU_HEADS_AHEAD ? k_hi - j0 - blk.keys : CPU_HEADS_AHEAD;
        for (int64_t j = 0; j < blk.keys; j++) Vr[j] = key_row(job, &p->v, &s, b, 0, j0 + j);
        for (int64_t j = 0; j < blk.keys + blk.ahead; j++)
            Kr[j] = key_row(job, &p->k, &s, b, 0, j0 + j);
        cpu_heads_block_avx2(&blk);
    }
    for (int64_t hk = 0; hk < H; hk++)
        for (int64_t r = 0; r < nr; r++) {
            const int64_t i = r / group, h = hk * group + r % group, x = hk * R + r;
            if (job->splits == 1) {
                cpu_finish_row(p, s.q_batch, h, s.q_row0 + i, acc + x * D, m[x], l[x]);
                continue;
            }
            float *out = job->part + (split * job->part_rows + part_row(job, &s, h, i)) * (D + 2);
            out[0] = m[x];
            out[1] = l[x];
            memcpy(out + 2, acc + x * D, (size_t)D * sizeof(float));
        }
}
#endif

#ifdef CPU_X86_KERNELS
__attribute__((target("avx2,fma,f16c"))) static void tiled_item_avx2(void *arg, int64_t item,
                                                                     float *scratch) {
    tiled_body(arg, item, scratch, CPU_ISA_AVX2);
}
__attribute__((target("avx512f,avx2,fma,f16c"))) static void
tiled_item_avx512(void *arg, int64_t item, float *scratch) {
    tiled_body(arg, item, scratch, CPU_ISA_AVX512);
}
/* The AMX kernel's own functions carry its target. */
__attribute__((target("avx512f,avx2,fma,f16c"))) static void
tiled_item_amx(void *arg, int64_t item, float *scratch) {
    tiled_body(arg, item, scratch, CPU_ISA_AMX);
}
#endif
#ifdef CPU_NEON_KERNELS
static void tiled_item_neon(void *arg, int64_t item, float *scratch) {
    tiled_body(arg, item, scratch, CPU_ISA_NEON);
}
#endif

int cpu_have_avx2(void) {
#ifdef CPU_X86_KERNELS
    /* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
     * does not know the name; AVX2's check covers the OS's AVX state. */
    unsigned a, b, c, d;
    const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    __builtin_cpu_init();
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

cpu_isa cpu_isa_of_machine(void) {
#ifdef CPU_X86_KERNELS
    if (!cpu_have_avx2()) return CPU_ISA_PORTABLE;
    /* AVX-512F, and the OS saving opmask and all 32 ZMM registers (XCR0
     * bits 5-7 besides SSE and AVX's 1-2; OSXSAVE was checked for AVX2). */
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16))) return CPU_ISA_AVX2;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0xe6u) != 0xe6u) return CPU_ISA_AVX2;
    /* AMX: AMX-TILE and AMX-BF16 (leaf 7 EDX bits 24, 22), AVX512BW (EBX
     * bit 30) and AVX512-BF16 (leaf 7.1 EAX bit 5) for the packing and the
     * softmax, XCR0's tile bits 17-18, and the OS's grant of the state. */
    const int amx = (d & (1u << 24)) && (d & (1u << 22)) && (b & (1u << 30));
    if (!amx || (lo & 0x60000u) != 0x60000u || !__get_cpuid_count(7, 1, &a, &b, &c, &d) ||
        !(a & (1u << 5)) || !cpu_amx_enable())
        return CPU_ISA_AVX512;
    return CPU_ISA_AMX;
#elif defined(CPU_NEON_KERNELS)
    return CPU_ISA_NEON; /* every AArch64 CPU has Advanced SIMD */
#else
    return CPU_ISA_PORTABLE;
#endif
}

/* The build of the tiled loop for instruction set isa. */
static cpu_item_fn tiled_fn(int isa) {
#ifdef CPU_X86_KERNELS
    if (isa == CPU_ISA_AMX) return tiled_item_amx;
    if (isa == CPU_ISA_AVX512) return tiled_item_avx512;
    if (isa == CPU_ISA_AVX2) return tiled_item_avx2;
#endif
#ifdef CPU_NEON_KERNELS
    if (isa == CPU_ISA_NEON) return tiled_item_neon;
#endif
    (void)isa;
    return tiled_item;
}

/* The merge of a row's splits, by fattn_combine's rule on the running
 * states: shift by the largest m, weigh each split's l and acc by
 * exp(m_split - shift). A NaN l (a NaN or +inf score) reaches the row. */
static void merge_item(void *arg, int64_t item, float *scratch) {
    const tiled_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim_v, i = item % p->seq_q, bh = item / p->seq_q;
    const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
    fattn_seq s;
    fattn_seq_resolve(p, job->cu_q, job->cu_kv, job->used, b, &s);
    if (i >= s.len_q) return;
    const int64_t row = part_row(job, &s, h, i), stride = job->part_rows * (D + 2);
    const float *part = job->part + row * (D + 2);
    float mx = -INFINITY;
    for (int64_t k = 0; k < job->splits; k++) mx = part[k * stride] > mx ? part[k * stride] : mx;
    const float shift = shift_of(mx);
    float l = 0.0f, *acc = scratch;
    memset(acc, 0, (size_t)D * sizeof(float));
    for (int64_t k = 0; k < job->splits; k++) {
        const float *x = part + k * stride;
        if (x[1] == 0.0f) continue; /* no key in this split */
        const float w = expf(x[0] - shift);
        l += x[1] * w;
        for (int64_t d = 0; d < D; d++) acc[d] += w * x[2 + d];
    }
    cpu_finish_row(p, s.q_batch, h, s.q_row0 + i, acc, mx, l);
}

fattn_status cpu_forward_tiled(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg) {
    cpu_state *st = state;
    const cpu_tiled_plan *tp = FATTN_PLAN_AREA(plan, const cpu_tiled_plan);
    const fattn_ragged *g = &p->rag;
    tiled_job job = {.p = p,
                     .tq = plan->tiling.tile_q,
                     .tkv = plan->tiling.tile_kv,
                     .group = p->heads_q / p->heads_kv,
                     .splits = tp->splits > 1 ? tp->splits : 1,
                     .chunk = tp->chunk,
                     /* A CPU buffer is its address: the tables are host memory. */
                     .cu_q = g->on ? g->cu_seqlens_q.mem : NULL,
                     .cu_kv = g->on ? g->cu_seqlens_kv.mem : NULL,
                     .used = g->on ? g->seqused_kv.mem : NULL,
                     .table = g->on ? g->block_table.mem : NULL};
    job.tiles = (p->seq_q * job.group + job.tq - 1) / job.tq;
    job.part_rows = out_batches(p) * p->heads_q * out_rows_per_head(p);
    if (job.splits > 1) {
        if (!p->workspace.mem)
            return fattn_fail(msg, FATTN_ERR_INTERNAL, "a split plan was run without workspace");
        const uintptr_t at = (uintptr_t)p->workspace.mem + (uintptr_t)p->workspace.offset;
        job.part = (float *)(void *)((at + 63) & ~(uintptr_t)63);
    }
    const int threads = cpu_threads(st, p);
    int64_t items = p->batch * p->heads_kv * job.tiles * job.splits;
    size_t scratch = tiled_scratch(job.tq, job.tkv, p->head_dim, p->head_dim_v,
                                   st->isa == CPU_ISA_AMX && cpu_amx_fits(p, job.tq)) *
                     sizeof(float);
    cpu_item_fn fn = tiled_fn(st->isa);
#ifdef CPU_X86_KERNELS
    if (tp->kind == CPU_TILED_ALL_HEADS) {
        items = p->batch * job.splits;
        scratch = heads_scratch(p, job.tkv) * sizeof(float);
        fn = heads_item;
    }
#endif
    fattn_status s = cpu_parallel_for(st, threads, items, scratch, fn, &job, msg);
    if (s != FATTN_OK || job.splits == 1) return s;
    return cpu_parallel_for(st, threads, p->batch * p->heads_q * p->seq_q,
                            (size_t)p->head_dim_v * sizeof(float), merge_item, &job, msg);
}

/* ---- Naive baseline --------------------------------------------------------- */

typedef struct naive_job {
    const fattn_problem *p;
    float *scores, *probs; /* [batch * heads_q * seq_q, seq_kv] each */
} naive_job;

/* The larger of a problem's two head dims. */
static int64_t wider_dim(const fattn_problem *p) {
    return p->head_dim_v > p->head_dim ? p->head_dim_v : p->head_dim;
}

/* One query row: S = scale Q K^T (with the variants; -inf where hidden),
 * P = softmax(S), O = P V. */
static void naive_item(void *arg, int64_t row, float *scratch) {
    const naive_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim, Dv = p->head_dim_v, Sk = p->seq_kv;
    const int64_t i = row % p->seq_q, bh = row / p->seq_q;
    const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
    const int64_t hk = h / (p->heads_q / p->heads_kv);
    float *q = scratch, *kv = q + D, *out = kv + wider_dim(p);
    float *S = Sk ? job->scores + row * Sk : NULL, *P = Sk ? job->probs + row * Sk : NULL;
    fattn_seq s; /* dense: the problem's own lengths */
    fattn_seq_resolve(p, NULL, NULL, NULL, b, &s);
    int64_t lo, hi;
    fattn_seq_keys(p, &s, i, &lo, &hi);

    cpu_load_row(q, cpu_elem(&p->q, p->dtype, b, h, i), p->dtype, D, p->scale);
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < Sk; j++) {
        S[j] = -INFINITY;
        if (j < lo || j >= hi) continue;
        cpu_load_row(kv, cpu_elem(&p->k, p->dtype, b, hk, j), p->dtype, D, 1.0f);
        S[j] = dot(q, kv, D);
        if (score_variants_on(p)) score_variants(p, b, h, i, Sk - p->seq_q, S, 0, j, j + 1);
        mx = S[j] > mx ? S[j] : mx;
    }
    const float shift = shift_of(mx);
    for (int64_t j = 0; j < Sk; j++) {
        P[j] = j >= lo && j < hi ? expf(S[j] - shift) : 0.0f;
        sum += P[j];
    }
    memset(out, 0, (size_t)Dv * sizeof(float));
    for (int64_t j = lo; j < hi; j++) {
        cpu_load_row(kv, cpu_elem(&p->v, p->dtype, b, hk, j), p->dtype, Dv, 1.0f);
        for (int64_t d = 0; d < Dv; d++) out[d] += P[j] * kv[d];
    }
    cpu_finish_row(p, b, h, i, out, mx, sum);
}

fattn_status cpu_forward_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg) {
    (void)plan;
    cpu_state *s = state;
    const int64_t rows = p->batch * p->heads_q * p->seq_q;
    size_t bytes;
    if (__builtin_mul_overflow((size_t)rows, (size_t)p->seq_kv, &bytes) ||
        __builtin_mul_overflow(bytes, sizeof(float), &bytes) || bytes > cpu_memory_limit() / 2)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "the naive method's scores and probabilities (2 x %lld x %lld floats) do "
                          "not fit in this machine's %llu bytes of RAM and swap",
                          (long long)rows, (long long)p->seq_kv,
                          (unsigned long long)cpu_memory_limit());
    naive_job job = {p, NULL, NULL};
    if (bytes) {
        job.scores = malloc(bytes);
        job.probs = malloc(bytes);
        if (!job.scores || !job.probs) {
            free(job.scores);
            free(job.probs);
            return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                              "the naive method needs 2 x %zu bytes for scores and probabilities",
                              bytes);
        }
    }
    fattn_status st = cpu_parallel_for(s, cpu_threads(s, p), rows,
                                       (size_t)(p->head_dim + 2 * wider_dim(p)) * sizeof(float),
                                       naive_item, &job, msg);
    free(job.scores);
    free(job.probs);
    return st;
}
