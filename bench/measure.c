/* One benchmark measurement (measure.h). Inputs are random in [-1, 1] (never
 * zeros) and laid out BSHD; K and V dense, paged or packed as the shape says,
 * built through the public API; the float64 reference reads back the values
 * the device holds, through the same block table and offsets. */
#define _POSIX_C_SOURCE 200809L
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "half.h"

/* Inputs repeat every FILL_PERIOD elements (2^25: the papers' sweep's
 * largest tensor, 16384 tokens x 2048, is filled as before, with one random
 * stream per tensor), so that a decode cell of tens of GiB is filled at the
 * speed of a copy. The reference reads the device's values, so the check is
 * exact whatever they are. */
#define FILL_PERIOD ((size_t)1 << 25)
/* Keys per chunk the reference streams K and V in: at most this many, and
 * at most REF_CHUNK_BYTES of K (and of V) in one chunk. */
#define REF_CHUNK_KEYS 4096
#define REF_CHUNK_BYTES ((size_t)64 << 20)
/* Keys of the priming call (prime): enough for a split-KV decode plan to
 * split (the OpenCL planner splits from 512 keys on), so that its kernels
 * and the combine pass are built there, not in the cell's first call
 * (PoCL without kernel caches, --decode --quick d64: with 64 keys the first
 * cell's call took 2.5 s and the whole sweep was skipped; with 1024, none). */
#define PRIME_KEYS 1024
/* Above this many bytes of K and V read back for the sampled batches, the
 * check keeps only its first and last (batch, head) pairs (measure.h). At
 * 256 MiB a bf16 GQA 32/8 d128 decode cell keeps three sequences up to 32k
 * keys and two beyond. */
#define CHECK_KV_BYTES ((size_t)256 << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

const char *bench_dtype_name(fattn_dtype t) {
    return t == FATTN_F32 ? "f32" : t == FATTN_F16 ? "f16" : "bf16";
}

/* The dense description of a shape: seq_kv is the longest sequence; the
 * cell adds its varlen and paged descriptions (cell_alloc). */
static fattn_attention_desc desc_of(bench_shape sh, fattn_dtype t) {
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = sh.b;
    d.heads_q = sh.hq;
    d.heads_kv = sh.hkv;
    d.seq_q = sh.sq;
    d.seq_kv = sh.skv;
    d.head_dim = sh.d;
    d.dtype = t;
    d.causal = sh.causal == 2   ? FATTN_CAUSAL_TOP_LEFT
               : sh.causal != 0 ? FATTN_CAUSAL_BOTTOM_RIGHT
                                : FATTN_CAUSAL_NONE;
    return d;
}

double bench_flops(bench_shape sh) {
    if (!sh.lens) {
        const fattn_attention_desc d = desc_of(sh, FATTN_F32);
        return fattn_flops(&d);
    }
    double sum = 0.0; /* per sequence: its own keys and causal diagonal */
    for (int64_t i = 0; i < sh.b; i++) {
        bench_shape one = sh;
        one.b = 1, one.skv = sh.lens[i], one.lens = NULL;
        const fattn_attention_desc d = desc_of(one, FATTN_F32);
        sum += one.skv ? fattn_flops(&d) : 0.0;
    }
    return sum;
}

double bench_bytes(bench_shape sh, fattn_dtype t) {
    double keys = 0.0;
    for (int64_t i = 0; i < sh.b; i++) keys += (double)bench_len(sh, i);
    const double q = (double)sh.b * (double)sh.hq * (double)sh.sq * (double)sh.d,
                 kv = (double)sh.hkv * keys * (double)sh.d;
    return (2.0 * q + 2.0 * kv) * (double)fattn_dtype_size(t);
}

static float elem(const unsigned char *h, fattn_dtype t, size_t i) {
    if (t == FATTN_F32) {
        float x;
        memcpy(&x, h + 4 * i, 4);
        return x;
    }
    uint16_t b;
    memcpy(&b, h + 2 * i, 2);
    return t == FATTN_F16 ? fattn_f16_to_f32(b) : fattn_bf16_to_f32(b);
}

static void random_fill(unsigned char *h, fattn_dtype t, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float x = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        if (t == FATTN_F32)
            memcpy(h + i * 4, &x, 4);
        else {
            uint16_t b = t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
            memcpy(h + i * 2, &b, 2);
        }
    }
}

/* Fills the n elements of buf with random values repeating every
 * FILL_PERIOD elements. */
static fattn_status fill_buffer(fattn_buffer *buf, fattn_dtype t, size_t n, uint64_t seed) {
    const size_t es = fattn_dtype_size(t), period = n < FILL_PERIOD ? n : FILL_PERIOD;
    unsigned char *h = malloc(period * es);
    if (!h) return FATTN_ERR_OUT_OF_MEMORY;
    random_fill(h, t, period, seed);
    fattn_status st = FATTN_OK;
    for (size_t at = 0; at < n && st == FATTN_OK; at += period) {
        const size_t k = n - at < period ? n - at : period;
        st = fattn_buffer_write(buf, at * es, h, k * es);
    }
    free(h);
    return st;
}

