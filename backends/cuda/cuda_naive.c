/* The naive baseline, for comparison only (fattn_forward_naive): S = scale
 * Q K^T for every (batch, head) by cuBLAS into a float32 [B*Hq][Sq][Sk]
 * array, P = softmax(S) into a second one (float32, or the storage dtype for
 * f16/bf16 so that the second GEMM runs on tensor cores, as PyTorch's naive
 * attention does), then O = P V by cuBLAS. Row-major X is column-major X^T,
 * so S^T = K Q^T and O^T = V^T P^T; each (batch, K/V head) is one strided
 * batched GEMM over its `group` query heads (in chunks of GEMM_BATCH), K and
 * V repeated with stride 0.
 * S and P come from cudaMallocAsync and go back with cudaFreeAsync on the
 * context's stream: nothing synchronises. cuBLAS is opened with dlopen the
 * first time a naive problem is planned, so the module loads without it.
 * The planner (cuda_plan.c) decides whether the baseline takes a problem,
 * with the checks below; this file runs it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cublas_api.h>

#include "cuda_common.h"

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef const char *(*status_string_fn)(cublasStatus_t);
typedef cublasStatus_t (*gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void *, const void *, cudaDataType, int, long long,
                                  const void *, cudaDataType, int, long long, const void *, void *,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);

static struct {
    create_fn create;
    destroy_fn destroy;
    set_stream_fn set_stream;
    status_string_fn status_string;
    gemm_fn gemm;
    char error[256];
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void open_cublas(void) {
    char name[64];
    snprintf(name, sizeof name, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(blas.error, sizeof blas.error, "%s", dlerror());
        return;
    }
    *(void **)&blas.create = dlsym(h, "cublasCreate_v2");
    *(void **)&blas.destroy = dlsym(h, "cublasDestroy_v2");
    *(void **)&blas.set_stream = dlsym(h, "cublasSetStream_v2");
    *(void **)&blas.status_string = dlsym(h, "cublasGetStatusString");
    *(void **)&blas.gemm = dlsym(h, "cublasGemmStridedBatchedEx");
    if (!blas.create || !blas.destroy || !blas.set_stream || !blas.status_string || !blas.gemm) {
        snprintf(blas.error, sizeof blas.error, "%s lacks a cuBLAS function fattn uses", name);
        blas.gemm = NULL;
    }
}

fattn_status cuda_naive_load(fattn_msg *msg) {
    pthread_once(&blas_once, open_cublas);
    if (!blas.gemm)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the CUDA naive baseline needs cuBLAS at run time: %s", blas.error);
    return FATTN_OK;
}

/* cuBLAS takes sequence lengths and leading dimensions as int, and a
 * leading dimension no smaller than a row. The sequence lengths bind the
 * zero output too (its rows are ints); the strides only the GEMMs, and are
 * checked when the problem has operands. */
fattn_status cuda_naive_check(const fattn_problem *p, fattn_msg *msg) {
    const int64_t int_max = FATTN_INT32_MAX;
    const int gemms = p->seq_kv > 0 && p->has_operands;
    if (p->seq_q > int_max || p->seq_kv > int_max ||
        (gemms && (p->q.stride_seq > int_max || p->k.stride_seq > int_max ||
                   p->v.stride_seq > int_max || p->o.stride_seq > int_max)))
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the CUDA naive baseline passes sequence lengths and row strides to cuBLAS as "
            "32-bit integers: each must stay below 2^31");
    if (!gemms) return FATTN_OK;
    if (p->q.stride_seq < p->head_dim || p->k.stride_seq < p->head_dim ||
        p->v.stride_seq < p->head_dim || p->o.stride_seq < p->head_dim)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the CUDA naive baseline needs row strides of at least head_dim (cuBLAS leading "
            "dimensions)");
    return FATTN_OK;
}

void cuda_naive_release(cuda_state *s) {
    if (!s->cublas) return;
    cuda_use_quiet(s); /* the handle belongs to the device's context */
    if (blas.destroy) blas.destroy((cublasHandle_t)s->cublas);
    s->cublas = NULL;
}

static fattn_status blas_fail(fattn_msg *msg, cublasStatus_t st, const char *what) {
    return fattn_fail(msg,
                      st == CUBLAS_STATUS_ALLOC_FAILED ? FATTN_ERR_OUT_OF_MEMORY : FATTN_ERR_DEVICE,
                      "cuBLAS %s: %s (%d)", what, blas.status_string(st), (int)st);
}

/* cuBLAS takes the batch count as int, and some versions fail above 65535
 * (PyTorch chunks it on compute 7.x): query heads go in chunks. */
enum { GEMM_BATCH = 65535 };

