/* The CUDA planner: a table of kernel variants, tried in order for the
 * problem's op; the first row that accepts fills the plan (its typed
 * cuda_plan and the tiling the memory report shows), and the same row's
 * run function launches it. Accepting is the only place that decides, so
 * "is it supported" and "what runs" cannot disagree. A new kernel family
 * is a row here, an accept function, and a run function in its own file. */
#include <string.h>

#include "cuda_common.h"

/* The smallest built head-dim bucket that holds D. */
static int dpad_for(int64_t D) {
    for (int dpad = 32; dpad <= 256; dpad *= 2)
        if (D <= dpad && fattn_cuda_dpad_built(dpad)) return dpad;
    return 0;
}

/* The variants (FATTN_VAR_*) each tiled kernel runs: every one of the
 * mask's, and head_dim_v in the bucket of the wider head dim; the CUDA-core
 * kernel in f32 only (its f16/bf16 instances, for devices below compute
 * 8.0, run none). */
#define CUDA_MMA_VARIANTS                                                                          \
    (FATTN_VAR_WINDOW | FATTN_VAR_SOFTCAP | FATTN_VAR_ALIBI | FATTN_VAR_SINKS | FATTN_VAR_BIAS |   \
     FATTN_VAR_HEAD_DIM_V)
#define CUDA_SIMT_VARIANTS CUDA_MMA_VARIANTS
/* The wgmma kernel's: all but head_dim_v (its WgVar families; a bias in
 * the problem's dtype only). */
#define CUDA_WGMMA_VARIANTS                                                                        \
    (FATTN_VAR_WINDOW | FATTN_VAR_SOFTCAP | FATTN_VAR_ALIBI | FATTN_VAR_SINKS | FATTN_VAR_BIAS)

/* What both tiled variants need: sequences below 2^31 (the kernels index
 * rows and keys with ints; batch and heads are any size, folded into the
 * grid), no tile override, and a built head-dim bucket that holds D (and
 * the problem's head_dim_v, which only the CUDA-core kernel takes). */
static fattn_status tiled_common(const fattn_problem *p, int *dpad, fattn_msg *msg) {
    if (p->seq_q > FATTN_INT32_MAX || p->seq_kv > FATTN_INT32_MAX)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_q = %lld, seq_kv = %lld: the CUDA kernels take sequences below 2^31",
                          (long long)p->seq_q, (long long)p->seq_kv);
    if (p->tune.tile_q || p->tune.tile_kv)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the CUDA kernels have fixed tiles per head dim; leave FATTN_PARAM_TILE_Q and "
            "FATTN_PARAM_TILE_KV at 0");
    const int64_t dims = p->head_dim_v > p->head_dim ? p->head_dim_v : p->head_dim;
    *dpad = dpad_for(dims);
    if (!*dpad)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: no kernel for it was built (FATTN_CUDA_HEAD_DIMS)",
                          (long long)dims);
    return FATTN_OK;
}

/* f16/bf16 on compute 8.0+ belongs to the tensor-core kernel alone; the
 * CUDA-core kernel takes f32 everywhere and f16/bf16 below 8.0. */
static int mma_domain(const cuda_state *s, const fattn_problem *p) {
    return p->dtype != FATTN_F32 && s->prop.major >= 8;
}

/* A tile shape must fit the shared memory a block may opt in to. */
static fattn_status fits(const cuda_state *s, const fattn_problem *p, const char *kernel, int bm,
                         int bn, int smem, fattn_msg *msg) {
    const size_t smem_max = s->prop.sharedMemPerBlockOptin;
    if ((size_t)smem > smem_max)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "head dim %lld: the %s kernel's %dx%d tile needs %d bytes of shared memory per "
            "block; %s (compute %d.%d) allows %zu",
            (long long)(p->head_dim_v > p->head_dim ? p->head_dim_v : p->head_dim), kernel, bm, bn,
            smem, s->prop.name, s->prop.major, s->prop.minor, smem_max);
    return FATTN_OK;
}

/* The tensor-core kernel's tile for dpad (its bias families' for a problem
 * with a bias), if it fits this device. */
