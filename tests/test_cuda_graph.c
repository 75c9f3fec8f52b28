/* fattn_forward inside a CUDA graph: with the caller's workspace (or one the
 * context kept from an earlier call) the forward allocates nothing and never
 * synchronises, so stream capture in the strictest mode (global) succeeds,
 * and the instantiated graph recomputes from whatever the input buffers hold
 * when it is launched. Checked on decode shapes with key splits (the path
 * that needs a workspace) and on a prefill shape, against the same
 * context's eager result and the CPU backend; and a decode step that
 * appends its keys and values to the cache (desc->append) in the same
 * captured call, against the eager result and the rows it must write.
 * Built only where the CUDA runtime is; without a device it is a visible
 * skip. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "fattn.h"
#include "test_backend.h"
#include "test_util.h"

#define CHECK_OK(ctx, call)                                                                        \
    do {                                                                                           \
        const fattn_status st_ = (call);                                                           \
        if (st_ != FATTN_OK)                                                                       \
            fail_msg("%s: %s: %s", #call, fattn_status_string(st_), fattn_error_message(ctx));     \
    } while (0)
#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        const cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorString(e_));                  \
    } while (0)

/* One problem's buffers on a context, f32 BSHD. */
typedef struct graph_problem {
    fattn_attention_desc d;
    fattn_buffer *q, *k, *v, *o, *lse, *ws;
    fattn_tensor tq, tk, tv, to, tl;
    size_t nq, nkv, nl;
    /* desc->append (when d.append is set): cached lengths, new rows. */
    fattn_buffer *used, *kn, *vn;
    fattn_tensor tu, tkn, tvn;
    fattn_varlen_desc vl;
    fattn_kv_append_desc ap;
    int32_t lens[2];
    size_t nnew;
} graph_problem;

static void setup(fattn_context *ctx, graph_problem *g, int64_t batch, int64_t hq, int64_t hkv,
                  int64_t sq, int64_t skv, int64_t dim, fattn_causal causal) {
    const fattn_attention_desc init = FATTN_ATTENTION_DESC_INIT;
    memset(g, 0, sizeof *g);
    g->d = init;
    g->d.batch = batch, g->d.heads_q = hq, g->d.heads_kv = hkv;
    g->d.seq_q = sq, g->d.seq_kv = skv, g->d.head_dim = dim;
    g->d.dtype = FATTN_F32;
    g->d.causal = causal;
    g->nq = (size_t)(batch * hq * sq * dim);
    g->nkv = (size_t)(batch * hkv * skv * dim);
    g->nl = (size_t)(batch * hq * sq);
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g->nq * 4, &g->q));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g->nkv * 4, &g->k));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g->nkv * 4, &g->v));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g->nq * 4, &g->o));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g->nl * 4, &g->lse));
    const fattn_layout L = FATTN_LAYOUT_BSHD;
    CHECK_OK(ctx, fattn_tensor_init(g->q, FATTN_F32, L, batch, hq, sq, dim, 0, &g->tq));
    CHECK_OK(ctx, fattn_tensor_init(g->k, FATTN_F32, L, batch, hkv, skv, dim, 0, &g->tk));
    CHECK_OK(ctx, fattn_tensor_init(g->v, FATTN_F32, L, batch, hkv, skv, dim, 0, &g->tv));
    CHECK_OK(ctx, fattn_tensor_init(g->o, FATTN_F32, L, batch, hq, sq, dim, 0, &g->to));
    CHECK_OK(ctx, fattn_tensor_init_lse(g->lse, batch, hq, sq, 0, &g->tl));
}

static void release(graph_problem *g) {
    fattn_buffer *const b[] = {g->q, g->k, g->v, g->o, g->lse, g->ws, g->used, g->kn, g->vn};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) fattn_buffer_free(b[i]);
}

static void upload(fattn_context *ctx, fattn_buffer *b, size_t n, uint64_t seed) {
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = uniform(&seed);
    CHECK_OK(ctx, fattn_buffer_write(b, 0, h, n * sizeof *h));
    free(h);
}

static float *download(fattn_context *ctx, fattn_buffer *b, size_t n) {
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    CHECK_OK(ctx, fattn_buffer_read(b, 0, h, n * sizeof *h));
    return h;
}

/* max |a - b|; NaN counts as a mismatch. */
static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* The CPU backend's result for the inputs now in g's buffers. */
static float *cpu_result(fattn_context *cuda, const graph_problem *g) {
    fattn_context *cpu = NULL;
    CHECK_OK(NULL, fattn_context_create(FATTN_BACKEND_CPU, 0, &cpu));
    float *q = download(cuda, g->q, g->nq), *k = download(cuda, g->k, g->nkv);
    float *v = download(cuda, g->v, g->nkv), *o = malloc(g->nq * sizeof *o);
    assert_non_null(o);
    fattn_attention_desc d = g->d;
    d.workspace = NULL; /* the CUDA context's buffer */
    CHECK_OK(cpu, fattn_attention_host(cpu, &d, FATTN_LAYOUT_BSHD, q, k, v, o, NULL));
    free(q), free(k), free(v);
    fattn_context_free(cpu);
    return o;
}

