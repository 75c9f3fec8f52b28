/* The CUDA "decode" variant (FATTN_OP_FORWARD, tried before "mma" and
 * "simt"): split-KV decoding with GQA packing. kernels_cu/decode.cu gives
 * each (sequence, K/V head, row tile, key split) one block, which streams its
 * keys once for every packed query row of the tile (the group's heads times
 * the query rows); with one split it writes O and the lse itself, with more
 * each split writes a normalised float32 partial O and its lse to the
 * workspace and kernels_cu/combine.cu (fattn_combine's kernel) merges them
 * into O and lse. Both launches go on the context's stream, one after the
 * other: no host wait, no allocation (the core binds the workspace: the
 * caller's desc->workspace or the context's own), so the call can be
 * captured into a CUDA graph.
 *
 * Which problems (cuda_decode_accept):
 * - seq_q <= CUDA_DEC_MAX_SEQ_Q. The R = (heads_q / heads_kv) * seq_q rows of
 *   one K/V head are packed into tiles of 4, 8 or 16 rows (at most 8 at
 *   head dims above 128); R <= 16 is one tile, so each K/V element is read
 *   once per group; a larger R (MQA with seq_q > 1) takes ceil(R / 16) tiles;
 * - dense: FATTN_PARAM_KV_SPLITS (p->tune.kv_splits) 1 never takes this
 *   row (the tiled kernels run); N >= 2 forces min(N, key tiles) splits on
 *   any such shape with seq_kv >= 1, so tests reach every split count; 0
 *   chooses (below) and takes the row only from seq_kv >= CUDA_DEC_MIN_SEQ_KV,
 *   leaving shorter caches to the tiled kernels;
 * - ragged (varlen, seqused_kv, paged, any page size): always, seq_kv = 0
 *   included, since the tiled kernels do not take ragged problems yet; with
 *   kv_splits = 1 they run here unsplit. The kernel checks the device-
 *   resident tables itself (kernels_cu/ragged.cuh) and records bad entries
 *   in the context's fault word (cuda_take_fault reports them);
 * - every attention variant but head_dim_v: the window and sinks run in
 *   the plain instances; softcap, ALiBi and a bias (per-score work) in
 *   decode.cu's rescoring instances (the plan's rescore), so the plain
 *   instances' code does not change for them;
 * - not: tile overrides (FATTN_PARAM_TILE_Q / _KV name the tiled kernels'
 *   tiles), sizes past 32-bit key and row indices, a head dim whose bucket
 *   was not built (FATTN_CUDA_HEAD_DIMS), a block that does not fit the
 *   device's shared memory.
 * Causal masks of both alignments are handled per row.
 *
 * The split count when the caller leaves it to us (kv_splits = 0). The
 * blocks of one split count do equal work (dense), so what matters is how
 * well they fill the device's resident-block slots, SMs times the blocks of
 * the instance that fit one SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor,
 * measured once per context): with U = batch * heads_kv * row_tiles blocks
 * per split and `slots` slots, splits s run in waves = ceil(U s / slots)
 * rounds and keep U s / (waves * slots) of the slots busy. We take the
 * smallest s within CUDA_DEC_WAVE_SLACK of the best such fill over s = 1 ..
 * min(CUDA_DEC_MAX_SPLITS, key tiles, seq_kv / CUDA_DEC_MIN_KEYS): e.g. on
 * the H200 (132 SMs, 3 blocks per SM at d128 with 4 rows: 396 slots), batch
 * 1 with 8 K/V heads takes 49 splits (392 blocks, one wave), batch 8 takes 37
 * (2368 blocks, 6 waves at 99.7%) and batch 64 takes 10. Fewer splits among
 * near-equal fills, because each split costs its partial rows in the
 * workspace, their reading by the combine, and a pipeline ramp per block;
 * at least CUDA_DEC_MIN_KEYS keys per split so that ramp stays small (a
 * floor in bytes: CUDA_DEC_MIN_KEYS keys of bf16 d128, so twice the keys at
 * d64 and half for f32 or d256). When U times that many splits would leave
 * SMs without a block (small caches, few K/V heads), the splits may grow
 * until the grid has at most one block per SM, down to CUDA_DEC_FILL_KEYS
 * keys each. One split is a
 * valid outcome (large batches): GQA packing still pays.
 *
 * Measured (H200, bf16 GQA 32/8 d128 seq_q 1, the tensor-core kernel,
 * bench/tune_cuda_decode.sh, 2026-11-22; results/2026-11-22-h200-decode-v2):
 * min_keys 256 -> 2048 takes b1 32k from 0.0724 to 0.0625 ms (16 splits
 * instead of 33: less ramp and combine) and b8 32k from 0.381 to 0.366 ms;
 * b1 128k (0.202 ms) and b64 32k (2.71 ms) do not move; max_splits 32 and a
 * 5% wave slack change nothing; assuming 3 blocks per SM (one more than fit)
 * costs 13-20% at batch 1. The examples above predate the tensor-core
 * kernel (2 blocks per SM at d128 now). Sweeping min_keys on other shapes
 * (2026-11-23, results/2026-11-23-h200-decode-v3/split_floor): a floor of
 * 512 keys ran b1 8k 0.58x the time of 2048, d256 16/2 at 32k 0.60x, d64 at
 * 8k 0.68x, f32 b1 32k 0.67x (1024: 0.69x), while b1 32k bf16 d128, MHA and
 * batch 4 were the same or 5-17% slower: hence the byte floor and the fill
 * rule above rather than a lower floor.
 *
 * Run-time overrides (a kernel-development knob, FATTN_DECODE_TUNE =
 * "name=value,...", read through fattn_tune_value; bench/tune_cuda_decode.sh
 * sweeps them): min_seq_kv (CUDA_DEC_MIN_SEQ_KV), min_keys
 * (CUDA_DEC_MIN_KEYS), max_splits (CUDA_DEC_MAX_SPLITS), slack_pm
 * (CUDA_DEC_WAVE_SLACK in thousandths), blocks_per_sm (the slots per SM the
 * heuristic assumes; 0: measured), pdl (1, the default: on 9.x the
 * combine is launched as a programmatic dependent of the decode kernel; 0:
 * plainly). The compile-time shapes are kernels_cu/decode.cu's
 * FATTN_DECODE_* defines. */
