/* The naive baseline, for comparison only (fattn_forward_naive): it does what
 * the tiled kernel avoids. S = scale * Q K^T for every (batch, head) with one
 * batched CLBlast SGEMM into a float32 [B*Hq][Sq][Sk] array, P = softmax(S)
 * into a second array of that size (the S and P that the accounting module's
 * naive_bytes counts), then O = P V with a second batched SGEMM. f16 and bf16
 * operands, and f32 ones whose rows CLBlast cannot address, are first packed
 * into dense float32 copies. Everything is enqueued on the context's queue
 * without waiting; the temporary buffers are released after enqueueing, which
 * OpenCL defers until the commands using them have finished. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_common.h"

#ifndef FATTN_HAVE_CLBLAST

fattn_status cl_forward_naive(void *state, const fattn_problem *p, fattn_msg *msg) {
    (void)state, (void)p;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                      "the OpenCL naive baseline needs CLBlast, which was not found when fattn was "
                      "built (Debian: libclblast-dev)");
}

#else
#include <clblast_c.h>

#define NAIVE_TEMPS 6
enum { T_Q, T_K, T_V, T_S, T_P, T_O };

typedef struct naive_run {
    cl_state *s;
    const fattn_problem *p;
    cl_mem temp[NAIVE_TEMPS];
    fattn_msg *msg;
} naive_run;

static fattn_status temp_buffer(naive_run *r, int which, uint64_t floats) {
    uint64_t bytes;
    if (__builtin_mul_overflow(floats, (uint64_t)sizeof(float), &bytes) || bytes > r->s->limits.max_alloc)
        return fattn_fail(r->msg, FATTN_ERR_OUT_OF_MEMORY,
                          "the naive baseline needs a %llu-float buffer; the device allows %llu bytes "
                          "per buffer",
                          (unsigned long long)floats, (unsigned long long)r->s->limits.max_alloc);
    cl_int err;
    r->temp[which] = clCreateBuffer(r->s->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(r->msg, FATTN_ERR_OUT_OF_MEMORY, "clCreateBuffer(%llu bytes) for the naive baseline: %s (%d)",
                          (unsigned long long)bytes, cl_error_name(err), (int)err);
    return FATTN_OK;
}

static fattn_status kernel(naive_run *r, const char *name, cl_kernel *k) {
    char options[96];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DDTYPE=%d -DWG=%d", (int)r->p->dtype,
             r->s->limits.softmax_wg);
    return cl_get_kernel(&r->s->cache, r->s->context, r->s->dev.device, "naive.cl", name, options, k,
                         r->msg);
}

/* Sets the five arguments (mem, offset, three strides) of a strided operand. */
static fattn_status set_operand(naive_run *r, cl_kernel k, cl_uint first, cl_mem m, const fattn_operand *op) {
    const cl_long f[4] = {op->offset, op->stride_batch, op->stride_head, op->stride_seq};
    CL_TRY(r->msg, clSetKernelArg(k, first, sizeof m, &m));
    for (int j = 0; j < 4; j++) CL_TRY(r->msg, clSetKernelArg(k, first + 1 + (cl_uint)j, sizeof f[j], &f[j]));
    return FATTN_OK;
}

static fattn_status launch3(naive_run *r, cl_kernel k, int64_t d, int64_t s, int64_t bh) {
    const size_t global[3] = {(size_t)d, (size_t)s, (size_t)bh};
    CL_TRY(r->msg, clEnqueueNDRangeKernel(r->s->queue, k, 3, NULL, global, NULL, 0, NULL, NULL));
    return FATTN_OK;
}

/* Dense float32 copy of a [B][H][S][D] operand into temp[which]. */
static fattn_status pack(naive_run *r, int which, const fattn_operand *op, int64_t heads, int64_t seq) {
    const int64_t B = r->p->batch, D = r->p->head_dim;
    fattn_status st = temp_buffer(r, which, (uint64_t)(B * heads * seq * D));
    cl_kernel k;
    const cl_int H = (cl_int)heads;
    if (st == FATTN_OK) st = kernel(r, "pack_f32", &k);
    if (st == FATTN_OK) st = set_operand(r, k, 0, cl_mem_of(op), op);
    if (st != FATTN_OK) return st;
    CL_TRY(r->msg, clSetKernelArg(k, 5, sizeof H, &H));
    CL_TRY(r->msg, clSetKernelArg(k, 6, sizeof(cl_mem), &r->temp[which]));
    return launch3(r, k, D, seq, B * heads);
}

/* Offsets for the batched GEMMs: operand op of (b, h) for every b*Hq+h, where
 * h is divided by `group` for K and V. A packed operand has dense offsets. */
static void offsets(size_t *out, const fattn_problem *p, const fattn_operand *op, int packed,
                    int64_t group, int64_t rows_per_head, int64_t row_len) {
    for (int64_t bh = 0; bh < p->batch * p->heads_q; bh++) {
        const int64_t b = bh / p->heads_q, h = (bh % p->heads_q) / group;
        out[bh] = packed ? (size_t)((b * (p->heads_q / group) + h) * rows_per_head * row_len)
                         : (size_t)(op->offset + b * op->stride_batch + h * op->stride_head);
    }
}

