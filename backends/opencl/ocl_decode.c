/* The OpenCL "decode-matrix" and "decode" variants (FATTN_OP_FORWARD,
 * tried in that order before "matrix" and "tiled"): split-KV decoding with
 * GQA packing. "decode-matrix" (kernels_cl/decode_mma.cl, after the
 * device's matrix files) takes f16 and bf16 where the matrix probe passed:
 * a row tile is one matrix tile of rows (16 on NVIDIA), and its warps
 * stream keys through rings of their own (mma_shape below); everything
 * else here (splits, workspace, combine, launch) is shared. "decode" is
 * the scalar kernel described next, for f32 and devices without a matrix
 * path (FATTN_DECODE_TUNE mma=0 forces it). kernels_cl/decode.cl gives each
 * (batch, KV head, row tile, key split) one work-group, which streams its
 * keys once for every query row of the KV head's group in the tile and writes
 * a normalised partial O and its lse (float32) to the workspace; then
 * kernels_cl/combine.cl (ocl_combine_run, the fattn_combine row) merges the
 * splits of each row into O (dtype) and lse. Both launches go on s->queue,
 * one after the other: no host wait, no allocation (the core binds the
 * workspace: the caller's desc->workspace or the context's own).
 *
 * Which problems (ocl_decode_accept):
 * - decode-shaped ones: seq_q <= OCL_DEC_MAX_SEQ_Q. The R = (heads_q /
 *   heads_kv) * seq_q rows of one KV head are packed into row tiles of BR
 *   <= 32 rows (16 at head dims above 128); R <= BR is one tile, so each K/V
 *   element is read once per group; a larger R (MQA with seq_q > 1) takes
 *   ceil(R / BR) tiles, still BR rows per K/V read instead of the tiled
 *   kernel's one query head;
 * - FATTN_PARAM_KV_SPLITS (p->tune.kv_splits): 1 never takes this row (the
 *   tiled kernel runs); N >= 2 forces min(N, key tiles) splits on any such
 *   shape with seq_kv >= 1, so tests reach every split count; 0 chooses
 *   (below) and takes the row only from seq_kv >= OCL_DEC_MIN_SEQ_KV;
 * - not: tile overrides (FATTN_PARAM_TILE_Q / _KV, FATTN_OPENCL_TILES: they
 *   name the tiled kernel's tiles, which then runs), seq_kv = 0, sizes past
 *   32-bit key and row indices, a workspace larger than one device buffer
 *   even at one split, a device or kernel build that cannot hold the tiles.
 * Causal masks of both alignments are handled (the kernel's key_limit).
 * The attention variants (p->var) and head_dim_v take FATTN_VAR builds of
 * decode.cl (ocl_variants.c), all but the sinks, which the combine's SINKS
 * build adds once per row; with a window the split count follows the keys
 * the rows see (decode_visible_keys), and the kernel divides only those.
 * Variable-length sequences and paged caches (p->rag.on) take a second
 * build of decode.cl (FATTN_RAGGED, ocl_ragged.c's arguments): sizes, splits
 * and the workspace follow seq_q and seq_kv, the longest sequences, and
 * each sequence divides its own keys among the splits; with packed query
 * rows the combine's ragged build writes row i of sequence b to row
 * cu_seqlens_q[b] + i.
 *
 * The split count when the caller leaves it to us (kv_splits = 0): enough
 * splits that the B * Hkv * row_tiles work-groups, times splits, fill the
 * device OCL_DEC_WAVES times over (compute_units * OCL_DEC_WAVES groups,
 * rounded to whole rounds of the groups a compute unit holds: decode_waves),
 * but no split shorter than OCL_DEC_MIN_KEYS keys (the per-split costs:
 * loading Q, writing the partial rows, the combine reading them) and at most
 * OCL_DEC_MAX_SPLITS. One split is a valid outcome (large batches): the
 * GQA packing still pays.
 *
 * Measured (H200, NVIDIA OpenCL, bf16 GQA 32/8 d128 seq_q 1, 2026-11-23,
 * bench/tune_opencl_decode.sh; results/2026-11-23-h200-decode-v3): at batch
 * 1 the defaults (4 groups per compute unit, 64-key tiles, 128 work-items,
 * 4 P.V row lanes) ran 0.080 ms at 32k and 0.208 ms at 128k; one P.V row
 * lane (vr=1) 0.099 / 0.247. With 32 or more groups per split (batch 8 and
 * up here) one row lane and 8 groups per compute unit ran best: batch 8 32k
 * 0.472 -> 0.366 ms, batch 64 2.74 -> 2.47 ms. Tiles of 128 keys, 256
 * work-items and a 32 KiB tile did not help. The paged build carries more
 * state: at 64-key tiles it took 168 registers (3 groups per compute unit)
 * where the dense one took 128; with 32-key tiles 126. So an unbatched
 * paged decode takes 32-key tiles (b1 32k page 16: 0.114 -> 0.089 ms, the
 * dense one 0.082), and a batched one two row lanes (b8 32k page 16: 0.446
 * -> 0.413 ms with one lane; 32-key tiles there: 0.507).
 *
 * Tuning at run time: FATTN_DECODE_TUNE="name=value,..." (settings
 * decode_tune; fattn_tune_value) overrides them. Values that change the
 * kernel's build go into its build options, so each gets its own cached
 * program. Out-of-range values make this row decline (another path runs).
 *   waves       work-groups per compute unit aimed at   (OCL_DEC_WAVES,
 *               OCL_DEC_WAVES_BATCHED from OCL_DEC_BATCHED_UNITS groups)
 *   min_keys    keys per split, at least                (OCL_DEC_MIN_KEYS)
 *   max_splits  splits, at most                         (OCL_DEC_MAX_SPLITS)
 *   min_seq_kv  kv_splits = 0: shorter caches go tiled  (OCL_DEC_MIN_SEQ_KV)
 *   nt          work-items per group, 32..1024, power of two (OCL_DEC_NT)
 *   tile        bytes of one K (or V) tile, aimed at    (OCL_DEC_KV_TILE)
 *   bkv         keys per tile, power of two 16..256 (0: from tile)
 *   br          query rows per row tile, at most, power of two (32; 16 at
 *               head dims above 128)
 *   vec         1: 16-byte K/V loads when rows are 16-byte aligned; 0: never
 *   vr          P V row lanes, at most (power of two; 0: as many as fit,
 *               or 1 from OCL_DEC_BATCHED_UNITS groups per split)
 *   mma         0: the matrix build declines (the scalar kernel runs)
 *   nw          matrix build: warps per group (power of two, 1..8)
 *   stages      matrix build: ring stages per warp, 2..4
 *   kw          matrix build: keys per warp tile, 16 or 32
 * e.g. FATTN_DECODE_TUNE="waves=8,nt=256,tile=8192". */
