/* The naive baseline, for comparison only (fattn_forward_naive): it does what
 * the tiled kernel avoids. S = scale * Q K^T for every (batch, head) with one
 * batched CLBlast SGEMM into a float32 [B*Hq][Sq][Sk] array, P = softmax(S)
 * into a second array of that size (the S and P that the accounting module's
 * naive_bytes counts), then O = P V with a second batched SGEMM. f16 and bf16
 * operands, and f32 ones whose rows CLBlast cannot address, are first packed
 * into dense float32 copies. CLBlast's kernels index with 32-bit integers,
 * also inside the padded copies its batched GEMM makes of each matrix, so S
 * and P are split into buffers, one per chunk of (batch, head) pairs whose
 * padded matrices stay below 2^31 floats (and within the device's largest
 * buffer), all held at once; operands whose extent passes 2^31 elements are
 * packed. Everything is enqueued on the context's queue; CLBlast itself
 * waits for the queue when it uploads its offset arrays, so this baseline
 * blocks the host, which a baseline may. The temporary buffers are released
 * after enqueueing, which OpenCL defers until the commands using them have
 * finished. CLBlast is opened with dlopen on first use (below), on the
 * first plan of this variant. CLBlast keeps a process-wide cache of its
 * compiled programs that retains their cl_context (until CLBlastClearCache),
 * so a context that ran this baseline, the caller's native one included,
 * outlives fattn's release of it; fattn's own references are all released
 * at close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_common.h"

#ifndef FATTN_HAVE_CLBLAST

fattn_status ocl_naive_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg) {
    (void)state, (void)p, (void)plan;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                      "the OpenCL naive baseline needs CLBlast, which was not found when fattn was "
                      "built (Debian: libclblast-dev)");
}

fattn_status ocl_naive_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg) {
    (void)state, (void)p, (void)plan;
    return fattn_fail(msg, FATTN_ERR_INTERNAL,
                      "the OpenCL naive baseline was built without CLBlast");
}

#else
#include <clblast_c.h>
#include <dlfcn.h>
#include <pthread.h>

/* CLBlast is opened on the first naive call, not linked: the module (and the
 * tiled kernel) then loads where CLBlast is missing, and processes that never
 * ask for the baseline never load it. */
typedef CLBlastStatusCode (*sgemm_batched_fn)(CLBlastLayout, CLBlastTranspose, CLBlastTranspose,
                                              size_t, size_t, size_t, const float *, cl_mem,
                                              const size_t *, size_t, cl_mem, const size_t *,
                                              size_t, const float *, cl_mem, const size_t *, size_t,
                                              size_t, cl_command_queue *, cl_event *);
static pthread_once_t clblast_once = PTHREAD_ONCE_INIT;
static sgemm_batched_fn sgemm_batched;
static char clblast_error[256];

static void open_clblast(void) {
    const char *names[] = {"libclblast.so.1", "libclblast.so"};
    void *h = NULL;
    for (size_t i = 0; i < 2 && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(clblast_error, sizeof clblast_error, "%s", dlerror());
        return;
    }
    *(void **)&sgemm_batched = dlsym(h, "CLBlastSgemmBatched");
    if (!sgemm_batched)
        snprintf(clblast_error, sizeof clblast_error, "%s has no CLBlastSgemmBatched", names[0]);
}

#define INT_LIMIT FATTN_INT32_MAX /* CLBlast's kernels index buffers with int */

/* The naive variant's plan: how S and P are split into buffers. */
typedef struct naive_plan {
    int64_t chunk; /* (batch, head) pairs per S/P buffer */
    int chunks;    /* S/P buffers */
} naive_plan;
FATTN_PLAN_FITS(naive_plan);

enum { T_Q, T_K, T_V, T_O, T_FIXED }; /* packed copies; S and P chunks follow */

typedef struct naive_run {
    ocl_state *s;
    const fattn_problem *p;
    cl_mem *temp; /* T_FIXED packed copies, then S and P per chunk */
    int chunks;   /* S/P buffers: chunk (batch, head) pairs each */
    int64_t chunk;
    fattn_msg *msg;
    size_t *off_a, *off_b, *off_c; /* GEMM offsets, chunk entries each */
    float *alphas, *betas;
} naive_run;