static cudaDataType data_type(fattn_dtype t) {
    return t == FATTN_F32 ? CUDA_R_32F : t == FATTN_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* The two GEMMs and the softmax between them, on buffers S and P. */
static fattn_status run_gemms(cuda_state *s, const fattn_problem *p, const fattn_cuda_args *a,
                              float *S, void *P, fattn_msg *msg) {
    cublasHandle_t h = (cublasHandle_t)s->cublas;
    const int64_t Sq = p->seq_q, Sk = p->seq_kv, D = p->head_dim, group = p->heads_q / p->heads_kv;
    const size_t es = (size_t)fattn_esize(p->dtype); /* P is in the storage type too */
    const cudaDataType t = data_type(p->dtype);
    const float alpha_s = a->scale_log2, one = 1.0f, zero = 0.0f;
    cublasStatus_t bs;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t hk = 0; hk < p->heads_kv; hk++)
            for (int64_t g0 = 0; g0 < group; g0 += GEMM_BATCH) {
                const int64_t hq = hk * group + g0,
                              n = group - g0 < GEMM_BATCH ? group - g0 : GEMM_BATCH;
                const int64_t pair = b * p->heads_q + hq; /* first query head of the chunk */
                const char *q = (const char *)a->q + (size_t)(b * a->q_sb + hq * a->q_sh) * es;
                const char *k = (const char *)a->k + (size_t)(b * a->k_sb + hk * a->k_sh) * es;
                /* S^T (Sk x Sq, ld Sk) = K (Sk x D: K^T stored, transposed) . Q^T (D x Sq, ld q_ss). */
                bs = blas.gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)Sk, (int)Sq, (int)D, &alpha_s, k,
                               t, (int)a->k_ss, 0, q, t, (int)a->q_ss, a->q_sh, &zero,
                               S + (size_t)(pair * Sq * Sk), CUDA_R_32F, (int)Sk, Sq * Sk, (int)n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (bs != CUBLAS_STATUS_SUCCESS)
                    return blas_fail(msg, bs, "GemmStridedBatchedEx (scores)");
            }
    cudaError_t err = fattn_cuda_naive_softmax(S, P, p->dtype, a, s->stream);
    if (err != cudaSuccess) return cuda_fail(msg, err, "the naive softmax kernel");
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t hk = 0; hk < p->heads_kv; hk++)
            for (int64_t g0 = 0; g0 < group; g0 += GEMM_BATCH) {
                const int64_t hq = hk * group + g0,
                              n = group - g0 < GEMM_BATCH ? group - g0 : GEMM_BATCH;
                const int64_t pair = b * p->heads_q + hq;
                const char *v = (const char *)a->v + (size_t)(b * a->v_sb + hk * a->v_sh) * es;
                char *o = (char *)a->o + (size_t)(b * a->o_sb + hq * a->o_sh) * es;
                /* O^T (D x Sq, ld o_ss) = V^T (D x Sk, ld v_ss) . P^T (Sk x Sq, ld Sk). */
                bs = blas.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)Sq, (int)Sk, &one, v, t,
                               (int)a->v_ss, 0, (const char *)P + (size_t)(pair * Sq * Sk) * es, t,
                               (int)Sk, Sq * Sk, &zero, o, t, (int)a->o_ss, a->o_sh, (int)n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (bs != CUBLAS_STATUS_SUCCESS)
                    return blas_fail(msg, bs, "GemmStridedBatchedEx (output)");
            }
    return FATTN_OK;
}

fattn_status cuda_run_naive(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg) {
    cuda_state *s = state;
    (void)plan; /* the baseline has one way to run */
    /* The plan made these checks already; made again on the operands this
     * run has, since a truncated leading dimension would send cuBLAS
     * reading outside the tensors. Both are cheap. */
    fattn_status st = cuda_naive_check(p, msg);
    if (st == FATTN_OK) st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    fattn_cuda_args a;
    cuda_args(s, p, &a);
    if (p->seq_kv == 0) return cuda_run_zero(s, &a, msg);
    if ((st = cuda_naive_load(msg)) != FATTN_OK) return st;
    cublasStatus_t bs;
    if (!s->cublas) {
        cublasHandle_t h;
        if ((bs = blas.create(&h)) != CUBLAS_STATUS_SUCCESS) return blas_fail(msg, bs, "Create");
        s->cublas = h;
    }
    if ((bs = blas.set_stream((cublasHandle_t)s->cublas, s->stream)) != CUBLAS_STATUS_SUCCESS)
        return blas_fail(msg, bs, "SetStream");

    const size_t pairs =
        (size_t)(p->batch * p->heads_q) * (size_t)p->seq_q * (size_t)p->seq_kv; /* validated */
    const size_t es = (size_t)fattn_esize(p->dtype); /* P's element: the storage type */
    size_t bytes;
    if (__builtin_mul_overflow(pairs, sizeof(float), &bytes))
        return fattn_fail(
            msg, FATTN_ERR_OUT_OF_MEMORY,
            "the naive baseline's score matrix S (%zu float32 scores) needs 2^64 bytes or more",
            pairs);
    void *S = NULL, *P = NULL;
    st = cuda_alloc(s, "the naive baseline's score matrix S", bytes, 1, &S, msg);
    if (st != FATTN_OK) return st;
    st = cuda_alloc(s, "the naive baseline's probability matrix P", pairs * es, 1, &P, msg);
    if (st == FATTN_OK) st = run_gemms(s, p, &a, S, P, msg);
    /* Freed in stream order, after the kernels that use them. */
    if (P) cudaFreeAsync(P, s->stream);
    cudaFreeAsync(S, s->stream);
    return st;
}