#include <stdio.h>
#include <string.h>

#include "ocl_common.h"

#define OCL_DEC_MAX_SEQ_Q 16    /* query rows per sequence this variant takes */
#define OCL_DEC_MIN_SEQ_KV 512  /* kv_splits = 0: shorter caches go to "tiled" */
#define OCL_DEC_WAVES 4         /* kv_splits = 0: work-groups per compute unit aimed at */
#define OCL_DEC_WAVES_BATCHED 8 /* ... when a split has OCL_DEC_BATCHED_UNITS groups or more */
#define OCL_DEC_BATCHED_UNITS 32
#define OCL_DEC_MIN_KEYS 256       /* kv_splits = 0: keys per split, at least */
#define OCL_DEC_MAX_SPLITS 128     /* kv_splits = 0: splits, at most */
#define OCL_DEC_NT 128             /* work-items per group, at most */
#define OCL_DEC_LOCAL_CAP 49152    /* local bytes per group, at most (NVIDIA's limit) */
#define OCL_DEC_KV_TILE 16384      /* bytes of one K (or V) tile in local memory, aimed at */
#define OCL_DEC_MAX_LPT 32         /* chunks of K (and of V) one work-item holds in registers */
#define OCL_DEC_PAGED_BKV 32       /* paged, unbatched: keys per tile, at most */
#define OCL_DEC_PAGED_VR_BATCHED 2 /* paged, batched: P.V row lanes */
#define OCL_DEC_MMA_KW 16          /* matrix build: keys per warp tile */
#define OCL_DEC_MMA_WARPS 4        /* ... warps per group, at most */
#define OCL_DEC_MMA_RING 49152     /* ... bytes of the group's rings, at most */
#define OCL_DEC_MMA_ROUNDS 1       /* ... kv_splits = 0: rounds of resident groups aimed at */

/* The plan (decode.cl's build options, plus the launch's counts). */
typedef struct ocl_decode_plan {
    int dpad, br, bkv, nt;
    int dvpad;              /* V's head dim bucket (head_dim_v), else dpad */
    unsigned var;           /* decode.cl's FATTN_VAR: the problem's variants but the sinks */
    int ce;                 /* elements per 16-byte chunk: 4 (f32) or 8 */
    int sr, sk, vr, vc, vk; /* work-item maps: scores SR x SK, P V VK x VR x VC */
    int vec;                /* decode.cl's KV_VEC: K/V rows 16-byte aligned */
    int splits, row_tiles, tiles;
    /* The matrix build (decode_mma.cl): warps per group, ring stages, and
     * the matrix files' scratch words per warp; mma 0 for decode.cl. */
    int mma, nw, stages, xs_words;
    cl_kernel k; /* built by accept; the context's program cache owns it */
} ocl_decode_plan;
FATTN_PLAN_FITS(ocl_decode_plan);