typedef fattn_status (*forward_fn)(fattn_context *, const fattn_attention_desc *,
                                   const fattn_tensor *, const fattn_tensor *, const fattn_tensor *,
                                   const fattn_tensor *, const fattn_tensor *);

/* Median milliseconds of o->iters calls after o->warmup, on the device's own
 * clock where the backend has one (CUDA events, OpenCL profiling), else on
 * the host around a synchronised call. A device clock that fails mid-run
 * (a driver without usable profiling times) falls back to the host's, said
 * once on stderr.
 * With o->budget_s (measure.h): after the first call, (warmup + iters) x its
 * wall time is the estimate; over the budget, the run stops there (*over =
 * 1, *stop_s = the call's seconds, OK returned), unless that call took at
 * most half the budget: then a second call is timed and the faster of the
 * two decides. Calls after the second are never cut short. */
static fattn_status median_ms(fattn_context *ctx, forward_fn f, const fattn_attention_desc *d,
                              const fattn_tensor *x, const bench_opts *o, double *out,
                              const char **clock, int *over, double *stop_s) {
    double *host = calloc((size_t)o->iters, sizeof *host),
           *dev = calloc((size_t)o->iters, sizeof *dev);
    fattn_timer *timer = NULL;
    if (fattn_timer_create(ctx, &timer) != FATTN_OK) timer = NULL;
    int use_dev = fattn_timer_is_device_clock(timer);
    fattn_status st = host && dev ? FATTN_OK : FATTN_ERR_OUT_OF_MEMORY;
    const int calls = o->warmup + o->iters;
    double fastest_s = 0.0;
    *over = 0;
    for (int i = -o->warmup, done = 0; i < o->iters && st == FATTN_OK; i++) {
        double t0 = now(), dev_ms = 0.0;
        if (timer) st = fattn_timer_start(timer);
        if (st == FATTN_OK) st = f(ctx, d, &x[0], &x[1], &x[2], &x[3], NULL);
        if (st == FATTN_OK && timer) st = fattn_timer_stop(timer);
        if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
        const double host_ms = (now() - t0) * 1e3;
        if (st == FATTN_OK && use_dev && fattn_timer_elapsed_ms(timer, &dev_ms) != FATTN_OK) {
            static int told;
            if (!told++)
                fprintf(stderr, "fattn_bench: device clock failed (%s); timing on the host\n",
                        fattn_error_message(ctx));
            use_dev = 0;
        }
        if (i >= 0) host[i] = host_ms, dev[i] = dev_ms;
        if (st != FATTN_OK) break;
        if (++done == 1 || host_ms * 1e-3 < fastest_s) fastest_s = host_ms * 1e-3;
        if (o->budget_s > 0 && done <= 2 && done < calls && fastest_s * calls > o->budget_s) {
            if (done == 1 && fastest_s <= o->budget_s / 2) continue; /* time a second call */
            *over = 1, *stop_s = fastest_s;
            break;
        }
    }
    fattn_timer_free(timer);
    *clock = use_dev ? "device" : "host";
    if (st == FATTN_OK && !*over) {
        double *ms = use_dev ? dev : host;
        qsort(ms, (size_t)o->iters, sizeof *ms, cmp_double);
        *out = ms[o->iters / 2];
    }
    free(host);
    free(dev);
    return st;
}

/* Device memory one call holds while it runs: the reading right after the
 * (asynchronous) call returns, before synchronising, minus the one before it.
 * -1 where the backend cannot measure; about 0 on synchronous backends (the
 * CPU), which free before returning. */
static int64_t grown(fattn_context *ctx, forward_fn f, const fattn_attention_desc *d,
                     const fattn_tensor *x) {
    uint64_t used0, used1, total;
    fattn_status st = fattn_context_synchronize(ctx);
    if (st == FATTN_OK) st = fattn_context_device_memory(ctx, &used0, &total);
    if (st == FATTN_OK) st = f(ctx, d, &x[0], &x[1], &x[2], &x[3], NULL);
    if (st == FATTN_OK) st = fattn_context_device_memory(ctx, &used1, &total);
    fattn_context_synchronize(ctx);
    return st != FATTN_OK ? -1 : used1 > used0 ? (int64_t)(used1 - used0) : 0;
}

/* ---- The cell: buffers, tensors, index tables, descriptions -------------- */

enum { CQ, CK, CV, CO, CIDX, CSLOPES, CSINKS, CBIAS, CBUFS };

/* A cell's problem as the library sees it (measure.h's K/V storage). The
 * index tables (cu_seqlens_q [b+1], cu_seqlens_kv [b+1], seqused_kv [b],
 * block table [b][pps]) lie in one int32 buffer, at at_* (-1: not passed),
 * with a host copy in idx that the reference reads. The struct points into
 * itself (d.varlen, d.paged_kv): it stays where it was planned. */
typedef struct cell {
    bench_shape sh;
    fattn_dtype t;
    int ragged;
    int64_t pps, num_pages, total_q, total_kv;
    size_t n[4]; /* elements of Q, K, V, O */
    int32_t *idx;
    int64_t nidx, at_cu_q, at_cu_kv, at_used, at_table;
    fattn_buffer *buf[CBUFS], *ws;
    fattn_tensor x[4], cu_q, cu_kv, used, table;
    fattn_varlen_desc vl;
    fattn_paged_kv_desc pg;
    fattn_tensor slopes, sinks, bias; /* --variant */
    fattn_mask_desc mask;
    fattn_attention_desc d;
} cell;