static fattn_status temp_buffer(naive_run *r, int which, int64_t floats) {
    const uint64_t bytes = (uint64_t)floats * sizeof(float); /* floats < 2^62: validated sizes */
    if (bytes > r->s->limits.max_alloc)
        return fattn_fail(
            r->msg, FATTN_ERR_OUT_OF_MEMORY,
            "the naive baseline needs a %llu-byte buffer; the device allows %llu bytes "
            "per buffer",
            (unsigned long long)bytes, (unsigned long long)r->s->limits.max_alloc);
    cl_int err;
    r->temp[which] = clCreateBuffer(r->s->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(
            r->msg, err == CL_INVALID_BUFFER_SIZE ? FATTN_ERR_OUT_OF_MEMORY : ocl_status_of(err),
            "clCreateBuffer(%llu bytes) for the naive baseline: %s (%d)", (unsigned long long)bytes,
            ocl_error_name(err), (int)err);
    return FATTN_OK;
}

static fattn_status kernel(naive_run *r, const char *name, cl_kernel *k) {
    char options[96];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DDTYPE=%d -DWG=%d", (int)r->p->dtype,
             r->s->limits.softmax_wg);
    return ocl_get_kernel(&r->s->cache, r->s->context, r->s->dev.device, "naive.cl", name, options,
                          k, r->msg);
}

/* A strided [B][H][S][D] array: the caller's operand or a packed copy. */
typedef struct view {
    cl_mem mem;
    cl_long offset, stride_batch, stride_head, stride_seq;
} view;

static view operand_view(const fattn_operand *op) {
    const view v = {ocl_mem_of(op), op->offset, op->stride_batch, op->stride_head, op->stride_seq};
    return v;
}

/* A dense copy made by pack (or the dense float32 O). */
static view dense_view(cl_mem mem, int64_t heads, int64_t seq, int64_t D) {
    const view v = {mem, 0, heads * seq * D, seq * D, D};
    return v;
}

/* Sets the five arguments (mem, offset, three strides) of a strided array. */
static fattn_status set_view(naive_run *r, cl_kernel k, cl_uint first, view v) {
    const cl_long f[4] = {v.offset, v.stride_batch, v.stride_head, v.stride_seq};
    OCL_TRY(r->msg, clSetKernelArg(k, first, sizeof v.mem, &v.mem));
    for (int j = 0; j < 4; j++)
        OCL_TRY(r->msg, clSetKernelArg(k, first + 1 + (cl_uint)j, sizeof f[j], &f[j]));
    return FATTN_OK;
}

static fattn_status set_operand(naive_run *r, cl_kernel k, cl_uint first, const fattn_operand *op) {
    return set_view(r, k, first, operand_view(op));
}

static fattn_status launch3(naive_run *r, cl_kernel k, int64_t d, int64_t s, int64_t bh) {
    const size_t global[3] = {(size_t)d, (size_t)s, (size_t)bh};
    OCL_TRY(r->msg, clEnqueueNDRangeKernel(r->s->queue, k, 3, NULL, global, NULL, 0, NULL, NULL));
    return FATTN_OK;
}

/* Dense float32 copy of a [B][H][S][D] operand into temp[which]. */
static fattn_status pack(naive_run *r, int which, const fattn_operand *op, int64_t heads,
                         int64_t seq) {
    const int64_t B = r->p->batch, D = r->p->head_dim;
    fattn_status st = temp_buffer(r, which, B * heads * seq * D);
    cl_kernel k;
    const cl_int H = (cl_int)heads;
    if (st == FATTN_OK) st = kernel(r, "pack_f32", &k);
    if (st == FATTN_OK) st = set_operand(r, k, 0, op);
    if (st != FATTN_OK) return st;
    OCL_TRY(r->msg, clSetKernelArg(k, 5, sizeof H, &H));
    OCL_TRY(r->msg, clSetKernelArg(k, 6, sizeof(cl_mem), &r->temp[which]));
    return launch3(r, k, D, seq, B * heads);
}

/* Runs `name` over the caller's O (grid D x Sq x B*Hq): unpack_out copies
 * the dense float32 `src` there, zero_out (src NULL) writes zeros. */