/* Mirrors decode.cl's local arrays, pads included (paged: its builds with
 * FATTN_PAGED; d->var: its variant builds). */
static size_t decode_local_bytes(const ocl_decode_plan *d, fattn_dtype dt, int paged) {
    (void)dt; /* d->ce says it */
    const size_t dc = (size_t)(d->dpad / d->ce), dvc = (size_t)(d->dvpad / d->ce);
    const size_t br = (size_t)d->br, bkv = (size_t)d->bkv, dcx = dc > dvc ? dc : dvc;
    const int rows = (d->var & (FATTN_VAR_WINDOW | FATTN_VAR_ALIBI | FATTN_VAR_BIAS)) != 0;
    return br * (dcx + 1) * (size_t)d->ce * 4  /* Qs (widened chunks; then the accumulators) */
           + bkv * (dc + 1) * 16               /* Ks */
           + bkv * (dvc + 1) * 16              /* Vs */
           + 2 * br * (bkv + 4) * 4            /* Ps, Pp */
           + br * 4 * 4                        /* rowm, rowa, rowl, rowlim */
           + (rows ? br * (4 + 4 + 4 + 8) : 0) /* VAR_ROWS: rowlo, rowi, rowsl, rowbb */
           + (paged ? 2 * bkv * 16 : 0)        /* kps */
           + (rows ? 80 : 64);                 /* alignment between the arrays */
}

/* Mirrors decode_mma.cl's local arrays: the warps' rings (K and V rows of
 * bkv / nw keys per stage; Q's staging and the merge take turns in them)
 * and the matrix files' scratch. */
static size_t mma_local_bytes(const ocl_decode_plan *d) {
    const size_t kw = (size_t)(d->bkv / d->nw), nw = (size_t)d->nw;
    return nw * (size_t)d->stages * kw * (size_t)(d->dpad + d->dvpad) * 2 /* rings */
           + nw * (size_t)d->xs_words * 4;
}

static size_t plan_local_bytes(const ocl_decode_plan *d, fattn_dtype dt, int paged) {
    return d->mma ? mma_local_bytes(d) : decode_local_bytes(d, dt, paged);
}

/* The work-item maps for NT work-items (all powers of two; decode.cl checks
 * them again): scores, SK key lanes (up to the tile) by SR row lanes; P V,
 * VC 16-byte chunks of the head dim (up to all), then VR row lanes, then VK
 * key lanes with the rest. */
static void decode_maps(ocl_decode_plan *d, int vr_set) {
    const int dc = d->dvpad / d->ce; /* P V runs over V's chunks */
    d->sk = d->bkv < d->nt ? d->bkv : d->nt;
    d->sr = d->nt / d->sk < d->br ? d->nt / d->sk : d->br;
    d->vc = dc < d->nt ? dc : d->nt;
    d->vr = d->nt / d->vc < d->br ? d->nt / d->vc : d->br;
    /* Fewer row lanes (vr knob): each V chunk is widened by fewer work-items
     * and serves more rows in registers; the key lanes take the rest. */
    if (vr_set && vr_set < d->vr) d->vr = vr_set;
    d->vk = d->nt / (d->vc * d->vr);
}