/* Lays out the cell on the host: sizes, tables (the block table a seeded
 * shuffle of the pages), descriptions without buffers. 0 with *why when the
 * shape cannot be stored (int32 tables, sizes past 2^62 bytes). */
static int cell_plan(cell *c, bench_shape sh, fattn_dtype t, unsigned flags, char *why,
                     size_t len) {
    memset(c, 0, sizeof *c);
    c->sh = sh, c->t = t;
    c->d = desc_of(sh, t);
    c->d.flags = flags;
    c->ragged = !bench_is_dense(sh);
    c->at_cu_q = c->at_cu_kv = c->at_used = c->at_table = -1;
    const int64_t B = sh.b;
    double keys = 0.0, pages = 0.0;
    for (int64_t i = 0; i < B; i++) {
        keys += (double)bench_len(sh, i);
        if (sh.page) pages += (double)((bench_len(sh, i) + sh.page - 1) / sh.page);
    }
    c->total_q = B * sh.sq;
    c->total_kv = (int64_t)keys;
    c->pps = sh.page ? (sh.skv + sh.page - 1) / sh.page : 0;
    c->num_pages = pages > 0 ? (int64_t)pages : 1;
    const double kv_elems = (double)sh.hkv * (double)sh.d *
                            (sh.page     ? (double)c->num_pages * (double)sh.page
                             : sh.packed ? keys
                                         : (double)B * (double)sh.skv),
                 q_elems = (double)B * (double)sh.hq * (double)sh.sq * (double)sh.d;
    if (kv_elems * 4 > 0x1p62 || q_elems * 4 > 0x1p62) {
        snprintf(why, len, "Q or K/V would pass 2^62 bytes");
        return 0;
    }
    if (c->ragged && ((double)c->total_q > INT32_MAX || keys > INT32_MAX ||
                      (double)c->pps * (double)B > INT32_MAX || pages > INT32_MAX)) {
        snprintf(why, len, "the int32 index tables cannot hold this shape's offsets or pages");
        return 0;
    }
    c->n[CQ] = c->n[CO] = (size_t)q_elems;
    c->n[CK] = c->n[CV] = (size_t)kv_elems;
    if (!c->ragged) return 1;
    if (sh.packed) {
        c->at_cu_q = 0, c->at_cu_kv = B + 1, c->nidx = 2 * (B + 1);
    } else {
        c->at_used = 0, c->nidx = B;
        if (sh.page) c->at_table = B, c->nidx += B * c->pps;
    }
    c->idx = calloc((size_t)c->nidx, sizeof *c->idx);
    int32_t *perm = sh.page ? malloc((size_t)c->num_pages * sizeof *perm) : NULL;
    if (!c->idx || (sh.page && !perm)) {
        free(perm);
        snprintf(why, len, "out of host memory for the index tables");
        return 0;
    }
    int64_t at = 0;
    for (int64_t i = 0; i < B; i++) {
        if (c->at_cu_q >= 0) c->idx[c->at_cu_q + i + 1] = (int32_t)((i + 1) * sh.sq);
        if (c->at_cu_kv >= 0) c->idx[c->at_cu_kv + i + 1] = (int32_t)(at += bench_len(sh, i));
        if (c->at_used >= 0) c->idx[c->at_used + i] = (int32_t)bench_len(sh, i);
    }
    if (sh.page) {
        /* Pages in a shuffled order, so a sequence's pages are not adjacent
         * in memory; table entries past a sequence's last used page are 0. */
        uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)sh.page;
        for (int64_t p = 0; p < c->num_pages; p++) perm[p] = (int32_t)p;
        for (int64_t p = c->num_pages - 1; p > 0; p--) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const int64_t q = (int64_t)((seed >> 33) % (uint64_t)(p + 1));
            const int32_t tmp = perm[p];
            perm[p] = perm[q], perm[q] = tmp;
        }
        int64_t k = 0;
        for (int64_t i = 0; i < B; i++)
            for (int64_t p = 0; p * sh.page < bench_len(sh, i); p++)
                c->idx[c->at_table + i * c->pps + p] = perm[k++];
        free(perm);
    }
    return 1;
}

/* Bytes the cell allocates on the device: Q, K, V, O and the tables. */
static double cell_bytes(const cell *c) {
    double n = 0.0;
    for (int i = 0; i < 4; i++) n += (double)c->n[i];
    return n * (double)fattn_dtype_size(c->t) + 4.0 * (double)c->nidx;
}

/* The index tables' buffer and tensors, and the descriptions that point to
 * them (no data yet: enough for fattn_workspace_size). */