static fattn_status write_o(naive_run *r, const char *name, cl_mem src) {
    const fattn_problem *p = r->p;
    const cl_uint first = src ? 1 : 0; /* unpack_out takes src first */
    const cl_int H = (cl_int)p->heads_q;
    cl_kernel k;
    fattn_status st = kernel(r, name, &k);
    if (st == FATTN_OK) st = set_operand(r, k, first, &p->o);
    if (st != FATTN_OK) return st;
    if (src) OCL_TRY(r->msg, clSetKernelArg(k, 0, sizeof src, &src));
    OCL_TRY(r->msg, clSetKernelArg(k, first + 5, sizeof H, &H));
    return launch3(r, k, p->head_dim, p->seq_q, p->batch * p->heads_q);
}

/* Rows bh0 .. bh0+count of S (in s_mem) to P (in p_mem), with the lse. */
static fattn_status softmax(naive_run *r, cl_mem s_mem, cl_mem p_mem, int64_t bh0, int64_t count) {
    const fattn_problem *p = r->p;
    cl_kernel k;
    fattn_status st = kernel(r, "softmax_rows", &k);
    const fattn_operand none = {0};
    if (st == FATTN_OK) st = set_operand(r, k, 2, p->has_lse ? &p->lse : &none);
    if (st != FATTN_OK) return st;
    const cl_int ints[6] = {p->has_lse,        (cl_int)p->heads_q, (cl_int)p->seq_q,
                            (cl_int)p->seq_kv, p->causal,          (cl_int)bh0};
    const cl_long causal_offset = ocl_causal_offset(p);
    OCL_TRY(r->msg, clSetKernelArg(k, 0, sizeof(cl_mem), &s_mem));
    OCL_TRY(r->msg, clSetKernelArg(k, 1, sizeof(cl_mem), &p_mem));
    for (cl_uint i = 0; i < 6; i++)
        OCL_TRY(r->msg, clSetKernelArg(k, 7 + i, sizeof(cl_int), &ints[i]));
    OCL_TRY(r->msg, clSetKernelArg(k, 13, sizeof causal_offset, &causal_offset));
    const size_t wg = (size_t)r->s->limits.softmax_wg;
    const size_t global[2] = {wg * (size_t)p->seq_q, (size_t)count}, local[2] = {wg, 1};
    OCL_TRY(r->msg, clEnqueueNDRangeKernel(r->s->queue, k, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}

/* Whether the float32 V (the caller's f32 operand or its packed copy) holds
 * a NaN or an infinity: one pass over V, then a blocking read of the flag. */
static fattn_status v_nonfinite(naive_run *r, view v, int *found) {
    const fattn_problem *p = r->p;
    const cl_int H = (cl_int)p->heads_kv;
    cl_int err, flag = 0;
    cl_kernel k;
    fattn_status st = kernel(r, "find_nonfinite", &k);
    if (st == FATTN_OK) st = set_view(r, k, 0, v);
    if (st != FATTN_OK) return st;
    cl_mem f = clCreateBuffer(r->s->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof flag,
                              &flag, &err);
    OCL_TRY(r->msg, err);
    if ((err = clSetKernelArg(k, 5, sizeof H, &H)) == CL_SUCCESS &&
        (err = clSetKernelArg(k, 6, sizeof f, &f)) == CL_SUCCESS) {
        st = launch3(r, k, p->head_dim, p->seq_kv, p->batch * p->heads_kv);
        if (st == FATTN_OK)
            err =
                clEnqueueReadBuffer(r->s->queue, f, CL_TRUE, 0, sizeof flag, &flag, 0, NULL, NULL);
    }
    clReleaseMemObject(f);
    OCL_TRY(r->msg, err);
    *found = flag != 0;
    return st;
}

/* O = P V over the keys each row sees, for pairs bh0 .. bh0+count, where a
 * GEMM would multiply a hidden key's NaN or infinity by its zero weight. */
static fattn_status pv_visible(naive_run *r, cl_mem P, view v, view o, int64_t bh0, int64_t count) {
    const fattn_problem *p = r->p;
    const cl_int ints[4] = {(cl_int)p->heads_q, (cl_int)(p->heads_q / p->heads_kv),
                            (cl_int)p->seq_kv, (cl_int)bh0};
    const cl_long causal_offset = ocl_causal_offset(p); /* the limit softmax_rows used */
    cl_kernel k;
    fattn_status st = kernel(r, "pv_visible", &k);
    if (st == FATTN_OK) st = set_view(r, k, 1, v);
    if (st == FATTN_OK) st = set_view(r, k, 6, o);
    if (st != FATTN_OK) return st;
    OCL_TRY(r->msg, clSetKernelArg(k, 0, sizeof P, &P));
    for (cl_uint i = 0; i < 4; i++)
        OCL_TRY(r->msg, clSetKernelArg(k, 11 + i, sizeof(cl_int), &ints[i]));
    OCL_TRY(r->msg, clSetKernelArg(k, 15, sizeof causal_offset, &causal_offset));
    return launch3(r, k, p->head_dim, p->seq_q, count);
}

/* The element offset of (b, h)'s matrix for query-head pairs bh0 .. bh0+count,
 * where h is divided by `group` for K and V. A packed operand is dense. */
static void offsets(size_t *out, const fattn_problem *p, const fattn_operand *op, int packed,
                    int64_t group, int64_t seq, int64_t bh0, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const int64_t b = (bh0 + i) / p->heads_q, h = ((bh0 + i) % p->heads_q) / group;
        out[i] = packed ? (size_t)((b * (p->heads_q / group) + h) * seq * p->head_dim)
                        : (size_t)(op->offset + b * op->stride_batch + h * op->stride_head);
    }
}

/* Can CLBlast address this f32 operand where it lies: a leading dimension of
 * at least D and every element below 2^31? */
static int direct(const fattn_problem *p, const fattn_operand *op, int64_t heads, int64_t seq) {
    const int64_t last = op->offset + (p->batch - 1) * op->stride_batch +
                         (heads - 1) * op->stride_head + (seq - 1) * op->stride_seq + p->head_dim;
    return p->dtype == FATTN_F32 && op->stride_seq >= p->head_dim && op->stride_batch >= 0 &&
           op->stride_head >= 0 && last <= INT_LIMIT;
}

static fattn_status blast(naive_run *r, CLBlastStatusCode code, const char *what) {
    if (code == CLBlastSuccess) return FATTN_OK;
    if (code > -100) { /* CLBlast passes OpenCL's own codes through */
        const cl_int err = (cl_int)code;
        return fattn_fail(r->msg, ocl_status_of(err), "CLBlast %s: %s (%d)", what,
                          ocl_error_name(err), (int)err);
    }
    return fattn_fail(r->msg, FATTN_ERR_DEVICE,
                      "CLBlast %s failed with CLBlast status %d (clblast_c.h)", what, (int)code);
}

static fattn_status run(naive_run *r) {
    const fattn_problem *p = r->p;
    const int64_t BH = p->batch * p->heads_q, Sq = p->seq_q, Sk = p->seq_kv, D = p->head_dim;
    const int64_t group = p->heads_q / p->heads_kv;
    const int direct_qkv = direct(p, &p->q, p->heads_q, Sq) && direct(p, &p->k, p->heads_kv, Sk) &&
                           direct(p, &p->v, p->heads_kv, Sk);
    const int direct_o = direct(p, &p->o, p->heads_q, Sq);
    fattn_status st = FATTN_OK;
    if (!direct_qkv && ((st = pack(r, T_Q, &p->q, p->heads_q, Sq)) ||
                        (st = pack(r, T_K, &p->k, p->heads_kv, Sk)) ||
                        (st = pack(r, T_V, &p->v, p->heads_kv, Sk))))
        return st;
    const cl_mem q = direct_qkv ? ocl_mem_of(&p->q) : r->temp[T_Q];
    const cl_mem k = direct_qkv ? ocl_mem_of(&p->k) : r->temp[T_K];
    const cl_mem v = direct_qkv ? ocl_mem_of(&p->v) : r->temp[T_V];
    const size_t ld_q = direct_qkv ? (size_t)p->q.stride_seq : (size_t)D;
    const size_t ld_k = direct_qkv ? (size_t)p->k.stride_seq : (size_t)D;
    const size_t ld_v = direct_qkv ? (size_t)p->v.stride_seq : (size_t)D;
    if (!direct_o && (st = temp_buffer(r, T_O, BH * Sq * D))) return st;
    /* Causal: keys a row does not see weigh 0 in P, and a GEMM multiplies
     * them all the same (0 * inf = NaN); with a NaN or infinity in V, O is
     * a loop over each row's visible keys instead. */
    const view v_view = direct_qkv ? operand_view(&p->v) : dense_view(v, p->heads_kv, Sk, D);
    const view o_view =
        direct_o ? operand_view(&p->o) : dense_view(r->temp[T_O], p->heads_q, Sq, D);
    int visible_only = 0;
    if (p->causal && (st = v_nonfinite(r, v_view, &visible_only))) return st;
    /* Every S and P chunk exists at once: the naive method's whole footprint. */
    for (int c = 0; c < r->chunks && st == FATTN_OK; c++) {
        const int64_t n = BH - c * r->chunk < r->chunk ? BH - c * r->chunk : r->chunk;
        if ((st = temp_buffer(r, T_FIXED + 2 * c, n * Sq * Sk)) == FATTN_OK)
            st = temp_buffer(r, T_FIXED + 2 * c + 1, n * Sq * Sk);
    }
    cl_command_queue queue = r->s->queue;
    for (int c = 0; c < r->chunks && st == FATTN_OK; c++) {
        const int64_t bh0 = c * r->chunk, n = BH - bh0 < r->chunk ? BH - bh0 : r->chunk;
        const cl_mem S = r->temp[T_FIXED + 2 * c], P = r->temp[T_FIXED + 2 * c + 1];
        /* S = (scale * log2 e) Q K^T: the softmax kernel then runs on exp2. */
        for (int64_t i = 0; i < n; i++) {
            r->alphas[i] = p->scale_log2;
            r->betas[i] = 0.0f;
            r->off_c[i] = (size_t)(i * Sq * Sk);
        }
        offsets(r->off_a, p, &p->q, !direct_qkv, 1, Sq, bh0, n);
        offsets(r->off_b, p, &p->k, !direct_qkv, group, Sk, bh0, n);
        st = blast(r,
                   sgemm_batched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                 (size_t)Sq, (size_t)Sk, (size_t)D, r->alphas, q, r->off_a, ld_q, k,
                                 r->off_b, ld_k, r->betas, S, r->off_c, (size_t)Sk, (size_t)n,
                                 &queue, NULL),
                   "SgemmBatched (scores)");
        if (st == FATTN_OK) st = softmax(r, S, P, bh0, n);
        if (st == FATTN_OK && visible_only) st = pv_visible(r, P, v_view, o_view, bh0, n);
        if (st != FATTN_OK || visible_only) continue;
        /* O = P V, straight into the caller's O when CLBlast can address it. */
        for (int64_t i = 0; i < n; i++) {
            r->alphas[i] = 1.0f;
            r->off_a[i] = (size_t)(i * Sq * Sk);
        }
        offsets(r->off_b, p, &p->v, !direct_qkv, group, Sk, bh0, n);
        offsets(r->off_c, p, &p->o, !direct_o, 1, Sq, bh0, n);
        st = blast(
            r,
            sgemm_batched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, (size_t)Sq,
                          (size_t)D, (size_t)Sk, r->alphas, P, r->off_a, (size_t)Sk, v, r->off_b,
                          ld_v, r->betas, direct_o ? ocl_mem_of(&p->o) : r->temp[T_O], r->off_c,
                          direct_o ? (size_t)p->o.stride_seq : (size_t)D, (size_t)n, &queue, NULL),
            "SgemmBatched (output)");
    }
    return st == FATTN_OK && !direct_o ? write_o(r, "unpack_out", r->temp[T_O]) : st;
}