static fattn_status decode_kernel(ocl_state *s, const fattn_problem *p, const ocl_decode_plan *d,
                                  cl_kernel *k, fattn_msg *msg) {
    char options[320], var[80];
    ocl_variant_options(p, d->var, d->dvpad, var, sizeof var);
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=%d -DBR=%d -DBKV=%d -DNT=%d -DSR=%d -DSK=%d -DVR=%d "
             "-DVC=%d -DVK=%d -DKV_VEC=%d -DACC_COPY=%d%s%s",
             (int)p->dtype, d->dpad, d->br, d->bkv, d->nt, d->sr, d->sk, d->vr, d->vc, d->vk,
             d->vec, (s->dev.type & CL_DEVICE_TYPE_CPU) != 0, ocl_ragged_option(p), var);
    return ocl_get_kernel(&s->cache, s->context, s->dev.device, "decode_split.cl+decode.cl",
                          "decode", options, k, msg);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Keys the rows of one sequence see at most: with a window's left side,
 * seq_q + window_left (the last row's diagonal is the last key, the first
 * row's window starts seq_q - 1 keys before it), else all. Splits divide
 * these (decode.cl takes its tiles from the window's first). */
static int64_t decode_visible_keys(const fattn_problem *p) {
    const int64_t wl = p->var.on ? p->var.window_left : -1;
    return wl >= 0 && wl < p->seq_kv - p->seq_q ? p->seq_q + wl : p->seq_kv;
}

static int is_pow2(long x) { return x > 0 && (x & (x - 1)) == 0; }

/* Whether every K and V row starts on a 16-byte boundary (in elements: a
 * multiple of ce) and holds whole chunks, so decode.cl may use one 16-byte
 * load per chunk (the buffers' own bases are aligned far more). */
static int decode_vec_ok(const fattn_problem *p, int ce) {
    if (p->head_dim % ce || p->head_dim_v % ce) return 0;
    const fattn_operand *ops[2] = {&p->k, &p->v};
    for (int i = 0; i < 2; i++) {
        const int64_t f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head,
                              ops[i]->stride_seq};
        for (int j = 0; j < 4; j++)
            if (f[j] % ce) return 0;
    }
    return 1;
}

/* Work-groups per compute unit the split count aims at (kv_splits = 0):
 * OCL_DEC_WAVES, or OCL_DEC_WAVES_BATCHED for batched decoding, rounded to
 * whole rounds of the groups a compute unit holds at once by registers
 * (`resident`: the kernel's work-group limit over NT, which NVIDIA's
 * OpenCL lowers with the registers a build takes). At batch 1 on the H200
 * the paged build took 168 registers, 3 groups per compute unit: aiming at
 * 4 left a second round of a third of the groups. */
static long decode_waves(int batched, int64_t resident) {
    const long aim = batched ? OCL_DEC_WAVES_BATCHED : OCL_DEC_WAVES;
    if (resident < 1 || resident >= aim) return aim;
    const long rounds = (aim + resident / 2) / resident;
    return (long)resident * (rounds > 0 ? rounds : 1);
}

/* What both rows check first: the tuning string's ranges, forced splits,
 * tile overrides, the shape, 32-bit indices. */
static fattn_status decode_checks(const ocl_state *s, const fattn_problem *p, fattn_msg *msg) {
    const int forced = p->tune.kv_splits;
    const char *tune = s->settings.decode_tune;
    const long waves_set = fattn_tune_value(tune, "waves", 0);
    const long min_keys = fattn_tune_value(tune, "min_keys", OCL_DEC_MIN_KEYS);
    const long max_splits = fattn_tune_value(tune, "max_splits", OCL_DEC_MAX_SPLITS);
    const long min_seq_kv = fattn_tune_value(tune, "min_seq_kv", OCL_DEC_MIN_SEQ_KV);
    const long nt = fattn_tune_value(tune, "nt", OCL_DEC_NT);
    const long tile_bytes = fattn_tune_value(tune, "tile", OCL_DEC_KV_TILE);
    const long bkv_set = fattn_tune_value(tune, "bkv", 0);
    const long br_set = fattn_tune_value(tune, "br", 0);
    const long vr_set = fattn_tune_value(tune, "vr", 0);
    const long mma = fattn_tune_value(tune, "mma", 1), nw = fattn_tune_value(tune, "nw", 0);
    const long stages = fattn_tune_value(tune, "stages", 0), kw = fattn_tune_value(tune, "kw", 0);
    if (waves_set < 0 || waves_set > 1024 || min_keys < 1 || max_splits < 1 || min_seq_kv < 1 ||
        !is_pow2(nt) || nt < 32 || nt > 1024 || tile_bytes < 256 ||
        (bkv_set && (!is_pow2(bkv_set) || bkv_set < 16 || bkv_set > 256)) ||
        (br_set && (!is_pow2(br_set) || br_set > 64)) || (vr_set && !is_pow2(vr_set)) ||
        (mma & ~1L) || (nw && (!is_pow2(nw) || nw > 8)) || (stages && (stages < 2 || stages > 4)) ||
        (kw && kw != 16 && kw != 32))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "FATTN_DECODE_TUNE \"%s\" has a value out of range", tune);
    if (forced == 1)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "kv_splits = 1: the keys are not split");
    if (p->tune.tile_q || p->tune.tile_kv ||
        (s->settings.opencl_tiles && *s->settings.opencl_tiles))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tile overrides name the tiled kernel's tiles");
    if (p->seq_q > OCL_DEC_MAX_SEQ_Q || p->seq_kv < 1)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel takes seq_q 1..%d and seq_kv >= 1", OCL_DEC_MAX_SEQ_Q);
    if (!forced && p->seq_kv < min_seq_kv)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "seq_kv %lld: below %ld keys splitting does not pay",
                          (long long)p->seq_kv, min_seq_kv);
    const int64_t int_max = FATTN_INT32_MAX;
    const int64_t group = p->heads_q / p->heads_kv, R = group * p->seq_q;
    if (p->seq_kv > int_max - 4096 || R > int_max || p->batch * p->heads_q > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel indexes keys and rows with 32-bit integers");
    return FATTN_OK;
}

static int bucket32(int64_t d) {
    int b = 32;
    while (b < d) b *= 2;
    return b;
}