static fattn_status blast(naive_run *r, CLBlastStatusCode code, const char *what) {
    if (code == CLBlastSuccess) return FATTN_OK;
    if (code > -100) {   /* CLBlast passes OpenCL's own codes through */
        const cl_int err = (cl_int)code;
        const int oom = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
                        err == CL_OUT_OF_HOST_MEMORY;
        return fattn_fail(r->msg, oom ? FATTN_ERR_OUT_OF_MEMORY : FATTN_ERR_DEVICE, "CLBlast %s: %s (%d)",
                          what, cl_error_name(err), (int)err);
    }
    return fattn_fail(r->msg, FATTN_ERR_DEVICE, "CLBlast %s failed with CLBlast status %d (clblast_c.h)",
                      what, (int)code);
}

static fattn_status run(naive_run *r, size_t *off_a, size_t *off_b, size_t *off_c, float *alphas,
                        float *betas) {
    const fattn_problem *p = r->p;
    const int64_t BH = p->batch * p->heads_q, Sq = p->seq_q, Sk = p->seq_kv, D = p->head_dim;
    const int64_t group = p->heads_q / p->heads_kv;
    /* CLBlast takes f32 with a leading dimension of at least D; anything else is packed. */
    const int direct_qkv = p->dtype == FATTN_F32 && p->q.stride_seq >= D && p->k.stride_seq >= D &&
                           p->v.stride_seq >= D;
    const int direct_o = p->dtype == FATTN_F32 && p->o.stride_seq >= D;
    fattn_status st = FATTN_OK;
    if (!direct_qkv && ((st = pack(r, T_Q, &p->q, p->heads_q, Sq)) || (st = pack(r, T_K, &p->k, p->heads_kv, Sk)) ||
                        (st = pack(r, T_V, &p->v, p->heads_kv, Sk))))
        return st;
    cl_mem q = direct_qkv ? cl_mem_of(&p->q) : r->temp[T_Q];
    cl_mem k = direct_qkv ? cl_mem_of(&p->k) : r->temp[T_K];
    cl_mem v = direct_qkv ? cl_mem_of(&p->v) : r->temp[T_V];
    if ((st = temp_buffer(r, T_S, (uint64_t)(BH * Sq * Sk))) || (st = temp_buffer(r, T_P, (uint64_t)(BH * Sq * Sk))))
        return st;
    if (!direct_o && (st = temp_buffer(r, T_O, (uint64_t)(BH * Sq * D)))) return st;

    /* S = (scale * log2 e) Q K^T: the softmax kernel then runs on exp2. */
    for (int64_t i = 0; i < BH; i++) {
        alphas[i] = p->scale * 1.4426950408889634f;
        betas[i] = 0.0f;
        off_c[i] = (size_t)(i * Sq * Sk);
    }
    offsets(off_a, p, &p->q, !direct_qkv, 1, Sq, D);
    offsets(off_b, p, &p->k, !direct_qkv, group, Sk, D);
    cl_command_queue queue = r->s->queue;
    st = blast(r, CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                      (size_t)Sq, (size_t)Sk, (size_t)D, alphas, q, off_a,
                                      direct_qkv ? (size_t)p->q.stride_seq : (size_t)D, k, off_b,
                                      direct_qkv ? (size_t)p->k.stride_seq : (size_t)D, betas,
                                      r->temp[T_S], off_c, (size_t)Sk, (size_t)BH, &queue, NULL),
               "SgemmBatched (scores)");
    if (st != FATTN_OK) return st;

    cl_kernel sm;
    if ((st = kernel(r, "softmax_rows", &sm)) != FATTN_OK) return st;
    const fattn_operand none = {0};
    const cl_mem lse = p->has_lse ? cl_mem_of(&p->lse) : NULL;
    if ((st = set_operand(r, sm, 2, lse, p->has_lse ? &p->lse : &none)) != FATTN_OK) return st;
    const cl_int ints[5] = {p->has_lse, (cl_int)p->heads_q, (cl_int)Sq, (cl_int)Sk, p->causal};
    CL_TRY(r->msg, clSetKernelArg(sm, 0, sizeof(cl_mem), &r->temp[T_S]));
    CL_TRY(r->msg, clSetKernelArg(sm, 1, sizeof(cl_mem), &r->temp[T_P]));
    for (cl_uint i = 0; i < 5; i++) CL_TRY(r->msg, clSetKernelArg(sm, 7 + i, sizeof(cl_int), &ints[i]));
    const size_t wg = (size_t)r->s->limits.softmax_wg;
    const size_t global[2] = {wg * (size_t)Sq, (size_t)BH}, local[2] = {wg, 1};
    CL_TRY(r->msg, clEnqueueNDRangeKernel(queue, sm, 2, NULL, global, local, 0, NULL, NULL));

    /* O = P V, straight into the caller's O when CLBlast can address it. */
    for (int64_t i = 0; i < BH; i++) {
        alphas[i] = 1.0f;
        off_a[i] = (size_t)(i * Sq * Sk);
    }
    offsets(off_b, p, &p->v, !direct_qkv, group, Sk, D);
    offsets(off_c, p, &p->o, !direct_o, 1, Sq, D);
    st = blast(r, CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo,
                                      (size_t)Sq, (size_t)D, (size_t)Sk, alphas, r->temp[T_P], off_a,
                                      (size_t)Sk, v, off_b, direct_qkv ? (size_t)p->v.stride_seq : (size_t)D,
                                      betas, direct_o ? cl_mem_of(&p->o) : r->temp[T_O], off_c,
                                      direct_o ? (size_t)p->o.stride_seq : (size_t)D, (size_t)BH, &queue, NULL),
               "SgemmBatched (output)");
    if (st != FATTN_OK || direct_o) return st;

    cl_kernel un;
    if ((st = kernel(r, "unpack_out", &un)) != FATTN_OK) return st;
    const cl_int H = (cl_int)p->heads_q;
    CL_TRY(r->msg, clSetKernelArg(un, 0, sizeof(cl_mem), &r->temp[T_O]));
    if ((st = set_operand(r, un, 1, cl_mem_of(&p->o), &p->o)) != FATTN_OK) return st;
    CL_TRY(r->msg, clSetKernelArg(un, 6, sizeof H, &H));
    return launch3(r, un, D, Sq, BH);
}