static fattn_status cell_tables(fattn_context *ctx, cell *c) {
    const bench_shape sh = c->sh;
    fattn_status st = FATTN_OK;
    if (!c->ragged) return FATTN_OK;
    if ((st = fattn_buffer_alloc(ctx, (size_t)c->nidx * 4, &c->buf[CIDX])) ||
        (st = fattn_buffer_write(c->buf[CIDX], 0, c->idx, (size_t)c->nidx * 4)))
        return st;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    if (sh.packed) {
        if ((st = fattn_tensor_init_index(c->buf[CIDX], 1, sh.b + 1, c->at_cu_q, &c->cu_q)) ||
            (st = fattn_tensor_init_index(c->buf[CIDX], 1, sh.b + 1, c->at_cu_kv, &c->cu_kv)))
            return st;
        vl.cu_seqlens_q = &c->cu_q, vl.cu_seqlens_kv = &c->cu_kv;
        vl.total_q = c->total_q, vl.total_kv = c->total_kv;
    } else {
        if ((st = fattn_tensor_init_index(c->buf[CIDX], 1, sh.b, c->at_used, &c->used))) return st;
        vl.seqused_kv = &c->used;
    }
    if (sh.page) {
        if ((st = fattn_tensor_init_index(c->buf[CIDX], sh.b, c->pps, c->at_table, &c->table)))
            return st;
        pg.block_table = &c->table, pg.pages_per_seq = c->pps;
        pg.page_size = sh.page, pg.num_pages = c->num_pages;
        c->pg = pg;
        c->d.paged_kv = &c->pg;
    }
    c->vl = vl;
    c->d.varlen = &c->vl;
    return FATTN_OK;
}

/* Q, K, V and O: allocated, Q, K and V filled, and their tensors. *no_room
 * when an allocation found no memory. */
static fattn_status cell_data(fattn_context *ctx, cell *c, int *no_room) {
    const bench_shape sh = c->sh;
    const int64_t qb = sh.packed ? 1 : sh.b, qs = sh.packed ? c->total_q : sh.sq;
    const int64_t kb = sh.page ? c->num_pages : sh.packed ? 1 : sh.b;
    const int64_t ks = sh.page ? sh.page : sh.packed ? c->total_kv : sh.skv;
    const size_t es = fattn_dtype_size(c->t);
    fattn_status st = FATTN_OK;
    *no_room = 0;
    for (int i = 0; i < 4 && st == FATTN_OK; i++) {
        const int kv = i == CK || i == CV;
        /* An empty packed K/V (every sequence 0 keys) still gets an element. */
        st = fattn_buffer_alloc(ctx, (c->n[i] ? c->n[i] : 1) * es, &c->buf[i]);
        *no_room = st == FATTN_ERR_OUT_OF_MEMORY;
        if (st == FATTN_OK && i < CO && c->n[i])
            st = fill_buffer(c->buf[i], c->t, c->n[i], 1234 + (uint64_t)i);
        if (st == FATTN_OK)
            st = fattn_tensor_init(
                c->buf[i], c->t,
                sh.bhsd && bench_is_dense(sh) ? FATTN_LAYOUT_BHSD : FATTN_LAYOUT_BSHD, kv ? kb : qb,
                kv ? sh.hkv : sh.hq, kv ? (ks ? ks : 1) : qs, sh.d, 0, &c->x[i]);
    }
    return st;
}

static void cell_free(cell *c) {
    for (int i = 0; i < CBUFS; i++) fattn_buffer_free(c->buf[i]);
    fattn_buffer_free(c->ws);
    free(c->idx);
    memset(c, 0, sizeof *c);
}

/* Element offset of key j of sequence b, key/value head 0, in K (and V); *run
 * is how many keys from j on lie one after the other (to the page's end). */
static size_t key_at(const cell *c, int64_t b, int64_t j, int64_t *run) {
    const bench_shape sh = c->sh;
    const size_t row = (size_t)(sh.hkv * sh.d);
    if (sh.page) {
        *run = sh.page - j % sh.page;
        const int64_t page = c->idx[c->at_table + b * c->pps + j / sh.page];
        return (size_t)(page * sh.page + j % sh.page) * row;
    }
    *run = INT64_MAX;
    if (sh.packed) return (size_t)(c->idx[c->at_cu_kv + b] + j) * row;
    return (size_t)(b * sh.skv + j) * row;
}

/* ---- The float64 reference ------------------------------------------------ */

/* One sampled query row of the reference: its place, the keys it sees, its
 * query, and the running float64 online softmax over the keys read so far. */
typedef struct ref_row {
    int64_t b, h, i, lim;
    double *q, *acc, *s; /* head_dim, head_dim, REF_CHUNK_KEYS */
    double m, l;
} ref_row;

/* The keys row i of a sequence with `len` keys sees: all of them, or up to
 * the causal diagonal (bottom-right: i + len - sq; top-left: i). */
static int64_t visible(bench_shape sh, int64_t len, int64_t i) {
    if (!sh.causal) return len;
    const int64_t lim = i + 1 + (sh.causal == 2 ? 0 : len - sh.sq);
    return lim < 0 ? 0 : lim > len ? len : lim;
}

/* Max |O - reference| over about `rows` distinct rows: up to four (batch,
 * query head) pairs (first, last, middle, first batch's last head; the first
 * two only where the others' K/V would pass CHECK_KV_BYTES), and rows spread
 * over each pair's query sequence (first and last included). Q, K, V and O
 * are read back from the device: Q and O by row, K and V in chunks of up to
 * REF_CHUNK_KEYS keys of one sequence (within a page, for a paged cache:
 * found through the cell's block table, as packed keys through its
 * offsets), shared by the sampled rows of that sequence; the reference
 * accumulates in float64 with the online softmax. A row that sees no key
 * must be 0. -1 when nothing was checked; *st a failed read. */
