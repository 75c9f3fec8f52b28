/* fattn_combine on the CPU: per row, the log-sum-exp merge of the parts,
 * in float32 like the kernels, one row per work item. */
#include <math.h>

#include "cpu.h"

typedef struct combine_job {
    const fattn_problem *p;
} combine_job;

static void combine_row(void *arg, int64_t row, float *scratch) {
    const fattn_problem *p = ((const combine_job *)arg)->p;
    const int64_t D = p->head_dim, i = row % p->seq_q, bh = row / p->seq_q;
    const int64_t b = bh / p->heads_q, h = bh % p->heads_q;
    float *acc = scratch, *part = scratch + D;
    /* The shift is the largest lse; a part with -inf saw no key and is
     * skipped (its O is not read). NaN and +inf reach l and make the row NaN. */
    float m = -INFINITY;
    for (int64_t k = 0; k < p->parts; k++) {
        fattn_operand lo = p->part_lse;
        lo.offset += k * p->part_lse_stride;
        const float x = *(const float *)(const void *)cpu_elem(&lo, FATTN_F32, b, h, i);
        m = x > m ? x : m;
    }
    const float shift = m == -INFINITY ? 0.0f : m;
    float l = 0.0f;
    for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
    for (int64_t k = 0; k < p->parts; k++) {
        fattn_operand lo = p->part_lse, oo = p->part_o;
        lo.offset += k * p->part_lse_stride;
        oo.offset += k * p->part_o_stride;
        const float x = *(const float *)(const void *)cpu_elem(&lo, FATTN_F32, b, h, i);
        if (x == -INFINITY) continue;
        const float w = expf(x - shift);
        l += w;
        cpu_load_row(part, cpu_elem(&oo, p->part_dtype, b, h, i), p->part_dtype, D, 1.0f);
        for (int64_t d = 0; d < D; d++) acc[d] += w * part[d];
    }
    cpu_finish_row(p, b, h, i, acc, m, l);
}

fattn_status cpu_combine(void *state, const fattn_problem *p, const fattn_plan *plan,
                         fattn_msg *msg) {
    (void)plan;
    combine_job job = {p};
    const int64_t rows = p->batch * p->heads_q * p->seq_q;
    return cpu_parallel_for(state, cpu_threads(state, p), rows, (size_t)(2 * p->head_dim) * sizeof(float),
                            combine_row, &job, msg);
}
