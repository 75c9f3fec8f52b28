/* CPU attention: the tiled online-softmax algorithm (FlashAttention-2's work
 * split: one work item per (batch, head, query tile), streaming key/value
 * tiles), and the naive baseline that materialises scores and probabilities. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "half.h"

void cpu_load_row(float *dst, const void *src, fattn_dtype t, int64_t n, float mul) {
    if (t == FATTN_F32) {
        const float *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = s[i] * mul;
    } else {
        const uint16_t *s = src;
        if (t == FATTN_F16)
            for (int64_t i = 0; i < n; i++) dst[i] = fattn_f16_to_f32(s[i]) * mul;
        else
            for (int64_t i = 0; i < n; i++) dst[i] = fattn_bf16_to_f32(s[i]) * mul;
    }
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

static float dot(const float *restrict a, const float *restrict b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Keys j < key_limit(p, i) are visible to query row i (either causal
 * alignment: backend.h's one definition). */
#define key_limit fattn_key_limit

/* The value a row's scores are shifted by before exp: its running max, or 0
 * while that is -inf (no finite score yet), so that exp never sees
 * -inf - (-inf). A NaN score never becomes the max and reaches l as NaN. */
static inline float shift_of(float m) { return m == -INFINITY ? 0.0f : m; }

/* Writes a finished row: O = acc / l and LSE = m + log(l); a row with no
 * finite score (l == 0) gets 0 and -inf, and a NaN l (a NaN or +inf score)
 * stays NaN in both. acc is overwritten. */
void cpu_finish_row(const fattn_problem *p, int64_t b, int64_t h, int64_t i, float *acc, float m,
                    float l) {
    const int64_t D = p->head_dim;
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
    for (int64_t d = 0; d < D; d++) acc[d] *= inv;
    cpu_store_row((void *)cpu_elem(&p->o, p->dtype, b, h, i), acc, p->dtype, D);
    if (p->has_lse) {
        float *lse = (float *)(void *)cpu_elem(&p->lse, FATTN_F32, b, h, i);
        *lse = l == 0.0f ? -INFINITY : m + logf(l);
    }
}

typedef struct tiled_job {
    const fattn_problem *p;
    int64_t tq, tkv, tiles_per_head;
} tiled_job;

/* Scratch layout per thread, in floats. */
static size_t tiled_scratch(int64_t tq, int64_t tkv, int64_t D) {
    return (size_t)(tq * D /*Q*/ + 2 * tkv * D /*K,V*/ + tkv /*scores*/ + tq * D /*acc*/ + 2 * tq);
}