static double sampled_error(const cell *c, int rows, int *checked, fattn_status *st) {
    const bench_shape sh = c->sh;
    const fattn_dtype t = c->t;
    fattn_buffer *const *buf = c->buf;
    const int64_t Hq = sh.hq, Hkv = sh.hkv, Sq = sh.sq, D = sh.d;
    const int64_t group = Hq / Hkv;
    const size_t es = fattn_dtype_size(t);
    const double scale = 1.0 / sqrt((double)D);
    const int64_t pairs[4][2] = {{0, 0}, {sh.b - 1, Hq - 1}, {sh.b / 2, Hq / 2}, {0, Hq - 1}};
    int npairs = 4;
    {
        double kv = 0.0; /* bytes of K and V the four pairs' sequences read back */
        for (int pi = 0; pi < 4; pi++) {
            int seen = 0;
            for (int pj = 0; pj < pi; pj++) seen |= pairs[pj][0] == pairs[pi][0];
            if (!seen)
                kv += 2.0 * (double)bench_len(sh, pairs[pi][0]) * (double)(Hkv * D) * (double)es;
        }
        if (kv > (double)CHECK_KV_BYTES) npairs = 2;
    }
    int per = rows / 4 > 1 ? rows / 4 : 2;
    if ((int64_t)per > Sq) per = (int)Sq;
    ref_row *rr = calloc((size_t)(4 * per), sizeof *rr);
    const size_t key_bytes = (size_t)(Hkv * D) * es;
    int64_t chunk = (int64_t)(REF_CHUNK_BYTES / key_bytes);
    chunk = chunk < 1 ? 1 : chunk > REF_CHUNK_KEYS ? REF_CHUNK_KEYS : chunk;
    const size_t chunk_elems = (size_t)chunk * (size_t)(Hkv * D);
    unsigned char *row = malloc((size_t)D * es), *kc = malloc(chunk_elems * es),
                  *vc = malloc(chunk_elems * es);
    double worst = 0.0;
    int n = 0;
    *checked = 0;
    *st = rr && row && kc && vc ? FATTN_OK : FATTN_ERR_OUT_OF_MEMORY;
    for (int pi = 0; *st == FATTN_OK && pi < npairs; pi++) {
        int seen = 0;
        for (int pj = 0; pj < pi; pj++)
            seen |= pairs[pj][0] == pairs[pi][0] && pairs[pj][1] == pairs[pi][1];
        for (int k = 0; !seen && k < per && *st == FATTN_OK; k++) {
            ref_row *r = &rr[n++];
            r->b = pairs[pi][0], r->h = pairs[pi][1];
            r->i = per > 1 ? k * (Sq - 1) / (per - 1) : 0;
            r->lim = visible(sh, bench_len(sh, r->b), r->i);
            r->m = -INFINITY;
            r->q = calloc((size_t)D, sizeof *r->q);
            r->acc = calloc((size_t)D, sizeof *r->acc);
            r->s = calloc(REF_CHUNK_KEYS, sizeof *r->s);
            if (!r->q || !r->acc || !r->s) {
                *st = FATTN_ERR_OUT_OF_MEMORY;
                break;
            }
            /* Packed Q rows start at cu_seqlens_q[b] = b * seq_q: the dense place. */
            const size_t qrow = (size_t)(((r->b * Sq + r->i) * Hq + r->h) * D);
            *st = fattn_buffer_read(buf[CQ], qrow * es, row, (size_t)D * es);
            for (int64_t e = 0; e < D; e++) r->q[e] = (double)elem(row, t, (size_t)e);
        }
    }
    /* Each sequence's K and V once, in chunks, for all of its sampled rows. */
    for (int a = 0; a < n && *st == FATTN_OK; a++) {
        int first = 1;
        for (int z = 0; z < a; z++) first &= rr[z].b != rr[a].b;
        if (!first) continue;
        const int64_t b = rr[a].b;
        int64_t keys = 0, nk;
        for (int z = a; z < n; z++)
            if (rr[z].b == b && rr[z].lim > keys) keys = rr[z].lim;
        for (int64_t j0 = 0; j0 < keys && *st == FATTN_OK; j0 += nk) {
            int64_t run;
            const size_t at = key_at(c, b, j0, &run) * es;
            nk = keys - j0 < chunk ? keys - j0 : chunk;
            nk = nk < run ? nk : run;
            const size_t len = (size_t)(nk * Hkv * D) * es;
            *st = fattn_buffer_read(buf[CK], at, kc, len);
            if (*st == FATTN_OK) *st = fattn_buffer_read(buf[CV], at, vc, len);
            for (int z = a; z < n && *st == FATTN_OK; z++) {
                ref_row *r = &rr[z];
                if (r->b != b || r->lim <= j0) continue;
                const int64_t kh = r->h / group, m = r->lim - j0 < nk ? r->lim - j0 : nk;
                double mc = r->m;
                for (int64_t j = 0; j < m; j++) {
                    const size_t krow = (size_t)((j * Hkv + kh) * D);
                    double s = 0.0;
                    for (int64_t e = 0; e < D; e++)
                        s += r->q[e] * (double)elem(kc, t, krow + (size_t)e);
                    r->s[j] = s * scale;
                    if (r->s[j] > mc) mc = r->s[j];
                }
                const double rescale = r->m == -INFINITY ? 0.0 : exp(r->m - mc);
                r->l *= rescale;
                for (int64_t e = 0; e < D; e++) r->acc[e] *= rescale;
                r->m = mc;
                for (int64_t j = 0; j < m; j++) {
                    const double w = exp(r->s[j] - mc);
                    const size_t vrow = (size_t)((j * Hkv + kh) * D);
                    r->l += w;
                    for (int64_t e = 0; e < D; e++)
                        r->acc[e] += w * (double)elem(vc, t, vrow + (size_t)e);
                }
            }
        }
    }
    for (int z = 0; z < n && *st == FATTN_OK; z++) {
        const ref_row *r = &rr[z];
        const size_t orow = (size_t)(((r->b * Sq + r->i) * Hq + r->h) * D);
        *st = fattn_buffer_read(buf[CO], orow * es, row, (size_t)D * es);
        for (int64_t e = 0; *st == FATTN_OK && e < D; e++) {
            const double ref = r->l > 0 ? r->acc[e] / r->l : 0.0;
            const double err = fabs((double)elem(row, t, (size_t)e) - ref);
            if (!(err <= worst)) worst = err; /* NaN wins */
        }
        *checked += *st == FATTN_OK;
    }
    for (int z = 0; rr && z < n; z++) {
        free(rr[z].q);
        free(rr[z].acc);
        free(rr[z].s);
    }
    free(rr);
    free(row);
    free(kc);
    free(vc);
    return *checked ? worst : -1.0;
}