#include <string.h>

#include "cuda_common.h"

#define CUDA_DEC_MAX_SEQ_Q 16    /* query rows per sequence this variant takes */
#define CUDA_DEC_MIN_SEQ_KV 512  /* kv_splits = 0, dense: shorter caches go to the tiled rows */
#define CUDA_DEC_MIN_KEYS 2048   /* kv_splits = 0: keys per split at bf16 d128, at least (measured) */
#define CUDA_DEC_FILL_KEYS 512   /* ... and while the grid has fewer blocks than SMs (measured) */
#define CUDA_DEC_MAX_SPLITS 128  /* kv_splits = 0: splits, at most */
#define CUDA_DEC_WAVE_SLACK 0.02 /* kv_splits = 0: slot fill given up for fewer splits */
#define CUDA_DEC_GRID_Y 65535    /* splits are grid y: a forced count stops here */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The FATTN_DECODE_TUNE list (settings->decode_tune, kept at open). */
static const char *decode_tune(const cuda_state *s) { return s->decode_tune; }

/* Knob `name` of the list, def when absent, clamped to [lo, hi]. */
static long tune(const cuda_state *s, const char *name, long def, long lo, long hi) {
    const long v = fattn_tune_value(decode_tune(s), name, def);
    return v < lo ? lo : v > hi ? hi : v;
}

/* The packed rows per block for R rows: the smallest instance that holds
 * them, 16 at most (8 at head dims above 128, where 16 rows of accumulators
 * would not fit the registers). */
static int rows_per_block(int64_t R, int dpad) {
    if (R <= 4) return 4;
    if (R <= 8 || dpad > 128) return 8;
    return 16;
}

/* Index of an instance in cuda_state's decode_occupancy table. */
static int *occupancy_slot(cuda_state *s, fattn_dtype dt, int dpad, int br, int rescore) {
    const int i = dt == FATTN_F32 ? 0 : dt == FATTN_F16 ? 1 : 2;
    const int j = dpad == 64 ? 0 : dpad == 128 ? 1 : 2;
    const int k = br == 4 ? 0 : br == 8 ? 1 : 2;
    return &s->decode_occupancy[rescore ? 1 : 0][i][j][k];
}