/* decode.cl's shape: rows, tile, work-item maps (see the top). */
static fattn_status scalar_shape(const ocl_state *s, const fattn_problem *p, ocl_decode_plan *d,
                                 fattn_msg *msg) {
    const char *tune = s->settings.decode_tune;
    const long nt = fattn_tune_value(tune, "nt", OCL_DEC_NT);
    const long tile_bytes = fattn_tune_value(tune, "tile", OCL_DEC_KV_TILE);
    const long bkv_set = fattn_tune_value(tune, "bkv", 0);
    const long br_set = fattn_tune_value(tune, "br", 0);
    const long vec = fattn_tune_value(tune, "vec", 1);
    const long vr_set = fattn_tune_value(tune, "vr", 0);
    const int64_t R = p->heads_q / p->heads_kv * p->seq_q;
    const int dpad_max = d->dpad > d->dvpad ? d->dpad : d->dvpad;
    const int max_br = br_set ? (int)br_set : dpad_max <= 128 ? 32 : 16;
    d->br = 1;
    while (d->br < R && d->br < max_br) d->br *= 2;
    d->ce = p->dtype == FATTN_F32 ? 4 : 8;
    const int dc = d->dpad / d->ce, dvc = d->dvpad / d->ce; /* 16-byte chunks per row */
    const int dcx = dc > dvc ? dc : dvc;
    d->nt = s->limits.softmax_wg < nt ? (int)s->limits.softmax_wg : (int)nt;
    if (d->nt < d->br || d->nt < dcx) /* a work-item per row (softmax), per chunk (loads) */
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel needs %d work-items per group; the device takes %d",
                          d->br > dcx ? d->br : dcx, s->limits.softmax_wg);
    d->vec = vec && decode_vec_ok(p, d->ce);
    /* Keys per tile: a K tile of `tile` bytes (or bkv keys), halved until the
     * group's local memory fits, at least 16 and at least one key per
     * work-item's load stride; each work-item holds at most OCL_DEC_MAX_LPT
     * chunks of K (and of V) in registers. */
    const size_t esize = p->dtype == FATTN_F32 ? 4 : 2;
    const int paged = p->rag.on && p->rag.page_size > 0;
    const size_t cap =
        s->limits.local_mem < OCL_DEC_LOCAL_CAP ? s->limits.local_mem : OCL_DEC_LOCAL_CAP;
    /* With head_dim_v: a tile holds whole load strides of the narrower of
     * K's and V's rows (kstep), and the wider one's chunks per work-item
     * (over kstep_w) stay within OCL_DEC_MAX_LPT. */
    const int kstep = d->nt / (dc < dvc ? dc : dvc), kstep_w = d->nt / dcx;
    const int min_bkv = kstep > 16 ? kstep : 16;
    d->row_tiles = (int)ceil_div(R, d->br);
    const int64_t base = p->batch * p->heads_kv * d->row_tiles; /* work-groups per split */
    const int batched = base >= OCL_DEC_BATCHED_UNITS;
    d->bkv = bkv_set ? (int)bkv_set : paged && !batched ? OCL_DEC_PAGED_BKV : 256;
    while (!bkv_set && d->bkv > min_bkv &&
           ((size_t)d->bkv * (size_t)dpad_max * esize > (size_t)tile_bytes ||
            d->bkv / kstep_w > OCL_DEC_MAX_LPT))
        d->bkv /= 2;
    decode_maps(d, (int)vr_set);
    while (d->bkv > min_bkv && decode_local_bytes(d, p->dtype, paged) > cap) {
        d->bkv /= 2;
        decode_maps(d, (int)vr_set);
    }
    if (decode_local_bytes(d, p->dtype, paged) > s->limits.local_mem || d->vk > d->bkv ||
        d->bkv < kstep || d->bkv / kstep_w > OCL_DEC_MAX_LPT)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel's tiles (%d keys, %d work-items) need %zu bytes of "
                          "local memory; the device has %zu",
                          d->bkv, d->nt, decode_local_bytes(d, p->dtype, paged),
                          s->limits.local_mem);

    /* Many row tiles (batched decoding): fewer P.V row lanes per work-item
     * (one; two for a paged cache) and more groups per compute unit ran
     * faster on the H200, at batch 1 the defaults did (see the measurements
     * above) but for a dense f32 cache at head dim 128: one row lane took
     * 0.110 and 0.292 ms at 32k and 128k keys against 0.160 and 0.437 with
     * four, while paged (0.143 against 0.124) and d64 (0.087 against 0.075)
     * lost (bench/results/2026-11-23-h200-decode-f32, calls 73 and 74). */
    const int f32_d128 = p->dtype == FATTN_F32 && !paged && d->dvpad == 128;
    if ((batched || f32_d128) && !vr_set && d->nt / d->vc <= d->bkv)
        decode_maps(d, batched && paged ? OCL_DEC_PAGED_VR_BATCHED : 1);
    return FATTN_OK;
}