/* ---- One measurement --------------------------------------------------------- */

static void fail(fattn_context *ctx, bench_result *r, const char *what) {
    snprintf(r->status, sizeof r->status, "error");
    snprintf(r->note, sizeof r->note, "%s: %s", what, fattn_error_message(ctx));
}

/* A failed call: "unsupported" with the backend's message where a paged or
 * variable-length cell is answered FATTN_ERR_UNSUPPORTED (the backend lacks
 * the feature: not a failure of the run), else an error. */
static void fail_call(fattn_context *ctx, bench_result *r, const char *what, fattn_status st) {
    if (st == FATTN_ERR_UNSUPPORTED && !bench_is_dense(r->shape)) {
        snprintf(r->status, sizeof r->status, "unsupported");
        snprintf(r->note, sizeof r->note, "%s", fattn_error_message(ctx));
    } else {
        fail(ctx, r, what);
    }
}

static void human_bytes(char *buf, size_t len, double bytes) {
    if (bytes >= 1099511627776.0)
        snprintf(buf, len, "%.1f TiB", bytes / 1099511627776.0);
    else if (bytes >= 1073741824.0)
        snprintf(buf, len, "%.1f GiB", bytes / 1073741824.0);
    else
        snprintf(buf, len, "%.1f MiB", bytes / 1048576.0);
}

/* One untimed call on a small problem of the cell's kind: its dtype, head
 * dim, GQA group, mask and K/V storage (batch 1, one key/value head and its
 * query heads, seq_q up to 64, seq_kv up to 64 or, where it passes seq_q,
 * up to PRIME_KEYS, pages of the cell's size), so that kernel builds and
 * other first-use costs are not counted in the call the budget's estimate
 * is taken from. Its buffers are its own (under a MiB). Its failure is left
 * to the real call to report. */
static void prime(fattn_context *ctx, forward_fn f, const cell *c) {
    const bench_shape sh = c->sh;
    bench_shape small = sh;
    /* Keys as the cell has them: up to PRIME_KEYS for a cache longer than
     * the queries (decoding), as many as the queries (up to 64) otherwise. */
    const int64_t keys = sh.skv > sh.sq ? PRIME_KEYS : 64;
    int64_t len = sh.skv < keys ? sh.skv : keys;
    char why[128];
    cell pc;
    int no_room;
    small.b = 1, small.hq = sh.hq / sh.hkv, small.hkv = 1;
    small.sq = sh.sq < 64 ? sh.sq : 64, small.skv = len;
    small.lens = sh.lens ? &len : NULL;
    if (cell_plan(&pc, small, c->t, c->d.flags, why, sizeof why) &&
        cell_tables(ctx, &pc) == FATTN_OK &&
        cell_data(ctx, &pc, &no_room) == FATTN_OK &&
        f(ctx, &pc.d, &pc.x[CQ], &pc.x[CK], &pc.x[CV], &pc.x[CO], NULL) == FATTN_OK)
        fattn_context_synchronize(ctx);
    cell_free(&pc);
}

/* The reason for a path stopped over the budget by its own call. */
static void over_note(char *buf, size_t len, const char *prefix, const bench_opts *o,
                      double call_s) {
    const int calls = o->warmup + o->iters;
    snprintf(buf, len, "%sone call took %.3g s: %d calls estimated %.3g s, over --budget %g s",
             prefix, call_s, calls, call_s * calls, o->budget_s);
}