static cudaStream_t open_stream_or_skip(void) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        char why[256];
        snprintf(why, sizeof why, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
        test_skip_unless_required("cuda", why);
    }
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

static fattn_context *context_on(cudaStream_t s) {
    fattn_backend_info info;
    test_use_backend(FATTN_BACKEND_CUDA, &info);
    fattn_context_params p = FATTN_CONTEXT_PARAMS_INIT;
    p.backend = FATTN_BACKEND_CUDA;
    p.device = 0;
    p.native_queue = s;
    fattn_context *ctx = NULL;
    CHECK_OK(NULL, fattn_context_create_with(&p, &ctx));
    return ctx;
}

/* After a launch with desc->append: key lens[b] + t of K holds row t of
 * k_new for every head (BSHD: element (b, h, s, e) at ((b * S + s) * H +
 * h) * D + e), bit for bit. */
static void check_appended(fattn_context *ctx, const graph_problem *g, const char *what) {
    const int64_t H = g->d.heads_kv, D = g->d.head_dim, S = g->d.seq_kv, T = g->ap.seq_new;
    float *k = download(ctx, g->k, g->nkv), *kn = download(ctx, g->kn, g->nnew);
    for (int64_t b = 0; b < g->d.batch; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t e = 0; e < D; e++) {
                    const float x = k[((b * S + g->lens[b] + t) * H + h) * D + e];
                    const float y = kn[((b * T + t) * H + h) * D + e];
                    if (memcmp(&x, &y, sizeof x) != 0)
                        fail_msg("%s: key %lld of sequence %lld, head %lld, element %lld is "
                                 "%g, not the appended %g",
                                 what, (long long)(g->lens[b] + t), (long long)b, (long long)h,
                                 (long long)e, (double)x, (double)y);
                }
    free(k), free(kn);
}

/* Captures one fattn_forward on s (global mode: any allocation or
 * synchronisation inside would invalidate the capture), then checks that the
 * graph recomputes: new Q, launch, compare with an eager call and the CPU. */
static void capture_and_check(fattn_context *ctx, cudaStream_t s, graph_problem *g,
                              const char *what) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const fattn_status st = fattn_forward(ctx, &g->d, &g->tq, &g->tk, &g->tv, &g->to, &g->tl);
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (st != FATTN_OK)
        fail_msg("%s: fattn_forward under capture: %s: %s", what, fattn_status_string(st),
                 fattn_error_message(ctx));
    if (end != cudaSuccess)
        fail_msg("%s: the capture was invalidated (%s): the forward allocated or synchronised",
                 what, cudaGetErrorString(end));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    upload(ctx, g->q, g->nq, 0xfeed + 17u); /* new inputs after the capture */
    if (g->d.append) upload(ctx, g->kn, g->nnew, 0xfeed + 19u);
    CHECK_OK(ctx, fattn_buffer_write(g->o, 0, (float[]){NAN}, 4));
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    float *from_graph = download(ctx, g->o, g->nq);
    if (g->d.append) check_appended(ctx, g, what);
    CHECK_OK(ctx, fattn_forward(ctx, &g->d, &g->tq, &g->tk, &g->tv, &g->to, &g->tl));
    float *eager = download(ctx, g->o, g->nq);
    /* fattn_attention_host takes no cache description: with an append the
     * eager result stands for it (test_append checks it on every backend). */
    float *cpu = g->d.append ? NULL : cpu_result(ctx, g);
    const double d_eager = max_diff(from_graph, eager, g->nq);
    const double d_cpu = cpu ? max_diff(eager, cpu, g->nq) : 0.0;
    print_message("%s: graph vs eager %.3g, eager vs CPU %.3g\n", what, d_eager, d_cpu);
    assert_true(d_eager == 0.0); /* the same kernels on the same inputs */
    assert_true(d_cpu <= 2e-5);
    free(from_graph), free(eager), free(cpu);
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
}