/* Blocks of the instance resident per SM: measured on the device once per
 * context; if the runtime cannot say, estimated from shared memory alone. */
static int blocks_per_sm(cuda_state *s, fattn_dtype dt, int dpad, int br, int rescore, int smem) {
    int *slot = occupancy_slot(s, dt, dpad, br, rescore), n = 0;
    if (*slot > 0) return *slot;
    if (cuda_use(s, NULL) == FATTN_OK &&
        fattn_cuda_decode_occupancy(dt, dpad, br, rescore, &n) == cudaSuccess && n > 0)
        return *slot = n;
    cudaGetLastError(); /* the estimate stands in; the error must not leak into the next call */
    const size_t per_block = (size_t)smem + s->prop.reservedSharedMemPerBlock;
    const size_t fit = s->prop.sharedMemPerMultiprocessor / per_block;
    return fit ? (int)fit : 1;
}

/* The share of `slots` resident-block slots that `blocks` equal blocks keep
 * busy over the waves they take. */
static double wave_fill(int64_t blocks, int64_t slots) {
    return (double)blocks / (double)(ceil_div(blocks, slots) * slots);
}

/* kv_splits = 0: the heuristic at the top of this file. */
static int64_t choose_splits(int64_t units, int64_t slots, int64_t max_splits, double slack) {
    double best = 0.0;
    for (int64_t n = 1; n <= max_splits; n++) {
        const double f = wave_fill(units * n, slots);
        if (f > best) best = f;
    }
    for (int64_t n = 1; n <= max_splits; n++)
        if (wave_fill(units * n, slots) >= best - slack) return n;
    return 1;
}