/* The naive baseline, where the backend has one and S and P fit the device. */
static void measure_naive(fattn_context *ctx, const bench_opts *o, const cell *c, bench_result *r) {
    uint64_t used, total;
    if (fattn_context_device_memory(ctx, &used, &total) == FATTN_OK && r->naive_bytes > total) {
        char need[32], have[32];
        human_bytes(need, sizeof need, (double)r->naive_bytes);
        human_bytes(have, sizeof have, (double)total);
        snprintf(r->naive_note, sizeof r->naive_note,
                 "impossible: S and P need %s, the device has %s", need, have);
        return;
    }
    const char *clock;
    int over;
    double stop_s = 0.0;
    if (o->budget_s > 0) prime(ctx, fattn_forward_naive, c);
    const fattn_status st =
        median_ms(ctx, fattn_forward_naive, &c->d, c->x, o, &r->naive_ms, &clock, &over, &stop_s);
    if (st == FATTN_ERR_UNSUPPORTED && c->ragged) {
        snprintf(r->naive_note, sizeof r->naive_note, "unsupported: %s", fattn_error_message(ctx));
        return;
    }
    if (st != FATTN_OK) {
        char need[32];
        human_bytes(need, sizeof need, (double)r->naive_bytes);
        snprintf(r->naive_note, sizeof r->naive_note, "failed (S and P need %s): %s", need,
                 fattn_error_message(ctx));
        return;
    }
    if (over) {
        r->naive_call_s = stop_s;
        over_note(r->naive_note, sizeof r->naive_note, "skipped: ", o, stop_s);
        return;
    }
    r->naive_ok = 1;
    r->naive_call_s = r->naive_ms * 1e-3;
    r->naive_tflops = bench_flops(r->shape) / (r->naive_ms * 1e-3) / 1e12;
    r->naive_measured = grown(ctx, fattn_forward_naive, &c->d, c->x);
}

/* Whether the cell's buffers (`need` bytes) fit the device's free memory with
 * a tenth to spare: measured where the backend can (CUDA, the CPU, AMD
 * OpenCL), else the host's free RAM where the device's memory is the host's;
 * else unknown (1: the allocation decides). *why says so when not. */
static int inputs_fit(fattn_context *ctx, const bench_opts *o, double need, char *why, size_t len) {
    uint64_t used, total;
    double free_b = -1.0;
    const char *whose = "the device has";
    if (fattn_context_device_memory(ctx, &used, &total) == FATTN_OK)
        free_b = total > used ? (double)(total - used) : 0.0;
    else if (o->host_memory) {
        const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) free_b = (double)pages * (double)page;
        whose = "the host (the device's memory) has";
    }
    if (free_b < 0 || need <= 0.9 * free_b) return 1;
    char n[32], f[32];
    human_bytes(n, sizeof n, need);
    human_bytes(f, sizeof f, free_b);
    snprintf(why, len, "no room: Q, K, V and O need %s, %s %s free", n, whose, f);
    return 0;
}

/* A float32 or dtype buffer of n elements, every one x. */
static fattn_status filled(fattn_context *ctx, fattn_dtype t, size_t n, float x,
                           fattn_buffer **out) {
    const size_t es = fattn_dtype_size(t);
    unsigned char *h = malloc(n * es);
    if (!h) return FATTN_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        if (t == FATTN_F32)
            memcpy(h + i * 4, &x, 4);
        else
            ((uint16_t *)(void *)h)[i] =
                t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
    }
    fattn_status st = fattn_buffer_alloc(ctx, n * es, out);
    if (st == FATTN_OK) st = fattn_buffer_write(*out, 0, h, n * es);
    free(h);
    return st;
}

/* --variant: the mask and its tensors on c (slopes 1/16, sinks 0, a bias of
 * 0: values do not change the time). */
static fattn_status cell_variant(fattn_context *ctx, const bench_opts *o, cell *c) {
    const fattn_mask_desc m0 = FATTN_MASK_DESC_INIT;
    const fattn_tensor t0 = FATTN_TENSOR_INIT;
    const bench_shape sh = c->sh;
    fattn_status st = FATTN_OK;
    c->mask = m0;
    c->mask.window_left = o->variant.window_left;
    c->mask.window_right = o->variant.window_right;
    c->mask.softcap = o->variant.softcap;
    if (o->variant.alibi &&
        !(st = filled(ctx, FATTN_F32, (size_t)sh.hq, 0.0625f, &c->buf[CSLOPES]))) {
        c->slopes = t0, c->slopes.buffer = c->buf[CSLOPES], c->slopes.stride_head = 1;
        c->mask.alibi_slopes = &c->slopes;
    }
    if (!st && o->variant.sinks &&
        !(st = filled(ctx, FATTN_F32, (size_t)sh.hq, 0.0f, &c->buf[CSINKS]))) {
        c->sinks = t0, c->sinks.buffer = c->buf[CSINKS], c->sinks.stride_head = 1;
        c->mask.sinks = &c->sinks;
    }
    /* bias 1: one [seq_q, seq_kv] plane (batch and head stride 0); 2: a
     * bias per key, [batch, 1, 1, seq_kv] (head and row stride 0). */
    const int keys = o->variant.bias == 2;
    if (!st && o->variant.bias &&
        !(st = filled(ctx, c->t, (size_t)((keys ? sh.b : sh.sq) * sh.skv), 0.0f,
                      &c->buf[CBIAS]))) {
        c->bias = t0, c->bias.buffer = c->buf[CBIAS], c->bias.dtype = c->t;
        c->bias.stride_dim = 1;
        if (keys)
            c->bias.stride_batch = sh.skv;
        else
            c->bias.stride_seq = sh.skv;
        c->mask.bias = &c->bias;
    }
    c->d.mask = &c->mask;
    return st;
}