static fattn_status mma_tiles(const cuda_state *s, const fattn_problem *p, int dpad, int *bm,
                              int *bn, int *smem, fattn_msg *msg) {
    fattn_cuda_flash_mma_tiles(dpad, (fattn_variants_used(p) & FATTN_VAR_BIAS) != 0, bm, bn,
                               smem);
    return fits(s, p, "tensor-core", *bm, *bn, *smem, msg);
}

/* Fills the plan of a tiled variant. */
static void tiled_plan(const cuda_state *s, fattn_plan *plan, int dpad, int small, int bm, int bn,
                       int smem) {
    cuda_plan *cp = FATTN_PLAN_AREA(plan, cuda_plan);
    memset(cp, 0, sizeof *cp);
    cp->dpad = dpad;
    cp->small = small;
    plan->tiling.tile_q = bm;
    plan->tiling.tile_kv = bn;
    /* Resident blocks: as many as shared memory allows per SM (registers may allow fewer). */
    const size_t per_sm = smem ? s->prop.sharedMemPerMultiprocessor / ((size_t)smem + 1024) : 1;
    plan->tiling.concurrent_groups =
        (int64_t)s->prop.multiProcessorCount * (int64_t)(per_sm ? per_sm : 1);
    plan->tiling.workspace_bytes = 0;
}

/* The Hopper kernel (kernels_cu/flash_wgmma.cu): f16/bf16 on compute 9.0
 * (its sm_90a code runs nowhere else), a dense batch with at most its
 * variants, a bucket it was built for, unless FATTN_CUDA_KERNEL=mma asks
 * for the mma.sync kernel. */
static fattn_status wgmma_check(const cuda_state *s, const fattn_problem *p, int *dpad, int *bm,
                                int *bn, int *smem, fattn_msg *msg) {
    if (s->kernel == CUDA_KERNEL_MMA)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "FATTN_CUDA_KERNEL=mma: the mma.sync kernel runs instead of wgmma");
    if (!mma_domain(s, p) || s->prop.major != 9 || s->prop.minor != 0)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the wgmma kernel takes f16/bf16 on compute 9.0; this is %s on %s "
                          "(compute %d.%d)",
                          p->dtype == FATTN_F32 ? "f32" : "f16/bf16", s->prop.name, s->prop.major,
                          s->prop.minor);
    fattn_status st = fattn_variants_declined(p, CUDA_WGMMA_VARIANTS, msg);
    const unsigned used = fattn_variants_used(p);
    if (st == FATTN_OK && (used & FATTN_VAR_BIAS) && p->var.bias_dtype != p->dtype)
        st = fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                        "the wgmma kernel reads a bias in the problem's dtype (%s); an f32 or "
                        "other 16-bit bias runs on the mma.sync kernel",
                        p->dtype == FATTN_F16 ? "f16" : "bf16");
    if (st == FATTN_OK) st = fattn_dense_only(p, "the wgmma kernel", msg);
    if (st == FATTN_OK) st = tiled_common(p, dpad, msg);
    if (st != FATTN_OK) return st;
    /* Head dims up to 32 run zero-padded in its 64 bucket. */
    if (*dpad == 32 && fattn_cuda_dpad_built(64)) *dpad = 64;
#if FATTN_CUDA_WGMMA
    /* The bias shape (kWgAll): a bias, or softcap with ALiBi. */
    const unsigned both = FATTN_VAR_SOFTCAP | FATTN_VAR_ALIBI;
    fattn_cuda_flash_wgmma_tiles(*dpad, (used & FATTN_VAR_BIAS) || (used & both) == both, bm, bn,
                                 smem);
#else
    *bm = *bn = *smem = 0;