/* seq_kv = 0: no key to attend to, so O = 0 and lse = -inf, as in the tiled
 * kernel: zero_out writes the zeros, and softmax over zero keys the lse. */
static fattn_status no_keys(naive_run *r) {
    fattn_status st = write_o(r, "zero_out", NULL);
    if (st != FATTN_OK || !r->p->has_lse) return st;
    return softmax(r, NULL, NULL, 0, r->p->batch * r->p->heads_q); /* reads and writes no score */
}

/* x rounded up to CLBlast's largest GEMM tile (its indirect path pads to it). */
static int64_t padded(int64_t x) { return (x + 255) / 256 * 256; }

/* Whether the baseline can run (CLBlast there, sizes within its 32-bit
 * indexing) and how S and P are split: no operand is touched. */
fattn_status ocl_naive_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg) {
    const ocl_state *s = state;
    if (fattn_variants_declined(p, 0, msg)) return FATTN_ERR_UNSUPPORTED;
    pthread_once(&clblast_once, open_clblast);
    if (p->rag.on) return fattn_dense_only(p, "the naive baseline", msg);
    if (!sgemm_batched)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the OpenCL naive baseline needs CLBlast at run time: %s (Debian: libclblast1)",
            clblast_error);
    const int64_t BH = p->batch * p->heads_q;
    const int64_t pq = padded(p->seq_q), pk = padded(p->seq_kv), pd = padded(p->head_dim);
    int64_t per_pair = pq * pk > pq * pd ? pq * pk : pq * pd; /* floats of one padded matrix */
    if (pk * pd > per_pair) per_pair = pk * pd;
    if (per_pair > INT_LIMIT || BH > INT_LIMIT || BH * p->seq_q * p->head_dim > INT_LIMIT ||
        p->batch * p->heads_kv * p->seq_kv * p->head_dim > INT_LIMIT)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the OpenCL naive baseline needs seq_q * seq_kv (each padded to 256), and "
            "batch * heads * seq * head_dim of each operand, below 2^31 (CLBlast indexes "
            "with 32-bit integers)");
    const uint64_t alloc_floats = s->limits.max_alloc / sizeof(float);
    const int64_t limit = alloc_floats < (uint64_t)INT_LIMIT ? (int64_t)alloc_floats : INT_LIMIT;
    naive_plan np = {p->seq_kv ? limit / per_pair : BH, 0};
    if (np.chunk < 1)
        return fattn_fail(
            msg, FATTN_ERR_OUT_OF_MEMORY,
            "the naive baseline needs %lld-float score buffers per (batch, head); the "
            "device allows %llu bytes per buffer",
            (long long)per_pair, (unsigned long long)s->limits.max_alloc);
    if (np.chunk > BH) np.chunk = BH;
    np.chunks = (int)((BH + np.chunk - 1) / np.chunk);
    *FATTN_PLAN_AREA(plan, naive_plan) = np;
    /* Reported by the accounting as naive_bytes, not as tiles. */
    plan->tiling.tile_q = 0;
    plan->tiling.tile_kv = 0;
    plan->tiling.concurrent_groups = 0;
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

fattn_status ocl_naive_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg) {
    const naive_plan *np = FATTN_PLAN_AREA(plan, const naive_plan);
    naive_run r = {.s = state, .p = p, .msg = msg, .chunk = np->chunk, .chunks = np->chunks};
    r.temp = calloc(T_FIXED + 2 * (size_t)r.chunks, sizeof *r.temp);
    size_t *off = malloc(3 * (size_t)r.chunk * sizeof *off);
    float *scalars = malloc(2 * (size_t)r.chunk * sizeof *scalars);
    fattn_status st = r.temp && off && scalars ? FATTN_OK
                                               : fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                                                            "cannot allocate GEMM offsets");
    if (st == FATTN_OK) {
        r.off_a = off, r.off_b = off + r.chunk, r.off_c = off + 2 * r.chunk;
        r.alphas = scalars, r.betas = scalars + r.chunk;
        st = p->seq_kv == 0 ? no_keys(&r) : run(&r);
    }
    for (int i = 0; r.temp && i < T_FIXED + 2 * r.chunks; i++)
        if (r.temp[i]) clReleaseMemObject(r.temp[i]);
    free(r.temp);
    free(off);
    free(scalars);
    return st;
}

#endif /* FATTN_HAVE_CLBLAST */