/* decode_mma.cl's shape: a row tile is one matrix tile of rows (mf->tq);
 * warps of OCL_DEC_MMA_KW keys per tile. The rings take OCL_DEC_MMA_RING
 * bytes at most: 3 stages deep where local memory holds them with a warp
 * or more, else 2, with as many warps (up to OCL_DEC_MMA_WARPS) as fit;
 * the tuning string's nw, stages and kw override. */
static fattn_status mma_shape(const ocl_state *s, const fattn_problem *p, ocl_decode_plan *d,
                              const ocl_mma_files *mf, fattn_msg *msg) {
    const char *tune = s->settings.decode_tune;
    const int kw = (int)fattn_tune_value(tune, "kw", OCL_DEC_MMA_KW);
    d->mma = 1;
    d->xs_words = mf->xs_words;
    d->br = mf->tq;
    d->ce = 8;
    const size_t stage = (size_t)kw * (size_t)(d->dpad + d->dvpad) * 2; /* one warp's */
    for (int stages = 3; stages >= 2; stages--) {
        int nw = OCL_DEC_MMA_WARPS;
        while (nw > 1 && (size_t)nw * (size_t)stages * stage > OCL_DEC_MMA_RING) nw /= 2;
        d->stages = (int)fattn_tune_value(tune, "stages", stages);
        d->nw = (int)fattn_tune_value(tune, "nw", nw);
        d->bkv = d->nw * kw;
        if (mma_local_bytes(d) <= s->limits.local_mem) break;
    }
    d->nt = d->nw * mf->warp;
    d->vec = decode_vec_ok(p, 8) && fattn_tune_value(tune, "vec", 1);
    d->row_tiles = (int)ceil_div(p->heads_q / p->heads_kv * p->seq_q, d->br);
    /* A stage also holds Q, and the rings the merge (decode_mma.cl checks
     * the same). */
    const size_t ring = (size_t)d->nw * (size_t)d->stages * stage;
    const size_t merge =
        ((size_t)d->nw * (size_t)d->dvpad + 2 * (size_t)d->nw + 2) * (size_t)d->br * 4;
    if (stage < (size_t)d->br * (size_t)d->dpad * 2 || ring < merge)
        return fattn_fail(
            msg, FATTN_ERR_UNSUPPORTED,
            "the matrix decode kernel's rings (%zu bytes) cannot hold Q and the merge", ring);
    if (mma_local_bytes(d) > s->limits.local_mem || (size_t)d->nt > s->limits.max_wg)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the matrix decode kernel (%d warps of %d, %d stages of %d keys) needs "
                          "%zu bytes of local memory and %d work-items; the device has %zu and %zu",
                          d->nw, mf->warp, d->stages, kw, mma_local_bytes(d), d->nt,
                          s->limits.local_mem, s->limits.max_wg);
    return FATTN_OK;
}

static fattn_status build_kernel(ocl_state *s, const fattn_problem *p, const ocl_decode_plan *d,
                                 const ocl_mma_files *mf, cl_kernel *k, fattn_msg *msg) {
    if (!d->mma) return decode_kernel(s, p, d, k, msg);
    char options[320], var[80], dv[32] = "", file[200];
    ocl_variant_options(p, d->var, d->dvpad, var, sizeof var);
    if (d->dvpad != d->dpad && !(d->var & FATTN_VAR_HEAD_DIM_V))
        snprintf(dv, sizeof dv, " -DDVPAD=%d", d->dvpad);
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=%d -DBM=%d -DBN=%d -DNW=%d -DDSTAGES=%d "
             "-DKV_VEC=%d%s%s%s%s",
             (int)p->dtype, d->dpad, d->br * d->nw, d->bkv / d->nw, d->nw, d->stages, d->vec, dv,
             ocl_ragged_option(p), var, mf->options);
    snprintf(file, sizeof file, "%s+decode_split.cl+decode_mma.cl", mf->files);
    return ocl_get_kernel(&s->cache, s->context, s->dev.device, file, "decode_mma", options, k,
                          msg);
}

/* Either row's accept: the shape (matrix or scalar), the build and its
 * work-group limit, the split count, the plan. */