#endif
    if (!*bm)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld (bucket %d): the wgmma kernel was not built for it%s",
                          (long long)p->head_dim, *dpad,
                          FATTN_CUDA_WGMMA ? "" : " (FATTN_CUDA_WGMMA=OFF)");
    if ((st = fits(s, p, "wgmma", *bm, *bn, *smem, msg)) != FATTN_OK) return st;
    /* Small problems stay on mma.sync under auto: a wgmma block (one per SM)
     * sets up its barriers and fills its pipeline before the first product,
     * which two key tiles do not pay back, and a grid under one wave leaves
     * SMs idle that the smaller mma.sync blocks fill (H200, call96: 0.85-0.90x
     * mma.sync at seq_kv 100-200, 1.0x at seq 128, 1.3-2.3x from seq 512 on).
     * Causal head dim 64 up to 512 keys too: its 192-row tiles waste more of
     * the diagonal (call98: 0.92x at seq 512, 1.21x at 2048). */
    const int64_t blocks = (p->seq_q + *bm - 1) / *bm * p->batch * p->heads_q;
    if (s->kernel == CUDA_KERNEL_AUTO &&
        (p->seq_kv <= 256 || blocks < (int64_t)s->prop.multiProcessorCount ||
         (p->causal && *dpad == 64 && p->seq_kv <= 512)))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_kv %lld, %lld blocks of %d rows: the mma.sync kernel is faster on "
                          "problems this small, and on causal head dim 64 up to 512 keys "
                          "(FATTN_CUDA_KERNEL=wgmma forces wgmma)",
                          (long long)p->seq_kv, (long long)blocks, *bm);
    return FATTN_OK;
}

static fattn_status accept_wgmma(void *state, const fattn_problem *p, fattn_plan *plan,
                                 fattn_msg *msg) {
    const cuda_state *s = state;
    int dpad, bm, bn, smem;
    const fattn_status st = wgmma_check(s, p, &dpad, &bm, &bn, &smem, msg);
    if (st != FATTN_OK) return st;
    tiled_plan(s, plan, dpad, 0, bm, bn, smem);
    return FATTN_OK;
}

/* FATTN_CUDA_KERNEL=wgmma: f16/bf16 prefill runs on the wgmma kernel or
 * not at all, so the later rows decline with its reason. */
static fattn_status wgmma_forced(const cuda_state *s, const fattn_problem *p, fattn_msg *msg) {
    if (s->kernel != CUDA_KERNEL_WGMMA || !mma_domain(s, p)) return FATTN_OK;
    int dpad, bm, bn, smem;
    fattn_msg why;
    why.text[0] = '\0';
    const fattn_status st = wgmma_check(s, p, &dpad, &bm, &bn, &smem, &why);
    return st == FATTN_OK ? fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                                       "FATTN_CUDA_KERNEL=wgmma: the wgmma kernel takes it")
                          : fattn_fail(msg, st, "FATTN_CUDA_KERNEL=wgmma, and %s", why.text);
}

static fattn_status accept_mma(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg) {
    const cuda_state *s = state;
    int dpad, bm, bn, smem;
    fattn_status st = wgmma_forced(s, p, msg);
    if (st != FATTN_OK) return st;
    st = fattn_variants_declined(p, CUDA_MMA_VARIANTS, msg);
    if (st == FATTN_OK) st = tiled_common(p, &dpad, msg);
    if (st != FATTN_OK) return st;
    if (!mma_domain(s, p))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the tensor-core kernel takes f16/bf16 on compute 8.0+; this is %s on %s "
                          "(compute %d.%d)",
                          p->dtype == FATTN_F32 ? "f32" : "f16/bf16", s->prop.name, s->prop.major,
                          s->prop.minor);
    if ((st = mma_tiles(s, p, dpad, &bm, &bn, &smem, msg)) != FATTN_OK) return st;
    tiled_plan(s, plan, dpad, 0, bm, bn, smem);
    return FATTN_OK;
}

