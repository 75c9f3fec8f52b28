/* One benchmark measurement (measure.h). Inputs are random in [-1, 1] (never
 * zeros) and laid out BSHD; the float64 reference reads the same rounded
 * values the device does. */
#define _POSIX_C_SOURCE 200809L
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "half.h"

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
    d.heads_q = d.heads_kv = sh.h;
    d.seq_q = d.seq_kv = sh.s;
    d.head_dim = sh.d;
    d.dtype = t;
    d.causal = sh.causal ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
    return d;
}

double bench_flops(bench_shape sh) {
    const fattn_attention_desc d = desc_of(sh, FATTN_F32);
    return fattn_flops(&d);
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

/* Max |O - reference| over `rows` rows spread over four (batch, head) pairs
 * and each pair's sequence (first and last rows included); the reference
 * accumulates in float64. */
static double sampled_error(bench_shape sh, fattn_dtype t, const unsigned char *const in[3],
                            const unsigned char *out, int rows, int *checked) {
    const int64_t H = sh.h, S = sh.s, D = sh.d;
    const double scale = 1.0 / sqrt((double)D);
    const int64_t pairs[4][2] = {{0, 0}, {sh.b - 1, H - 1}, {sh.b / 2, H / 2}, {0, H - 1}};
    const int per = rows / 4 > 1 ? rows / 4 : 2;
    double *p = malloc((size_t)S * sizeof *p), *acc = malloc((size_t)D * sizeof *acc), worst = 0.0;
    *checked = 0;
    for (int pi = 0; p && acc && pi < 4; pi++) {
        const int64_t b = pairs[pi][0], h = pairs[pi][1];
        for (int k = 0; k < per; k++) {
            const int64_t i = S > 1 ? k * (S - 1) / (per - 1) : 0;
            const int64_t lim =
                sh.causal ? i + 1 : S; /* seq_q = seq_kv: bottom-right is the diagonal */
            const size_t qrow = (size_t)(((b * S + i) * H + h) * D);
            double m = -INFINITY, l = 0.0;
            for (int64_t j = 0; j < lim; j++) {
                const size_t krow = (size_t)(((b * S + j) * H + h) * D);
                double s = 0.0;
                for (int64_t c = 0; c < D; c++)
                    s += (double)elem(in[0], t, qrow + (size_t)c) *
                         (double)elem(in[1], t, krow + (size_t)c);
                p[j] = s * scale;
                if (p[j] > m) m = p[j];
            }
            for (int64_t c = 0; c < D; c++) acc[c] = 0.0;
            for (int64_t j = 0; j < lim; j++) {
                const double w = exp(p[j] - m);
                const size_t vrow = (size_t)(((b * S + j) * H + h) * D);
                l += w;
                for (int64_t c = 0; c < D; c++)
                    acc[c] += w * (double)elem(in[2], t, vrow + (size_t)c);
            }
            for (int64_t c = 0; c < D; c++) {
                const double e = fabs((double)elem(out, t, qrow + (size_t)c) - acc[c] / l);
                if (!(e <= worst)) worst = e; /* NaN wins */
            }
            (*checked)++;
        }
    }
    free(p);
    free(acc);
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

/* One untimed call on a small problem of the cell's dtype, head dim and mask
 * (batch 1, one head, seq up to 64, over the start of the cell's buffers), so
 * that kernel builds and other first-use costs are not counted in the call
 * the budget's estimate is taken from. Its failure is left to the real call
 * to report. */
static void prime(fattn_context *ctx, forward_fn f, bench_shape sh, fattn_dtype t,
                  fattn_buffer *const buf[4]) {
    const bench_shape small = {1, 1, sh.s < 64 ? sh.s : 64, sh.d, sh.causal};
    const fattn_attention_desc d = desc_of(small, t);
    fattn_tensor y[4];
    for (int i = 0; i < 4; i++)
        if (fattn_tensor_init(buf[i], t, FATTN_LAYOUT_BSHD, 1, 1, small.s, small.d, 0, &y[i]) !=
            FATTN_OK)
            return;
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

void bench_measure(fattn_context *ctx, const bench_opts *o, bench_result *r) {
    const bench_shape sh = r->shape;
    const fattn_dtype t = r->dtype;
    const fattn_attention_desc d = desc_of(sh, t);
    const size_t n = (size_t)(sh.b * sh.h * sh.s * sh.d), bytes = n * fattn_dtype_size(t);
    snprintf(r->status, sizeof r->status, "ok");
    r->clock = "host";
    r->max_err = -1.0;
    r->flash_measured = r->naive_measured = -1;
    fattn_memory_report mem = FATTN_MEMORY_REPORT_INIT;
    if (fattn_context_memory_report(ctx, &d, &mem) == FATTN_OK) {
        r->flash_bytes = mem.flash_bytes;
        r->naive_bytes = mem.naive_bytes;
    }

    unsigned char *host[4] = {0};
    fattn_buffer *buf[4] = {0};
    fattn_tensor x[4];
    fattn_status st = FATTN_OK;
    for (int i = 0; i < 4 && st == FATTN_OK; i++) {
        host[i] = malloc(bytes);
        if (!host[i]) st = FATTN_ERR_OUT_OF_MEMORY;
        if (st == FATTN_OK && i < 3) random_fill(host[i], t, n, 1234 + (uint64_t)i);
        if (st == FATTN_OK) st = fattn_buffer_alloc(ctx, bytes, &buf[i]);
        if (st == FATTN_OK && i < 3) st = fattn_buffer_write(buf[i], 0, host[i], bytes);
        if (st == FATTN_OK)
            st = fattn_tensor_init(buf[i], t, FATTN_LAYOUT_BSHD, sh.b, sh.h, sh.s, sh.d, 0, &x[i]);
    }
    int over = 0;
    double stop_s = 0.0;
    if (st == FATTN_OK && o->budget_s > 0) prime(ctx, fattn_forward, sh, t, buf);
    if (st != FATTN_OK)
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
        r->flash_measured = grown(ctx, fattn_forward, &d, x);
        if (o->check_rows > 0) {
            if (fattn_buffer_read(buf[3], 0, host[3], bytes) != FATTN_OK)
                fail(ctx, r, "reading O");
            else {
                const unsigned char *in[3] = {host[0], host[1], host[2]};
                r->max_err = sampled_error(sh, t, in, host[3], o->check_rows, &r->err_rows);
            }
        }
        if (o->naive)
            measure_naive(ctx, o, &d, x, buf, r);
        else
            snprintf(r->naive_note, sizeof r->naive_note, "not asked (--naive)");
    }
    for (int i = 0; i < 4; i++) {
        fattn_buffer_free(buf[i]);
        free(host[i]);
    }
}