static fattn_status decode_accept(ocl_state *s, const fattn_problem *p, fattn_plan *plan, int mma,
                                  fattn_msg *msg) {
    fattn_status st = decode_checks(s, p, msg);
    if (st != FATTN_OK) return st;
    const int forced = p->tune.kv_splits;
    const char *tune = s->settings.decode_tune;
    const long waves_set = fattn_tune_value(tune, "waves", 0);
    const long min_keys = fattn_tune_value(tune, "min_keys", OCL_DEC_MIN_KEYS);
    const long max_splits = fattn_tune_value(tune, "max_splits", OCL_DEC_MAX_SPLITS);
    const int64_t int_max = FATTN_INT32_MAX;

    ocl_decode_plan d;
    memset(&d, 0, sizeof d);
    d.dpad = bucket32(p->head_dim);
    d.dvpad = bucket32(p->head_dim_v);
    d.var = fattn_variants_used(p) & ~FATTN_VAR_SINKS; /* the combine adds the sinks */
    ocl_mma_files mf;
    memset(&mf, 0, sizeof mf);
    if (mma) {
        if (!fattn_tune_value(tune, "mma", 1))
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "FATTN_DECODE_TUNE mma=0: the scalar decode kernel runs");
        if (!ocl_mma_files_for(s, p->dtype, &mf, msg)) return FATTN_ERR_UNSUPPORTED;
        st = mma_shape(s, p, &d, &mf, msg);
    } else {
        st = scalar_shape(s, p, &d, msg);
    }
    if (st != FATTN_OK) return st;
    const int paged = p->rag.on && p->rag.page_size > 0;
    d.tiles = (int)ceil_div(p->seq_kv, d.bkv);
    const int64_t base = p->batch * p->heads_kv * d.row_tiles; /* work-groups per split */
    const int batched = base >= OCL_DEC_BATCHED_UNITS;
    const int64_t rows = p->batch * p->heads_q * p->seq_q; /* validated: no overflow */
    const uint64_t per_split = (uint64_t)rows * (uint64_t)(p->head_dim_v + 1) * sizeof(float);
    if (per_split > s->limits.max_alloc || base > int_max / d.nt)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel's workspace or grid would be too large");

    /* The build (its options do not depend on the split count), and its own
     * work-group limit: registers can lower it. */
    cl_kernel k;
    st = build_kernel(s, p, &d, &mf, &k, msg);
    /* Chosen by itself, the path gives way to the next row when a driver
     * cannot build it (the scalar decode kernel, then the tiled one);
     * forced splits (tests, tuning) report the build failure with its log. */
    if (st == FATTN_ERR_BUILD && p->tune.kv_splits == 0) return FATTN_ERR_UNSUPPORTED;
    if (st != FATTN_OK) return st;
    size_t kernel_wg = 0;
    OCL_TRY(msg, clGetKernelWorkGroupInfo(k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_wg, &kernel_wg, NULL));
    if ((size_t)d.nt > kernel_wg)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the decode kernel needs %d work-items per group; this build allows %zu",
                          d.nt, kernel_wg);
    int64_t resident = (int64_t)(kernel_wg / (size_t)d.nt);
    const long waves = waves_set ? waves_set : decode_waves(batched, resident);
    /* The matrix build: groups its local memory lets a compute unit hold. */
    if (mma) {
        const int64_t by_local = (int64_t)(s->limits.cu_local_mem / mma_local_bytes(&d));
        if (by_local < resident) resident = by_local > 0 ? by_local : 1;
    }

    int64_t splits;
    if (forced) {
        splits = forced;
    } else {
        /* The matrix build fills the device's resident groups once
         * (OCL_DEC_MMA_ROUNDS), rounded down: a second, partial round left
         * most compute units idle (H200, call65: batch 8 at 7 splits, one
         * round, ran 0.333 ms; at 9, 0.344; at 17, 0.344). The scalar
         * build aims at `waves` groups per compute unit. */
        const int64_t cus = s->limits.compute_units;
        const int64_t fill = cus * resident * OCL_DEC_MMA_ROUNDS / base;
        const int64_t want =
            mma && !waves_set ? (fill > 0 ? fill : 1) : ceil_div(cus * waves, base);
        const int64_t by_keys = decode_visible_keys(p) / min_keys;
        splits = want < by_keys ? want : by_keys;
        if (splits > max_splits) splits = max_splits;
    }
    /* No more splits than tiles the rows see (a window's keys can straddle
     * one more tile boundary than they fill). */
    const int64_t vis_tiles = ceil_div(decode_visible_keys(p), d.bkv) + 1;
    if (splits > d.tiles) splits = d.tiles;
    if (splits > vis_tiles) splits = vis_tiles;
    if (splits < 1) splits = 1;
    /* The workspace must be one device buffer, and the groups a 32-bit count
     * of work-items: fewer splits when not (a forced count too). */
    while (splits > 1 &&
           ((uint64_t)splits * per_split > s->limits.max_alloc || base * splits > int_max / d.nt))
        splits = (splits + 1) / 2;
    d.splits = (int)splits;

    d.k = k;
    *FATTN_PLAN_AREA(plan, ocl_decode_plan) = d;
    plan->tiling.tile_q = d.br;
    plan->tiling.tile_kv = d.bkv;
    const size_t per_cu = s->limits.local_mem / plan_local_bytes(&d, p->dtype, paged);
    plan->tiling.concurrent_groups =
        (int64_t)s->limits.compute_units * (int64_t)(per_cu ? per_cu : 1);
    plan->tiling.workspace_bytes = (uint64_t)splits * per_split;
    return FATTN_OK;
}