void bench_measure(fattn_context *ctx, const bench_opts *o, bench_result *r) {
    if (o->bhsd && bench_is_dense(r->shape)) r->shape.bhsd = 1;
    const bench_shape sh = r->shape;
    const fattn_dtype t = r->dtype;
    snprintf(r->status, sizeof r->status, "ok");
    r->clock = "host";
    r->max_err = -1.0;
    r->flash_measured = r->naive_measured = -1;
    cell c;
    char why[256];
    const unsigned flags = (o->tf32 && t == FATTN_F32 ? FATTN_FLAG_ALLOW_TF32 : 0) |
                           (o->fast_softcap ? FATTN_FLAG_FAST_SOFTCAP : 0);
    if (!cell_plan(&c, sh, t, flags, why, sizeof why)) {
        snprintf(r->status, sizeof r->status, "error");
        snprintf(r->note, sizeof r->note, "shape: %s", why);
        cell_free(&c);
        return;
    }
    /* The accounting counts the dense problem (seq_kv the longest sequence). */
    fattn_attention_desc dense = desc_of(sh, t);
    dense.flags = flags;
    fattn_memory_report mem = FATTN_MEMORY_REPORT_INIT;
    if (fattn_context_memory_report(ctx, &dense, &mem) == FATTN_OK) {
        r->flash_bytes = mem.flash_bytes;
        r->naive_bytes = mem.naive_bytes;
        snprintf(r->kernel, sizeof r->kernel, "%s", mem.kernel);
    }
    if (!inputs_fit(ctx, o, cell_bytes(&c), r->note, sizeof r->note)) {
        snprintf(r->status, sizeof r->status, "skipped");
        cell_free(&c);
        return;
    }
    /* The tables and the workspace first: a backend without paged or
     * variable-length support says so here, before gigabytes are uploaded.
     * The workspace is the caller's (desc->workspace), so the timed calls
     * allocate nothing. */
    int no_room = 0;
    uint64_t ws = 0;
    fattn_status st = cell_tables(ctx, &c);
    if (st != FATTN_OK) {
        fail(ctx, r, "index tables");
        cell_free(&c);
        return;
    }
    if (o->variant.on && (st = cell_variant(ctx, o, &c)) != FATTN_OK) {
        fail(ctx, r, "--variant's tensors");
        cell_free(&c);
        return;
    }
    if ((st = fattn_workspace_size(ctx, &c.d, &ws)) != FATTN_OK) {
        fail_call(ctx, r, "workspace size", st);
        cell_free(&c);
        return;
    }
    if (ws > 0 && (st = fattn_buffer_alloc(ctx, (size_t)ws, &c.ws)) == FATTN_OK)
        c.d.workspace = c.ws;
    no_room = st == FATTN_ERR_OUT_OF_MEMORY;
    r->workspace_bytes = ws;
    if (st == FATTN_OK) st = cell_data(ctx, &c, &no_room);
    int over = 0;
    double stop_s = 0.0;
    if (st == FATTN_OK && o->budget_s > 0) prime(ctx, fattn_forward, &c);
    if (no_room) {
        snprintf(r->status, sizeof r->status, "skipped");
        snprintf(r->note, sizeof r->note, "no room: %s", fattn_error_message(ctx));
    } else if (st != FATTN_OK)
        fail(ctx, r, "inputs");
    else if ((st = median_ms(ctx, fattn_forward, &c.d, c.x, o, &r->ms, &r->clock, &over,
                             &stop_s)) != FATTN_OK)
        fail_call(ctx, r, "forward", st);
    else if (over) {
        snprintf(r->status, sizeof r->status, "skipped");
        over_note(r->note, sizeof r->note, "", o, stop_s);
        r->call_s = stop_s;
    } else {
        r->call_s = r->ms * 1e-3;
        r->tflops = bench_flops(sh) / (r->ms * 1e-3) / 1e12;
        r->gbps = bench_bytes(sh, t) / (r->ms * 1e-3) / 1e9;
        r->flash_measured = grown(ctx, fattn_forward, &c.d, c.x);
        if (o->check_rows > 0) {
            fattn_status rst;
            r->max_err = sampled_error(&c, o->check_rows, &r->err_rows, &rst);
            if (rst == FATTN_ERR_OUT_OF_MEMORY && !*fattn_error_message(ctx)) {
                snprintf(r->status, sizeof r->status, "error");
                snprintf(r->note, sizeof r->note, "check: out of host memory");
            } else if (rst != FATTN_OK)
                fail(ctx, r, "reading back for the check");
        }
        if (o->naive)
            measure_naive(ctx, o, &c, r);
        else
            snprintf(r->naive_note, sizeof r->naive_note, "not asked (--no-naive, or --decode)");
    }
    cell_free(&c);
}