/* seq_kv = 0: no key to attend to, so O = 0 and lse = -inf, as in the tiled
 * kernel. The softmax and unpack kernels write exactly that from an all-zero
 * row of zero keys. */
static fattn_status no_keys(naive_run *r) {
    const fattn_problem *p = r->p;
    const int64_t BH = p->batch * p->heads_q, Sq = p->seq_q, D = p->head_dim;
    fattn_status st = temp_buffer(r, T_O, (uint64_t)(BH * Sq * D));
    if (st != FATTN_OK) return st;
    const cl_float zero = 0.0f;
    CL_TRY(r->msg, clEnqueueFillBuffer(r->s->queue, r->temp[T_O], &zero, sizeof zero, 0,
                                       (size_t)(BH * Sq * D) * sizeof(float), 0, NULL, NULL));
    cl_kernel un;
    if ((st = kernel(r, "unpack_out", &un)) != FATTN_OK) return st;
    const cl_int H = (cl_int)p->heads_q;
    CL_TRY(r->msg, clSetKernelArg(un, 0, sizeof(cl_mem), &r->temp[T_O]));
    if ((st = set_operand(r, un, 1, cl_mem_of(&p->o), &p->o)) != FATTN_OK) return st;
    CL_TRY(r->msg, clSetKernelArg(un, 6, sizeof H, &H));
    if ((st = launch3(r, un, D, Sq, BH)) != FATTN_OK || !p->has_lse) return st;

    cl_kernel sm;
    if ((st = kernel(r, "softmax_rows", &sm)) != FATTN_OK) return st;
    const cl_int ints[5] = {1, (cl_int)p->heads_q, (cl_int)Sq, 0, 0};
    CL_TRY(r->msg, clSetKernelArg(sm, 0, sizeof(cl_mem), &r->temp[T_O]));   /* read nothing */
    CL_TRY(r->msg, clSetKernelArg(sm, 1, sizeof(cl_mem), &r->temp[T_O]));   /* write nothing */
    if ((st = set_operand(r, sm, 2, cl_mem_of(&p->lse), &p->lse)) != FATTN_OK) return st;
    for (cl_uint i = 0; i < 5; i++) CL_TRY(r->msg, clSetKernelArg(sm, 7 + i, sizeof(cl_int), &ints[i]));
    const size_t wg = (size_t)r->s->limits.softmax_wg;
    const size_t global[2] = {wg * (size_t)Sq, (size_t)BH}, local[2] = {wg, 1};
    CL_TRY(r->msg, clEnqueueNDRangeKernel(r->s->queue, sm, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}

fattn_status cl_forward_naive(void *state, const fattn_problem *p, fattn_msg *msg) {
    naive_run r = {state, p, {NULL}, msg};
    const int64_t int_max = 0x7fffffff;
    if (p->seq_q > int_max || p->seq_kv > int_max || p->batch * p->heads_q > int_max ||
        p->head_dim * p->seq_q > int_max || p->head_dim * p->seq_kv > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL naive baseline indexes rows with 32-bit integers");
    const int64_t BH = p->batch * p->heads_q;
    size_t *off = malloc(3 * (size_t)BH * sizeof *off);
    float *scalars = malloc(2 * (size_t)BH * sizeof *scalars);
    fattn_status st = off && scalars ? FATTN_OK
                                     : fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate GEMM offsets");
    if (st == FATTN_OK)
        st = p->seq_kv == 0 ? no_keys(&r) : run(&r, off, off + BH, off + 2 * BH, scalars, scalars + BH);
    for (int i = 0; i < NAIVE_TEMPS; i++)
        if (r.temp[i]) clReleaseMemObject(r.temp[i]);
    free(off);
    free(scalars);
    return st;
}

#endif /* FATTN_HAVE_CLBLAST */
