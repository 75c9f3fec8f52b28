/* One benchmark measurement (measure.h). Inputs are random in [-1, 1] (never
 * zeros) and laid out BSHD; the float64 reference reads back the values the
 * device holds. */
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
    const fattn_attention_desc d = desc_of(sh, FATTN_F32);
    return fattn_flops(&d);
}

double bench_bytes(bench_shape sh, fattn_dtype t) {
    const double q = (double)sh.b * (double)sh.hq * (double)sh.sq * (double)sh.d,
                 kv = (double)sh.b * (double)sh.hkv * (double)sh.skv * (double)sh.d;
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

/* One sampled query row of the reference: its place, the keys it sees, its
 * query, and the running float64 online softmax over the keys read so far. */
typedef struct ref_row {
    int64_t b, h, i, lim;
    double *q, *acc, *s; /* head_dim, head_dim, REF_CHUNK_KEYS */
    double m, l;
} ref_row;

/* The keys row i sees: all of them, or up to the causal diagonal
 * (bottom-right: i + skv - sq; top-left: i). */
static int64_t visible(bench_shape sh, int64_t i) {
    if (!sh.causal) return sh.skv;
    const int64_t lim = i + 1 + (sh.causal == 2 ? 0 : sh.skv - sh.sq);
    return lim < 0 ? 0 : lim > sh.skv ? sh.skv : lim;
}

/* Max |O - reference| over about `rows` distinct rows: up to four (batch,
 * query head) pairs (first, last, middle, first batch's last head), and rows
 * spread over each pair's query sequence (first and last included). Q, K, V
 * and O are read back from the device: Q and O by row, K and V in chunks of
 * up to REF_CHUNK_KEYS keys of one batch, shared by the sampled rows of that
 * batch; the reference accumulates in float64 with the online softmax. A row
 * that sees no key must be 0. -1 when nothing was checked; *st a failed
 * read. */
static double sampled_error(bench_shape sh, fattn_dtype t, fattn_buffer *const buf[4], int rows,
                            int *checked, fattn_status *st) {
    const int64_t Hq = sh.hq, Hkv = sh.hkv, Sq = sh.sq, Skv = sh.skv, D = sh.d;
    const int64_t group = Hq / Hkv;
    const size_t es = fattn_dtype_size(t);
    const double scale = 1.0 / sqrt((double)D);
    const int64_t pairs[4][2] = {{0, 0}, {sh.b - 1, Hq - 1}, {sh.b / 2, Hq / 2}, {0, Hq - 1}};
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
    for (int pi = 0; *st == FATTN_OK && pi < 4; pi++) {
        int seen = 0;
        for (int pj = 0; pj < pi; pj++)
            seen |= pairs[pj][0] == pairs[pi][0] && pairs[pj][1] == pairs[pi][1];
        for (int k = 0; !seen && k < per && *st == FATTN_OK; k++) {
            ref_row *r = &rr[n++];
            r->b = pairs[pi][0], r->h = pairs[pi][1];
            r->i = per > 1 ? k * (Sq - 1) / (per - 1) : 0;
            r->lim = visible(sh, r->i);
            r->m = -INFINITY;
            r->q = calloc((size_t)D, sizeof *r->q);
            r->acc = calloc((size_t)D, sizeof *r->acc);
            r->s = calloc(REF_CHUNK_KEYS, sizeof *r->s);
            if (!r->q || !r->acc || !r->s) {
                *st = FATTN_ERR_OUT_OF_MEMORY;
                break;
            }
            const size_t qrow = (size_t)(((r->b * Sq + r->i) * Hq + r->h) * D);
            *st = fattn_buffer_read(buf[0], qrow * es, row, (size_t)D * es);
            for (int64_t c = 0; c < D; c++) r->q[c] = (double)elem(row, t, (size_t)c);
        }
    }
    /* Each batch's K and V once, in chunks, for all of its sampled rows. */
    for (int a = 0; a < n && *st == FATTN_OK; a++) {
        int first = 1;
        for (int z = 0; z < a; z++) first &= rr[z].b != rr[a].b;
        if (!first) continue;
        const int64_t b = rr[a].b;
        int64_t keys = 0;
        for (int z = a; z < n; z++)
            if (rr[z].b == b && rr[z].lim > keys) keys = rr[z].lim;
        for (int64_t j0 = 0; j0 < keys && *st == FATTN_OK; j0 += chunk) {
            const int64_t nk = keys - j0 < chunk ? keys - j0 : chunk;
            const size_t at = (size_t)((b * Skv + j0) * Hkv * D) * es,
                         len = (size_t)(nk * Hkv * D) * es;
            *st = fattn_buffer_read(buf[1], at, kc, len);
            if (*st == FATTN_OK) *st = fattn_buffer_read(buf[2], at, vc, len);
            for (int z = a; z < n && *st == FATTN_OK; z++) {
                ref_row *r = &rr[z];
                if (r->b != b || r->lim <= j0) continue;
                const int64_t kh = r->h / group, m = r->lim - j0 < nk ? r->lim - j0 : nk;
                double mc = r->m;
                for (int64_t j = 0; j < m; j++) {
                    const size_t krow = (size_t)((j * Hkv + kh) * D);
                    double s = 0.0;
                    for (int64_t c = 0; c < D; c++)
                        s += r->q[c] * (double)elem(kc, t, krow + (size_t)c);
                    r->s[j] = s * scale;
                    if (r->s[j] > mc) mc = r->s[j];
                }
                const double rescale = r->m == -INFINITY ? 0.0 : exp(r->m - mc);
                r->l *= rescale;
                for (int64_t c = 0; c < D; c++) r->acc[c] *= rescale;
                r->m = mc;
                for (int64_t j = 0; j < m; j++) {
                    const double w = exp(r->s[j] - mc);
                    const size_t vrow = (size_t)((j * Hkv + kh) * D);
                    r->l += w;
                    for (int64_t c = 0; c < D; c++)
                        r->acc[c] += w * (double)elem(vc, t, vrow + (size_t)c);
                }
            }
        }
    }
    for (int z = 0; z < n && *st == FATTN_OK; z++) {
        const ref_row *r = &rr[z];
        const size_t orow = (size_t)(((r->b * Sq + r->i) * Hq + r->h) * D);
        *st = fattn_buffer_read(buf[3], orow * es, row, (size_t)D * es);
        for (int64_t c = 0; *st == FATTN_OK && c < D; c++) {
            const double ref = r->l > 0 ? r->acc[c] / r->l : 0.0;
            const double e = fabs((double)elem(row, t, (size_t)c) - ref);
            if (!(e <= worst)) worst = e; /* NaN wins */
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

static void fail(fattn_context *ctx, bench_result *r, const char *what) {
    snprintf(r->status, sizeof r->status, "error");
    snprintf(r->note, sizeof r->note, "%s: %s", what, fattn_error_message(ctx));
}

static void human_bytes(char *buf, size_t len, double bytes) {
    if (bytes >= 1099511627776.0)
        snprintf(buf, len, "%.1f TiB", bytes / 1099511627776.0);
    else if (bytes >= 1073741824.0)
        snprintf(buf, len, "%.1f GiB", bytes / 1073741824.0);
    else
        snprintf(buf, len, "%.1f MiB", bytes / 1048576.0);
}

/* One untimed call on a small problem of the cell's dtype, head dim, GQA
 * group and mask (batch 1, one key/value head and its query heads, seq_q and
 * seq_kv up to 64, over the start of the cell's buffers), so that kernel
 * builds and other first-use costs are not counted in the call the budget's
 * estimate is taken from. Its failure is left to the real call to report. */
static void prime(fattn_context *ctx, forward_fn f, bench_shape sh, fattn_dtype t,
                  fattn_buffer *const buf[4]) {
    const bench_shape small = {
        1, sh.hq / sh.hkv, 1, sh.sq < 64 ? sh.sq : 64, sh.skv < 64 ? sh.skv : 64, sh.d, sh.causal};
    const fattn_attention_desc d = desc_of(small, t);
    fattn_tensor y[4];
    for (int i = 0; i < 4; i++) {
        const int kv = i == 1 || i == 2;
        if (fattn_tensor_init(buf[i], t, FATTN_LAYOUT_BSHD, 1, kv ? small.hkv : small.hq,
                              kv ? small.skv : small.sq, small.d, 0, &y[i]) != FATTN_OK)
            return;
    }
    if (f(ctx, &d, &y[0], &y[1], &y[2], &y[3], NULL) == FATTN_OK) fattn_context_synchronize(ctx);
}

/* The reason for a path stopped over the budget by its own call. */
static void over_note(char *buf, size_t len, const char *prefix, const bench_opts *o,
                      double call_s) {
    const int calls = o->warmup + o->iters;
    snprintf(buf, len, "%sone call took %.3g s: %d calls estimated %.3g s, over --budget %g s",
             prefix, call_s, calls, call_s * calls, o->budget_s);
}

/* The naive baseline, where the backend has one and S and P fit the device. */
static void measure_naive(fattn_context *ctx, const bench_opts *o, const fattn_attention_desc *d,
                          const fattn_tensor *x, fattn_buffer *const buf[4], bench_result *r) {
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
    if (o->budget_s > 0) prime(ctx, fattn_forward_naive, r->shape, r->dtype, buf);
    if (median_ms(ctx, fattn_forward_naive, d, x, o, &r->naive_ms, &clock, &over, &stop_s) !=
        FATTN_OK) {
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
    r->naive_measured = grown(ctx, fattn_forward_naive, d, x);
}

/* Whether Q, K, V and O (`need` bytes) fit the device's free memory with a
 * tenth to spare: measured where the backend can (CUDA, the CPU, AMD
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

void bench_measure(fattn_context *ctx, const bench_opts *o, bench_result *r) {
    const bench_shape sh = r->shape;
    const fattn_dtype t = r->dtype;
    const fattn_attention_desc d = desc_of(sh, t);
    const size_t nq = (size_t)(sh.b * sh.hq * sh.sq * sh.d),
                 nkv = (size_t)(sh.b * sh.hkv * sh.skv * sh.d), es = fattn_dtype_size(t);
    const size_t n[4] = {nq, nkv, nkv, nq};
    snprintf(r->status, sizeof r->status, "ok");
    r->clock = "host";
    r->max_err = -1.0;
    r->flash_measured = r->naive_measured = -1;
    fattn_memory_report mem = FATTN_MEMORY_REPORT_INIT;
    if (fattn_context_memory_report(ctx, &d, &mem) == FATTN_OK) {
        r->flash_bytes = mem.flash_bytes;
        r->naive_bytes = mem.naive_bytes;
    }
    if (!inputs_fit(ctx, o, bench_bytes(sh, t), r->note, sizeof r->note)) {
        snprintf(r->status, sizeof r->status, "skipped");
        return;
    }

    fattn_buffer *buf[4] = {0};
    fattn_tensor x[4];
    fattn_status st = FATTN_OK;
    int no_room = 0;
    for (int i = 0; i < 4 && st == FATTN_OK; i++) {
        const int kv = i == 1 || i == 2;
        st = fattn_buffer_alloc(ctx, n[i] * es, &buf[i]);
        no_room = st == FATTN_ERR_OUT_OF_MEMORY;
        if (st == FATTN_OK && i < 3) st = fill_buffer(buf[i], t, n[i], 1234 + (uint64_t)i);
        if (st == FATTN_OK)
            st = fattn_tensor_init(buf[i], t, FATTN_LAYOUT_BSHD, sh.b, kv ? sh.hkv : sh.hq,
                                   kv ? sh.skv : sh.sq, sh.d, 0, &x[i]);
    }
    int over = 0;
    double stop_s = 0.0;
    if (st == FATTN_OK && o->budget_s > 0) prime(ctx, fattn_forward, sh, t, buf);
    if (no_room) {
        snprintf(r->status, sizeof r->status, "skipped");
        snprintf(r->note, sizeof r->note, "no room: %s", fattn_error_message(ctx));
    } else if (st != FATTN_OK)
        fail(ctx, r, "inputs");
    else if (median_ms(ctx, fattn_forward, &d, x, o, &r->ms, &r->clock, &over, &stop_s) != FATTN_OK)
        fail(ctx, r, "forward");
    else if (over) {
        snprintf(r->status, sizeof r->status, "skipped");
        over_note(r->note, sizeof r->note, "", o, stop_s);
        r->call_s = stop_s;
    } else {
        r->call_s = r->ms * 1e-3;
        r->tflops = bench_flops(sh) / (r->ms * 1e-3) / 1e12;
        r->gbps = bench_bytes(sh, t) / (r->ms * 1e-3) / 1e9;
        r->flash_measured = grown(ctx, fattn_forward, &d, x);
        if (o->check_rows > 0) {
            fattn_status rst;
            r->max_err = sampled_error(sh, t, buf, o->check_rows, &r->err_rows, &rst);
            if (rst == FATTN_ERR_OUT_OF_MEMORY && !*fattn_error_message(ctx)) {
                snprintf(r->status, sizeof r->status, "error");
                snprintf(r->note, sizeof r->note, "check: out of host memory");
            } else if (rst != FATTN_OK)
                fail(ctx, r, "reading back for the check");
        }
        if (o->naive)
            measure_naive(ctx, o, &d, x, buf, r);
        else
            snprintf(r->naive_note, sizeof r->naive_note, "not asked (--no-naive, or --decode)");
    }
    for (int i = 0; i < 4; i++) fattn_buffer_free(buf[i]);
}