fattn_status cuda_decode_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg) {
    cuda_state *s = state;
    /* Every variant but head_dim_v (which goes to the tiled kernels): the
     * sliding window (per-row key ranges, splits over the visible tiles
     * only) and sinks (folded in at the end, or by the merge) in the plain
     * instances; softcap, ALiBi and bias (per score) in the rescoring ones,
     * so that the plain instances' code does not change. */
    const unsigned rescore_bits = FATTN_VAR_SOFTCAP | FATTN_VAR_ALIBI | FATTN_VAR_BIAS;
    if (fattn_variants_declined(p, FATTN_VAR_WINDOW | FATTN_VAR_SINKS | rescore_bits, msg))
        return FATTN_ERR_UNSUPPORTED;
    const int rescore = (fattn_variants_used(p) & rescore_bits) != 0;
    const int64_t forced = p->tune.kv_splits;
    const int ragged = p->rag.on;
    if (forced == 1 && !ragged)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "kv_splits = 1: the keys are not split");
    if (p->tune.tile_q || p->tune.tile_kv)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tile overrides name the tiled kernels' tiles, not the decode kernel's");
    if (p->seq_q > CUDA_DEC_MAX_SEQ_Q)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "the decode kernel takes seq_q 1..%d",
                          CUDA_DEC_MAX_SEQ_Q);
    if (!ragged && p->seq_kv < 1)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_kv = 0: the tiled rows write the zero output");
    const long min_seq_kv = tune(s, "min_seq_kv", CUDA_DEC_MIN_SEQ_KV, 1, FATTN_INT32_MAX);
    if (!ragged && !forced && p->seq_kv < min_seq_kv)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_kv %lld: below %ld keys splitting does not pay",
                          (long long)p->seq_kv, min_seq_kv);
    /* Keys, rows and blocks are ints in the kernel; a split's last tile may
     * reach a block tile (at most 128 keys) past seq_kv, a row tile 15 rows
     * past R. */
    const int64_t group = p->heads_q / p->heads_kv, R = group * p->seq_q;
    if (p->seq_kv > FATTN_INT32_MAX - 4096 || R > FATTN_INT32_MAX - 16)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_kv = %lld, %lld packed rows: the decode kernel indexes keys and "
                          "rows with 32-bit integers",
                          (long long)p->seq_kv, (long long)R);
    const int dpad = fattn_cuda_decode_dpad(p->head_dim);
    if (!dpad)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: no decode kernel for it was built (FATTN_CUDA_HEAD_DIMS)",
                          (long long)p->head_dim);
    const int br = rows_per_block(R, dpad);
    int bkv = 0, smem = 0;
    fattn_cuda_decode_shape(p->dtype, dpad, br, rescore, &bkv, &smem);
    if (!bkv)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "no decode kernel for dtype %d, head-dim bucket %d, %d rows%s",
                          (int)p->dtype, dpad, br, rescore ? ", rescoring" : "");
    if ((size_t)smem > s->prop.sharedMemPerBlockOptin)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel needs %d bytes of shared memory per block; %s "
                          "(compute %d.%d) allows %zu",
                          smem, s->prop.name, s->prop.major, s->prop.minor,
                          (size_t)s->prop.sharedMemPerBlockOptin);
    const int64_t row_tiles = ceil_div(R, br);
    const int64_t units =
        p->batch * p->heads_kv * row_tiles; /* batch * heads_q * seq_q bounds it */
    if (units > FATTN_INT32_MAX)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "%lld blocks per key split: more than a CUDA grid's x dimension holds",
                          (long long)units);

    const long per_sm_tuned = tune(s, "blocks_per_sm", 0, 0, 64);
    const int per_sm =
        per_sm_tuned ? (int)per_sm_tuned : blocks_per_sm(s, p->dtype, dpad, br, rescore, smem);
    const int64_t slots = (int64_t)s->prop.multiProcessorCount * per_sm;
    /* Keys a block's rows can see: with a left window, at most the window
     * and the rows (the rows sit at the end of the cache), which the splits
     * divide (decode.cu's split_keys). */
    const int64_t vis_kv = p->var.on && p->var.window_left >= 0 &&
                                   p->var.window_left + p->seq_q < p->seq_kv
                               ? p->var.window_left + p->seq_q
                               : p->seq_kv;
    const int64_t tiles = ceil_div(vis_kv, bkv); /* 0 for a ragged batch without keys */
    int64_t splits = 1;
    if (forced >= 2) {
        splits = forced < tiles ? forced : tiles;
        if (splits > CUDA_DEC_GRID_Y) splits = CUDA_DEC_GRID_Y;
    } else if (forced == 0 && tiles > 1) {
        /* The floor is in bytes: CUDA_DEC_MIN_KEYS keys of bf16 d128 K and V. */
        const int64_t key_bytes = 2 * (int64_t)dpad * (p->dtype == FATTN_F32 ? 4 : 2);
        const int64_t floor_keys = CUDA_DEC_MIN_KEYS * 512 / key_bytes;
        int64_t max_splits = vis_kv / tune(s, "min_keys", floor_keys, 1, FATTN_INT32_MAX);
        /* A grid that leaves SMs without a block may split down to
         * CUDA_DEC_FILL_KEYS keys until it has up to one block per SM (not
         * more: 17 splits of 8 K/V heads, 136 blocks on 132 SMs, ran 13%
         * slower than 16, since SMs with two blocks finish last). */
        const int64_t sms = s->prop.multiProcessorCount;
        if (units * max_splits < sms) {
            const int64_t fill = sms / units, by_keys = vis_kv / CUDA_DEC_FILL_KEYS;
            const int64_t more = fill < by_keys ? fill : by_keys;
            if (more > max_splits) max_splits = more;
        }
        const long cap = tune(s, "max_splits", CUDA_DEC_MAX_SPLITS, 1, CUDA_DEC_GRID_Y);
        if (max_splits > tiles) max_splits = tiles;
        if (max_splits > cap) max_splits = cap;
        const double slack =
            tune(s, "slack_pm", (long)(CUDA_DEC_WAVE_SLACK * 1000 + 0.5), 0, 1000) / 1000.0;
        if (max_splits > 1) splits = choose_splits(units, slots, max_splits, slack);
    }
    if (splits < 1) splits = 1;
    /* The partial rows: splits * batch * heads_q * seq_q of head_dim + 1
     * floats (O, then the lse); a forced split count can overflow it. */
    uint64_t workspace = 0;
    if (splits > 1) {
        const uint64_t rows = (uint64_t)(p->batch * p->heads_q * p->seq_q); /* validated */
        if (__builtin_mul_overflow(rows, (uint64_t)(p->head_dim + 1) * sizeof(float), &workspace) ||
            __builtin_mul_overflow(workspace, (uint64_t)splits, &workspace))
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "the decode kernel's workspace for %lld splits overflows 64 bits",
                              (long long)splits);
    }

    cuda_plan *cp = FATTN_PLAN_AREA(plan, cuda_plan);
    memset(cp, 0, sizeof *cp);
    cp->dpad = dpad;
    cp->br = br;
    cp->row_tiles = (int)row_tiles;
    cp->splits = (int)splits;
    cp->rescore = rescore;
    plan->tiling.tile_q = br;
    plan->tiling.tile_kv = bkv;
    plan->tiling.concurrent_groups = slots;
    plan->tiling.workspace_bytes = workspace;
    return FATTN_OK;
}