static void tiled_item(void *arg, int64_t item, float *scratch) {
    const tiled_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim, tq = job->tq, tkv = job->tkv;
    const int64_t tile = item % job->tiles_per_head;
    const int64_t bh = item / job->tiles_per_head;
    const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
    const int64_t hk = h / (p->heads_q / p->heads_kv);
    const int64_t q0 = tile * tq;
    const int64_t nq = (p->seq_q - q0) < tq ? (p->seq_q - q0) : tq;

    float *Q = scratch, *K = Q + tq * D, *V = K + tkv * D, *S = V + tkv * D;
    float *acc = S + tkv, *m = acc + tq * D, *l = m + tq;
    for (int64_t i = 0; i < nq; i++) {
        /* Folding the scale into Q saves a multiply per score. */
        cpu_load_row(Q + i * D, cpu_elem(&p->q, p->dtype, b, h, q0 + i), p->dtype, D, p->scale);
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(acc, 0, (size_t)(nq * D) * sizeof(float));

    /* Keys past what the tile's last row sees are never loaded: causal tiles
     * above the diagonal are skipped, not masked. */
    const int64_t kv_end = key_limit(p, q0 + nq - 1);
    for (int64_t j0 = 0; j0 < kv_end; j0 += tkv) {
        const int64_t nk = (kv_end - j0) < tkv ? (kv_end - j0) : tkv;
        for (int64_t j = 0; j < nk; j++) {
            cpu_load_row(K + j * D, cpu_elem(&p->k, p->dtype, b, hk, j0 + j), p->dtype, D, 1.0f);
            cpu_load_row(V + j * D, cpu_elem(&p->v, p->dtype, b, hk, j0 + j), p->dtype, D, 1.0f);
        }
        for (int64_t i = 0; i < nq; i++) {
            int64_t jn = key_limit(p, q0 + i) - j0;
            if (jn > nk) jn = nk;
            if (jn <= 0) continue;
            float mx = -INFINITY;
            for (int64_t j = 0; j < jn; j++) {
                S[j] = dot(Q + i * D, K + j * D, D);
                mx = S[j] > mx ? S[j] : mx;
            }
            const float m_new = mx > m[i] ? mx : m[i];
            const float shift = shift_of(m_new);
            const float alpha = expf(m[i] - shift); /* 0 while m[i] is -inf */
            float sum = 0.0f;
            float *a = acc + i * D;
            for (int64_t d = 0; d < D; d++) a[d] *= alpha;
            for (int64_t j = 0; j < jn; j++) {
                const float pj = expf(S[j] - shift);
                const float *vj = V + j * D;
                sum += pj;
                for (int64_t d = 0; d < D; d++) a[d] += pj * vj[d];
            }
            l[i] = l[i] * alpha + sum;
            m[i] = m_new;
        }
    }
    for (int64_t i = 0; i < nq; i++) cpu_finish_row(p, b, h, q0 + i, acc + i * D, m[i], l[i]);
}

fattn_status cpu_forward_tiled(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg) {
    const cpu_state *s = state;
    tiled_job job = {p, plan->tiling.tile_q, plan->tiling.tile_kv, 0};
    job.tiles_per_head = (p->seq_q + job.tq - 1) / job.tq;
    const int64_t items = p->batch * p->heads_q * job.tiles_per_head;
    const size_t scratch = tiled_scratch(job.tq, job.tkv, p->head_dim) * sizeof(float);
    return cpu_parallel_for(cpu_threads(s, p), items, scratch, tiled_item, &job, msg);
}

/* ---- Naive baseline --------------------------------------------------------- */

typedef struct naive_job {
    const fattn_problem *p;
    float *scores, *probs; /* [batch * heads_q * seq_q, seq_kv] each */
} naive_job;

/* One query row: S = scale Q K^T (masked -inf), P = softmax(S), O = P V. */
static void naive_item(void *arg, int64_t row, float *scratch) {
    const naive_job *job = arg;
    const fattn_problem *p = job->p;
    const int64_t D = p->head_dim, Sk = p->seq_kv;
    const int64_t i = row % p->seq_q, bh = row / p->seq_q;
    const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
    const int64_t hk = h / (p->heads_q / p->heads_kv);
    float *q = scratch, *kv = q + D, *out = kv + D;
    float *S = Sk ? job->scores + row * Sk : NULL, *P = Sk ? job->probs + row * Sk : NULL;
    const int64_t lim = key_limit(p, i);

    cpu_load_row(q, cpu_elem(&p->q, p->dtype, b, h, i), p->dtype, D, p->scale);
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < Sk; j++) {
        cpu_load_row(kv, cpu_elem(&p->k, p->dtype, b, hk, j), p->dtype, D, 1.0f);
        S[j] = j < lim ? dot(q, kv, D) : -INFINITY;
        mx = S[j] > mx ? S[j] : mx;
    }
    const float shift = shift_of(mx);
    for (int64_t j = 0; j < Sk; j++) {
        P[j] = j < lim ? expf(S[j] - shift) : 0.0f;
        sum += P[j];
    }
    memset(out, 0, (size_t)D * sizeof(float));
    for (int64_t j = 0; j < lim; j++) {
        cpu_load_row(kv, cpu_elem(&p->v, p->dtype, b, hk, j), p->dtype, D, 1.0f);
        for (int64_t d = 0; d < D; d++) out[d] += P[j] * kv[d];
    }
    cpu_finish_row(p, b, h, i, out, mx, sum);
}

fattn_status cpu_forward_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                               fattn_msg *msg) {
    (void)plan;
    const cpu_state *s = state;
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
    fattn_status st = cpu_parallel_for(
        cpu_threads(s, p), rows, (size_t)(3 * p->head_dim) * sizeof(float), naive_item, &job, msg);
    free(job.scores);
    free(job.probs);
    return st;
}
