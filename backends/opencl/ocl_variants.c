/* The attention variants on OpenCL, host side of kernels_cl/variants.cl:
 * the build options that make a variant program (each combination of
 * FATTN_VAR_* bits its own, cached like the others) and its kernel
 * arguments, shared by the tiled forward and the split-KV decode. */
#include <stdio.h>

#include "ocl_common.h"

void ocl_variant_options(const fattn_problem *p, unsigned bits, int dvpad, char *buf, size_t len) {
    int n = 0;
    buf[0] = '\0';
    if (bits) n = snprintf(buf, len, " -DFATTN_VAR=%u", bits);
    if ((bits & FATTN_VAR_BIAS) && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " -DBIAS_DTYPE=%d", (int)p->var.bias_dtype);
    if ((bits & FATTN_VAR_HEAD_DIM_V) && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " -DDVPAD=%d", dvpad);
}

/* A window side as the kernels take it: -1 (unbounded), else at most
 * seq_q + seq_kv (the longest sequences), which hides or shows the same
 * keys and keeps i + off +- w far inside a long. */
static cl_long window_side(const fattn_problem *p, int64_t w) {
    const int64_t most = p->seq_q + p->seq_kv;
    return (cl_long)(w < 0 ? -1 : w > most ? most : w);
}

fattn_status ocl_variant_args(cl_kernel k, cl_uint *a, const fattn_problem *p, unsigned bits,
                              fattn_msg *msg) {
    if (!bits) return FATTN_OK;
    const fattn_variants *v = &p->var;
    const cl_long win[2] = {window_side(p, v->window_left), window_side(p, v->window_right)};
    for (int i = 0; i < 2; i++) OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof win[i], &win[i]));
    /* The cap in the kernels' log2 units (scores are scale * log2(e) * q.k). */
    const cl_float cap2 = (bits & FATTN_VAR_SOFTCAP) ? v->softcap * 1.4426950408889634f : 0.0f;
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof cap2, &cap2));
    /* Slopes (b, h), sinks (h), bias (b, h, i, j): a tensor the build does
     * not use goes as NULL. An empty bias (seq_q or seq_kv 0) carries the
     * core's placeholder, not a buffer: it is never read either. */
    const int bias_used = (bits & FATTN_VAR_BIAS) && p->seq_q > 0 && p->seq_kv > 0;
    const struct {
        const fattn_operand *op;
        int used, nf;
    } t[3] = {{&v->alibi, (bits & FATTN_VAR_ALIBI) != 0, 2},
              {&v->sinks, (bits & FATTN_VAR_SINKS) != 0, 1},
              {&v->bias, bias_used, 4}};
    for (int i = 0; i < 3; i++) {
        const fattn_operand *op = t[i].op;
        const cl_mem m = t[i].used ? ocl_mem_of(op) : NULL;
        /* alibi: batch, head; sinks: head; bias: batch, head, seq, dim. */
        const cl_long all[5] = {op->offset, op->stride_batch, op->stride_head, op->stride_seq,
                                v->bias_stride_dim};
        cl_long f[5] = {0, 0, 0, 0, 0};
        if (m) {
            f[0] = all[0];
            if (i == 1)
                f[1] = all[2];
            else
                for (int j = 1; j <= t[i].nf; j++) f[j] = all[j];
        }
        OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof m, &m));
        for (int j = 0; j <= t[i].nf; j++)
            OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof f[j], &f[j]));
    }
    const cl_int Dv = (cl_int)p->head_dim_v;
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof Dv, &Dv));
    return FATTN_OK;
}