fattn_status cuda_decode_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg) {
    cuda_state *s = state;
    const cuda_plan *cp = FATTN_PLAN_AREA(plan, const cuda_plan);
    const int64_t B = p->batch, Hq = p->heads_q, Sq = p->seq_q, D = p->head_dim;
    const int64_t rows = B * Hq * Sq, splits = cp->splits; /* validated: no overflow */
    fattn_cuda_decode_args d;
    memset(&d, 0, sizeof d);
    d.dpad = cp->dpad;
    d.br = cp->br;
    d.splits = cp->splits;
    d.row_tiles = cp->row_tiles;
    d.rescore = cp->rescore;
    if (splits > 1) {
        /* The core binds whole buffers (offset 0) of at least the plan's bytes. */
        if (!p->workspace.mem || p->workspace.offset != 0)
            return fattn_fail(msg, FATTN_ERR_INTERNAL,
                              "the decode plan needs a workspace buffer of its own (offset 0)");
        d.ws_o = (float *)cuda_ptr(&p->workspace);
        d.ws_lse = d.ws_o + splits * rows * D; /* the lse parts follow the O parts */
    }
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    fattn_cuda_args a;
    cuda_args(s, p, &a);
    cudaError_t err = fattn_cuda_decode(&a, &d, s->stream);
    if (err != cudaSuccess) return cuda_fail(msg, err, "the split-KV decode kernel");
    if (splits == 1) return FATTN_OK; /* the kernel wrote O and lse */

    /* The merge, after the decode kernel on the same stream: part p of row
     * (b, h, i) at ((p * B + b) * Hq + h) * Sq + i, D floats of O (lse: one). */
    fattn_cuda_combine_args c;
    memset(&c, 0, sizeof c);
    c.part_o = d.ws_o;
    c.part_lse = d.ws_lse;
    c.o = a.o;
    c.lse = a.lse;
    c.po_sb = Hq * Sq * D, c.po_sh = Sq * D, c.po_ss = D, c.po_ps = rows * D;
    c.pl_sb = Hq * Sq, c.pl_sh = Sq, c.pl_ss = 1, c.pl_ps = rows;
    c.o_sb = a.o_sb, c.o_sh = a.o_sh, c.o_ss = a.o_ss;
    c.l_sb = a.l_sb, c.l_sh = a.l_sh, c.l_ss = a.l_ss;
    c.batch = B;
    c.heads = Hq;
    c.seq = Sq;
    c.parts = splits;
    c.head_dim = (int)D;
    c.part_dtype = FATTN_F32;
    c.dtype = p->dtype;
    /* Packed query rows: row i of sequence b is row cu_q[b] + i of O, and
     * rows past a sequence (no part was written for them) are not O's. */
    c.cu_q = a.rag.on ? a.rag.cu_q : NULL;
    c.cu_q_s = a.rag.cu_q_s;
    c.total_q = a.rag.total_q;
    /* On 9.x the combine's launch overlaps the decode's last blocks
     * (programmatic dependent launch; knob pdl=0 turns it off). */
    c.after_grid = s->prop.major >= 9 && tune(s, "pdl", 1, 0, 1);
    /* The parts exclude the sink; the merge adds it once per row. */
    c.sinks = a.var.on ? a.var.sinks : NULL;
    c.sinks_sh = a.var.sinks_sh;
    err = fattn_cuda_combine(&c, s->stream);
    return err == cudaSuccess ? FATTN_OK
                              : cuda_fail(msg, err, "the split-KV decode's combine kernel");
}