fattn_status ocl_decode_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                               fattn_msg *msg) {
    return decode_accept(state, p, plan, 0, msg);
}

fattn_status ocl_decode_mma_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                   fattn_msg *msg) {
    return decode_accept(state, p, plan, 1, msg);
}

fattn_status ocl_decode_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg) {
    ocl_state *s = state;
    const ocl_decode_plan d = *FATTN_PLAN_AREA(plan, const ocl_decode_plan);
    cl_mem ws = ocl_mem_of(&p->workspace);
    if (!ws || p->workspace.offset != 0) /* the core binds whole buffers */
        return fattn_fail(msg, FATTN_ERR_INTERNAL,
                          "the decode plan needs a workspace buffer of its own (offset 0)");
    const int64_t rows = p->batch * p->heads_q * p->seq_q, D = p->head_dim, Dv = p->head_dim_v;
    const cl_long wl_off = (cl_long)(rows * d.splits * Dv); /* the lse parts follow the O parts */

    cl_kernel k = d.k;
    fattn_status st;
    const fattn_operand *ops[3] = {&p->q, &p->k, &p->v};
    cl_uint a = 0;
    for (int i = 0; i < 3; i++) {
        const cl_mem m = ocl_mem_of(ops[i]);
        const cl_long f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head,
                              ops[i]->stride_seq};
        OCL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int j = 0; j < 4; j++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof f[j], &f[j]));
    }
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof ws, &ws));
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof wl_off, &wl_off));
    const cl_int ints[6] = {
        (cl_int)p->heads_q, (cl_int)p->heads_kv, (cl_int)(p->heads_q / p->heads_kv),
        (cl_int)p->seq_q,   (cl_int)p->seq_kv,   (cl_int)D};
    for (int i = 0; i < 6; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof ints[i], &ints[i]));
    const cl_float scale = p->scale_log2; /* scale * log2(e): the kernel uses exp2 */
    const cl_int causal = p->causal;
    const cl_long causal_offset = ocl_causal_offset(p);
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof scale, &scale));
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof causal, &causal));
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof causal_offset, &causal_offset));
    const cl_int counts[3] = {d.splits, d.row_tiles, d.tiles};
    for (int i = 0; i < 3; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof counts[i], &counts[i]));
    if ((st = ocl_variant_args(k, &a, p, d.var, msg)) != FATTN_OK) return st;
    /* Ragged: seq_q and seq_kv are the longest sequences (the grid's and the
     * workspace's size); each group resolves its own (kernels_cl/ragged.cl),
     * and the combine's ragged build maps packed rows back (cu_seqlens_q). */
    if (p->rag.on && (st = ocl_ragged_args(s, k, &a, p, msg)) != FATTN_OK) return st;
    const size_t groups = (size_t)(p->batch * p->heads_kv * d.row_tiles * d.splits);
    const size_t global = groups * (size_t)d.nt, local = (size_t)d.nt;
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 1, NULL, &global, &local, 0, NULL, NULL));
    /* The combine reads what the split kernel wrote: in order on an in-order
     * queue; a caller's out-of-order queue gets a barrier between them. */
    cl_command_queue_properties props = 0;
    OCL_TRY(msg, clGetCommandQueueInfo(s->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL));
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        OCL_TRY(msg, clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL));

    /* The combine over the workspace: part p of row (b, h, i) at
     * ((b * Hq + h) * Sq + i) * splits + p, Dv floats of O (lse: one). It
     * keeps p->var: with sinks its build adds each row's sink once. */
    fattn_problem c = *p;
    c.op = FATTN_OP_COMBINE;
    c.head_dim = c.head_dim_v = Dv;
    c.parts = d.splits;
    c.part_dtype = FATTN_F32;
    const int64_t S = d.splits, Sq = p->seq_q, Hq = p->heads_q;
    c.part_o = (fattn_operand){p->workspace.mem, 0, Hq * Sq * S * Dv, Sq * S * Dv, S * Dv};
    c.part_lse = (fattn_operand){p->workspace.mem, wl_off, Hq * Sq * S, Sq * S, S};
    c.part_o_stride = Dv;
    c.part_lse_stride = 1;
    fattn_plan cp;
    memset(&cp, 0, sizeof cp);
    cp.op = FATTN_OP_COMBINE;
    if ((st = ocl_combine_accept(s, &c, &cp, msg)) != FATTN_OK) return st;
    return ocl_combine_run(s, &c, &cp, msg);
}