static fattn_status accept_simt(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg) {
    const cuda_state *s = state;
    int dpad, bm, bn, smem;
    /* The tensor-core row's problem, which it declined (a variant it lacks,
     * or its tile does not fit): its reason stands, since this row is the
     * last one the planner tries and the planner keeps the last reason. */
    fattn_status st = wgmma_forced(s, p, msg);
    if (st != FATTN_OK) return st;
    st = mma_domain(s, p)
             ? fattn_variants_declined(p, CUDA_MMA_VARIANTS, msg)
             : fattn_variants_declined(p, p->dtype == FATTN_F32 ? CUDA_SIMT_VARIANTS : 0, msg);
    if (st == FATTN_OK) st = tiled_common(p, &dpad, msg);
    if (st != FATTN_OK) return st;
    if (mma_domain(s, p)) {
        st = mma_tiles(s, p, dpad, &bm, &bn, &smem, msg);
        return st != FATTN_OK
                   ? st
                   : fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                                "f16/bf16 on compute 8.0+ runs on the tensor-core kernel only");
    }
    if (p->dtype != FATTN_F32 && !fattn_cuda_simt_half_built())
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "%s (compute %d.%d) has no bf16/f16 tensor-core path, and this build has no "
            "f16/bf16 CUDA-core kernels (FATTN_CUDA_SIMT_HALF=OFF)",
            s->prop.name, s->prop.major, s->prop.minor);
    /* The tuned shape, or the small one where a block may not have the
     * tuned one's shared memory (or where settings ask for it anywhere). */
    int small = s->small_tiles;
    fattn_cuda_flash_simt_tiles(dpad, small, &bm, &bn, &smem);
    if ((size_t)smem > s->prop.sharedMemPerBlockOptin && !small)
        fattn_cuda_flash_simt_tiles(dpad, small = 1, &bm, &bn, &smem);
    if ((st = fits(s, p, "CUDA-core", bm, bn, smem, msg)) != FATTN_OK) return st;
    tiled_plan(s, plan, dpad, small, bm, bn, smem);
    return FATTN_OK;
}

/* The baseline takes any dtype on any device; what binds it is cuBLAS's
 * int sizes (cuda_naive_check) and cuBLAS itself, which it opens here
 * rather than at run time so that a machine without it hears so when
 * planning. seq_kv = 0 is the zero output, and needs neither. */
static fattn_status accept_naive(void *state, const fattn_problem *p, fattn_plan *plan,
                                 fattn_msg *msg) {
    (void)state;
    fattn_status st = fattn_variants_declined(p, 0, msg);
    if (st == FATTN_OK) st = cuda_naive_check(p, msg);
    if (st == FATTN_OK) st = fattn_dense_only(p, "the naive baseline", msg);
    if (st == FATTN_OK && p->seq_kv > 0) st = cuda_naive_load(msg);
    if (st != FATTN_OK) return st;
    memset(FATTN_PLAN_AREA(plan, cuda_plan), 0, sizeof(cuda_plan));
    /* No tiles: S and P are whole matrices the run allocates (cudaMallocAsync)
     * and frees itself; the memory report counts them as the naive bytes. */
    plan->tiling.tile_q = 0;
    plan->tiling.tile_kv = 0;
    plan->tiling.concurrent_groups = 0;
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

/* Tried in this order for the problem's op: for FATTN_OP_FORWARD the
 * split-KV decode kernel where it pays (seq_q <= 16 and a long cache, or a
 * ragged batch: cuda_decode.c), then the Hopper kernel where it serves
 * (f16/bf16 on compute 9.0, dense, any variant but head_dim_v), the tensor-core kernel
 * where it serves (f16/bf16, compute 8.0+), else the CUDA-core one; the CUDA-core row is
 * last, so its reason is the one a caller sees when none runs. */
static const fattn_variant cuda_variants[CUDA_VARIANT_COUNT] = {
    [CUDA_VARIANT_DECODE] = {"decode", FATTN_OP_FORWARD, cuda_decode_accept, cuda_decode_run},
    [CUDA_VARIANT_WGMMA] = {"wgmma", FATTN_OP_FORWARD, accept_wgmma, cuda_run_wgmma},
    [CUDA_VARIANT_MMA] = {"mma", FATTN_OP_FORWARD, accept_mma, cuda_run_mma},
    [CUDA_VARIANT_SIMT] = {"simt", FATTN_OP_FORWARD, accept_simt, cuda_run_simt},
    [CUDA_VARIANT_NAIVE] = {"naive", FATTN_OP_FORWARD_NAIVE, accept_naive, cuda_run_naive},
    [CUDA_VARIANT_COMBINE] = {"combine", FATTN_OP_COMBINE, cuda_combine_accept, cuda_combine_run},
};

fattn_status cuda_plan_problem(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg) {
    return fattn_plan_from_table(cuda_variants, CUDA_VARIANT_COUNT, state, p, plan, msg);
}

fattn_status cuda_run(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg) {
    return fattn_run_from_table(cuda_variants, CUDA_VARIANT_COUNT, state, p, plan, msg);
}