static void run_shape(int64_t batch, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t dim,
                      fattn_causal causal, int splits, int callers_workspace) {
    cudaStream_t s = open_stream_or_skip();
    fattn_context *ctx = context_on(s);
    CHECK_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, splits));
    graph_problem g;
    setup(ctx, &g, batch, hq, hkv, sq, skv, dim, causal);
    upload(ctx, g.q, g.nq, 1), upload(ctx, g.k, g.nkv, 2), upload(ctx, g.v, g.nkv, 3);
    char what[160];
    snprintf(what, sizeof what, "b%lld h%lld/%lld seq %lld/%lld d%lld, splits %d, %s workspace",
             (long long)batch, (long long)hq, (long long)hkv, (long long)sq, (long long)skv,
             (long long)dim, splits, callers_workspace ? "caller's" : "context's");
    uint64_t bytes = 0;
    CHECK_OK(ctx, fattn_workspace_size(ctx, &g.d, &bytes));
    if (splits > 1 && bytes == 0)
        fail_msg("%s: forced key splits but fattn_workspace_size says 0 bytes", what);
    if (callers_workspace) {
        if (bytes) CHECK_OK(ctx, fattn_buffer_alloc(ctx, (size_t)bytes, &g.ws));
        g.d.workspace = g.ws;
    } else {
        /* The context allocates its workspace on the first call and keeps it. */
        CHECK_OK(ctx, fattn_forward(ctx, &g.d, &g.tq, &g.tk, &g.tv, &g.to, &g.tl));
        CHECK_OK(ctx, fattn_context_synchronize(ctx));
    }
    capture_and_check(ctx, s, &g, what);
    release(&g);
    fattn_context_free(ctx);
    CHECK_CUDA(cudaStreamDestroy(s));
}

/* A decode step that appends its seq_q new keys and values (batch 2,
 * cached lengths 100 and 257 of 300) inside the captured call. */
static void test_decode_append(void **state) {
    (void)state;
    cudaStream_t s = open_stream_or_skip();
    fattn_context *ctx = context_on(s);
    CHECK_OK(ctx, fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 3));
    graph_problem g;
    const int64_t B = 2, Hq = 8, Hkv = 2, T = 2, S = 300, D = 64;
    setup(ctx, &g, B, Hq, Hkv, T, S, D, FATTN_CAUSAL_BOTTOM_RIGHT);
    upload(ctx, g.q, g.nq, 1), upload(ctx, g.k, g.nkv, 2), upload(ctx, g.v, g.nkv, 3);
    g.lens[0] = 100, g.lens[1] = 257;
    g.nnew = (size_t)(B * Hkv * T * D);
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, sizeof g.lens, &g.used));
    CHECK_OK(ctx, fattn_buffer_write(g.used, 0, g.lens, sizeof g.lens));
    CHECK_OK(ctx, fattn_tensor_init_index(g.used, 1, B, 0, &g.tu));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g.nnew * 4, &g.kn));
    CHECK_OK(ctx, fattn_buffer_alloc(ctx, g.nnew * 4, &g.vn));
    const fattn_layout L = FATTN_LAYOUT_BSHD;
    CHECK_OK(ctx, fattn_tensor_init(g.kn, FATTN_F32, L, B, Hkv, T, D, 0, &g.tkn));
    CHECK_OK(ctx, fattn_tensor_init(g.vn, FATTN_F32, L, B, Hkv, T, D, 0, &g.tvn));
    upload(ctx, g.kn, g.nnew, 4), upload(ctx, g.vn, g.nnew, 5);
    const fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    const fattn_kv_append_desc ap = FATTN_KV_APPEND_DESC_INIT;
    g.vl = vl, g.ap = ap;
    g.vl.seqused_kv = &g.tu;
    g.ap.k_new = &g.tkn, g.ap.v_new = &g.tvn, g.ap.seq_new = T;
    g.d.varlen = &g.vl, g.d.append = &g.ap;
    uint64_t bytes = 0;
    CHECK_OK(ctx, fattn_workspace_size(ctx, &g.d, &bytes));
    if (bytes) CHECK_OK(ctx, fattn_buffer_alloc(ctx, (size_t)bytes, &g.ws));
    g.d.workspace = g.ws;
    capture_and_check(ctx, s, &g, "append b2 h8/2 seq 2 + cache 100/257 of 300 d64, splits 3");
    release(&g);
    fattn_context_free(ctx);
    CHECK_CUDA(cudaStreamDestroy(s));
}

static void test_decode_splits_callers_workspace(void **state) {
    (void)state;
    run_shape(2, 32, 8, 1, 3001, 128, FATTN_CAUSAL_NONE, 4, 1);
}

static void test_decode_chosen_splits_callers_workspace(void **state) {
    (void)state;
    run_shape(1, 32, 8, 1, 20011, 128, FATTN_CAUSAL_BOTTOM_RIGHT, 0, 1);
}

static void test_decode_context_workspace(void **state) {
    (void)state;
    run_shape(1, 8, 1, 4, 5003, 64, FATTN_CAUSAL_BOTTOM_RIGHT, 3, 0);
}

static void test_prefill(void **state) {
    (void)state;
    run_shape(2, 4, 2, 129, 257, 64, FATTN_CAUSAL_TOP_LEFT, 0, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_splits_callers_workspace),
        cmocka_unit_test(test_decode_chosen_splits_callers_workspace),
        cmocka_unit_test(test_decode_context_workspace),
        cmocka_unit_test(test_prefill),
        cmocka_unit_test(test_decode_append),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
