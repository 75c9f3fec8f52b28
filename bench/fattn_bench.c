/* fattn_bench: every available backend and device side by side on the
 * FlashAttention papers' sweep (head dim 64 and 128, seq 512 .. 16384,
 * batch*seq = 16384, heads*dim = 2048, causal and not) and any shape given
 * on the command line, for each dtype. Per (backend, device, shape, dtype):
 * the median time on the device's clock, TFLOP/s, the error against a
 * float64 reference on sampled rows, the naive baseline, the accounting
 * module's bytes and the device memory each path was measured to hold.
 * Progress goes to stderr, a side-by-side table to stdout, CSV / JSON lines
 * to files. --long: the long-sequence demonstration on each GPU. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fattn.h"
#include "measure.h"
#include "report.h"

enum { MAX_SHAPES = 256 };

typedef struct config {
    int kinds[3], all_devices, device;
    int dtypes[3];
    bench_shape shapes[MAX_SHAPES];
    int nshapes;
    bench_opts opts;
    double budget_s;   /* per measurement; longer ones are reported skipped */
    double fail_above; /* exit status 1 if a sampled error exceeds it (0: never) */
    int long_demo;
    int64_t long_seq;
    FILE *csv, *json;
    int table;
} config;

typedef struct results {
    bench_result *r;
    int n, cap;
} results;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void) {
    fprintf(
        stderr,
        "usage: fattn_bench [--backend all|cpu|cuda|opencl] [--device all|N] [--dtype "
        "all|f32|f16|bf16]\n"
        "                   [--seqs S1,S2,..] [--dims D1,D2] [--causal both|0|1] [--shape "
        "BxHxSxD[c]]...\n"
        "                   [--no-sweep] [--quick] [--iters N] [--warmup N] [--no-naive] "
        "[--check-rows N]\n"
        "                   [--budget SECONDS] [--csv FILE|-] [--json FILE|-] [--long [--long-seq "
        "N]]\n"
        "                   [--fail-above ERR] [--csv-header]\n"
        "Default sweep: seq 512..16384, dim 64 and 128, causal and not, batch*seq = 16384, "
        "heads*dim = 2048,\n"
        "every dtype, every backend and device; 10 timed calls after 2 warm-ups; a measurement "
        "whose\n"
        "estimated time passes --budget (default 10 s) is reported as skipped.\n"
        "--quick: seq 256..1024, dim 64, batch*seq = 2048, heads*dim = 512, 3 calls, budget 2 s.\n"
        "--shape: 2x16x4096x128c is batch 2, 16 heads, seq 4096, dim 128, causal (added to the "
        "sweep).\n"
        "--long: batch 1, 16 heads, dim 128, causal, seq --long-seq (131072) on every GPU, bf16 "
        "and f32.\n"
        "--fail-above: exit status 1 if a sampled error exceeds ERR (or was not checked).\n");
}

static int parse_list(const char *v, int64_t *out, int max) {
    int n = 0;
    for (const char *c = v; *c && n < max; c = strchr(c, ',') ? strchr(c, ',') + 1 : "")
        if (atoll(c) > 0) out[n++] = atoll(c);
    return n;
}

static int parse_shape(const char *v, bench_shape *s) {
    long long b, h, q, d;
    char c = 0;
    if (sscanf(v, "%lldx%lldx%lldx%lld%c", &b, &h, &q, &d, &c) < 4 || b < 1 || h < 1 || q < 1 ||
        d < 1)
        return 0;
    *s = (bench_shape){b, h, q, d, c == 'c'};
    return 1;
}

static FILE *open_out(const char *path) {
    if (strcmp(path, "-") == 0) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "fattn_bench: cannot write %s\n", path);
    return f;
}

/* The papers' sweep: total tokens and heads*dim fixed, ascending seq (the
 * budget estimates each shape from the one before). */
static void add_sweep(config *c, const int64_t *seqs, int nseq, const int64_t *dims, int ndim,
                      int causal_mask, int64_t tokens, int64_t width) {
    for (int di = 0; di < ndim; di++)
        for (int cz = 0; cz < 2; cz++) {
            if (!(causal_mask & (1 << cz))) continue;
            for (int si = 0; si < nseq && c->nshapes < MAX_SHAPES; si++) {
                const int64_t s = seqs[si], d = dims[di];
                c->shapes[c->nshapes++] = (bench_shape){tokens / s > 0 ? tokens / s : 1,
                                                        width / d > 0 ? width / d : 1, s, d, cz};
            }
        }
}

static bench_result *push(results *rs) {
    if (rs->n == rs->cap) {
        int cap = rs->cap ? 2 * rs->cap : 64;
        bench_result *r = realloc(rs->r, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        rs->r = r, rs->cap = cap;
    }
    bench_result *r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static void progress(int k, int total, const bench_result *r, double t0) {
    fprintf(stderr, "[%3d/%d %5.0fs] %-6s %d %-4s b%-3lld h%-3lld seq %-6lld d%-3lld %-6s ", k,
            total, now() - t0, r->backend, r->device, bench_dtype_name(r->dtype),
            (long long)r->shape.b, (long long)r->shape.h, (long long)r->shape.s,
            (long long)r->shape.d, r->shape.causal ? "causal" : "");
    if (strcmp(r->status, "ok") != 0)
        fprintf(stderr, "%s: %s\n", r->status, r->note);
    else {
        fprintf(stderr, "%8.3f ms %7.2f TFLOP/s", r->ms, r->tflops);
        if (r->max_err >= 0) fprintf(stderr, "  err %.1e", r->max_err);
        if (r->naive_ok)
            fprintf(stderr, "  naive %7.2f TFLOP/s", r->naive_tflops);
        else if (strncmp(r->naive_note, "impossible", 10) == 0)
            fprintf(stderr, "  naive %s", r->naive_note);
        fputc('\n', stderr);
    }
}

/* Measures one device over the shapes and dtypes; rates[dtype][0/1] carry
 * the last tiled / naive throughput for the budget's estimates. */
static void run_device(const config *c, fattn_backend_kind kind, int dev, const bench_shape *shapes,
                       int nshapes, const bench_opts *o, results *rs, int *k, int total,
                       double t0) {
    fattn_context *ctx;
    if (fattn_context_create(kind, dev, &ctx) != FATTN_OK) {
        fprintf(stderr, "fattn_bench: %s device %d: %s\n", fattn_backend_name(kind), dev,
                fattn_error_message(NULL));
        return;
    }
    const fattn_dtype all[3] = {FATTN_F32, FATTN_F16, FATTN_BF16};
    uint64_t used, mem_total;
    if (c->long_demo && fattn_context_device_memory(ctx, &used, &mem_total) == FATTN_OK)
        for (int t = 0; t < 3; t++)
            if (c->dtypes[t]) { /* Q, K, V and O resident; 10% left to the runtime */
                const double per_token = 4.0 * (double)shapes[0].h * (double)shapes[0].d *
                                         (double)fattn_dtype_size(all[t]);
                fprintf(stderr,
                        "fattn_bench: %s device %d holds Q, K, V and O of up to %.0f tokens in %s "
                        "(%d heads, dim %lld)\n",
                        fattn_backend_name(kind), dev, 0.9 * (double)mem_total / per_token,
                        bench_dtype_name(all[t]), (int)shapes[0].h, (long long)shapes[0].d);
            }
    for (int t = 0; t < 3; t++) {
        if (!c->dtypes[t]) continue;
        double rate[2] = {0, 0}; /* FLOP/s of the last tiled and naive runs */
        for (int i = 0; i < nshapes; i++) {
            bench_result *r = push(rs);
            if (!r) break;
            snprintf(r->backend, sizeof r->backend, "%s", fattn_backend_name(kind));
            r->device = dev;
            snprintf(r->device_name, sizeof r->device_name, "%s", fattn_context_device_name(ctx));
            r->dtype = all[t];
            r->shape = shapes[i];
            const double flops = bench_flops(shapes[i]), calls = o->warmup + o->iters;
            bench_opts oo = *o;
            if (rate[1] > 0 && flops / rate[1] * calls > c->budget_s) oo.naive = 0;
            if (rate[0] > 0 && flops / rate[0] * calls > c->budget_s) {
                snprintf(r->status, sizeof r->status, "skipped");
                snprintf(r->note, sizeof r->note, "estimated %.0f s, over --budget %.0f s",
                         flops / rate[0] * calls, c->budget_s);
            } else {
                bench_measure(ctx, &oo, r);
                if (o->naive && !oo.naive)
                    snprintf(r->naive_note, sizeof r->naive_note,
                             "skipped: estimated %.0f s, over --budget", flops / rate[1] * calls);
                if (strcmp(r->status, "ok") == 0) rate[0] = flops / (r->ms * 1e-3);
                if (r->naive_ok) rate[1] = flops / (r->naive_ms * 1e-3);
            }
            progress(++*k, total, r, t0);
            if (c->csv) report_csv(c->csv, r);
            if (c->json) report_json(c->json, r);
        }
    }
    fattn_context_free(ctx);
}

int main(int argc, char **argv) {
    config c = {.kinds = {1, 1, 1},
                .all_devices = 1,
                .dtypes = {1, 1, 1},
                .opts = {.iters = 10, .warmup = 2, .naive = 1, .check_rows = 16},
                .budget_s = 10.0,
                .long_seq = 131072,
                .table = 1};
    int64_t seqs[16] = {512, 1024, 2048, 4096, 8192, 16384}, dims[4] = {64, 128};
    int nseq = 6, ndim = 2, causal_mask = 3, sweep = 1, quick = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--csv-header")) {
            report_csv_header(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-naive")) {
            c.opts.naive = 0;
            continue;
        }
        if (!strcmp(a, "--no-sweep")) {
            sweep = 0;
            continue;
        }
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        if (!strcmp(a, "--long")) {
            c.long_demo = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--backend")) {
            fattn_backend_kind kind;
            if (strcmp(v, "all") == 0) continue;
            if (fattn_backend_from_name(v, &kind) != FATTN_OK || kind == FATTN_BACKEND_AUTO) {
                usage();
                return 2;
            }
            for (int k = 0; k < 3; k++) c.kinds[k] = (int)kind == k + 1;
        } else if (!strcmp(a, "--device")) {
            c.all_devices = strcmp(v, "all") == 0;
            c.device = atoi(v);
        } else if (!strcmp(a, "--dtype")) {
            const char *names[3] = {"f32", "f16", "bf16"};
            for (int k = 0; k < 3; k++) c.dtypes[k] = !strcmp(v, "all") || !strcmp(v, names[k]);
        } else if (!strcmp(a, "--seqs"))
            nseq = parse_list(v, seqs, 16);
        else if (!strcmp(a, "--dims"))
            ndim = parse_list(v, dims, 4);
        else if (!strcmp(a, "--causal"))
            causal_mask = !strcmp(v, "0") ? 1 : !strcmp(v, "1") ? 2 : 3;
        else if (!strcmp(a, "--shape")) {
            if (c.nshapes == MAX_SHAPES || !parse_shape(v, &c.shapes[c.nshapes])) {
                usage();
                return 2;
            }
            c.nshapes++;
        } else if (!strcmp(a, "--iters"))
            c.opts.iters = atoi(v) > 0 ? atoi(v) : 1;
        else if (!strcmp(a, "--warmup"))
            c.opts.warmup = atoi(v) > 0 ? atoi(v) : 0;
        else if (!strcmp(a, "--check-rows"))
            c.opts.check_rows = atoi(v) > 0 ? atoi(v) : 0;
        else if (!strcmp(a, "--budget"))
            c.budget_s = atof(v) > 0 ? atof(v) : 1e30;
        else if (!strcmp(a, "--fail-above"))
            c.fail_above = atof(v);
        else if (!strcmp(a, "--long-seq"))
            c.long_seq = atoll(v) > 0 ? atoll(v) : c.long_seq;
        else if (!strcmp(a, "--csv")) {
            if (!(c.csv = open_out(v))) return 2;
            if (c.csv == stdout) c.table = 0;
        } else if (!strcmp(a, "--json")) {
            if (!(c.json = open_out(v))) return 2;
            if (c.json == stdout) c.table = 0;
        } else {
            usage();
            return 2;
        }
    }
    if (!nseq || !ndim) {
        usage();
        return 2;
    }
    if (quick) {
        const int64_t qs[3] = {256, 512, 1024}, qd[1] = {64};
        add_sweep(&c, qs, 3, qd, 1, causal_mask, 2048, 512);
        c.opts.iters = 3, c.opts.warmup = 1, c.budget_s = 2.0;
    } else if (sweep && !c.long_demo) {
        add_sweep(&c, seqs, nseq, dims, ndim, causal_mask, 16384, 2048);
    }
    if (c.csv) report_csv_header(c.csv);

    /* Every (backend, device) to run, GPUs only for the long demo. */
    struct {
        fattn_backend_kind kind;
        int dev;
    } devs[64];
    int ndev = 0;
    for (int k = 0; k < 3; k++) {
        const fattn_backend_kind kind = (fattn_backend_kind)(k + 1);
        if (!c.kinds[k]) continue;
        fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
        if (fattn_backend_get_info(kind, &info) != FATTN_OK || info.device_count == 0) {
            fprintf(stderr, "fattn_bench: %s: skipped (%s)\n", fattn_backend_name(kind),
                    info.reason[0] ? info.reason : "no devices");
            continue;
        }
        const int n =
            c.long_demo ? (kind == FATTN_BACKEND_CPU ? 0 : info.gpu_count) : info.device_count;
        for (int d = 0; d < n && ndev < 64; d++)
            if (c.all_devices || d == c.device) devs[ndev].kind = kind, devs[ndev++].dev = d;
    }
    if (c.long_demo && ndev == 0) {
        fprintf(stderr,
                "fattn_bench: no GPU here; the long-sequence demonstration runs on GPUs only\n");
        return 0;
    }
    bench_shape long_shape = {1, 16, c.long_seq, 128, 1};
    const bench_shape *shapes = c.long_demo ? &long_shape : c.shapes;
    const int nshapes = c.long_demo ? 1 : c.nshapes;
    bench_opts o = c.opts;
    if (c.long_demo) {
        o.iters = 3, o.warmup = 1, c.budget_s = 1e30;
        if (c.dtypes[0] && c.dtypes[1] && c.dtypes[2]) c.dtypes[1] = 0; /* bf16 and f32 */
    }
    const int total = ndev * nshapes * (c.dtypes[0] + c.dtypes[1] + c.dtypes[2]);
    fprintf(stderr, "fattn_bench: %d device(s), %d shape(s), %d measurement(s)\n", ndev, nshapes,
            total);
    results rs = {0};
    int k = 0;
    const double t0 = now();
    for (int i = 0; i < ndev; i++)
        run_device(&c, devs[i].kind, devs[i].dev, shapes, nshapes, &o, &rs, &k, total, t0);
    if (c.table) report_table(stdout, rs.r, rs.n);
    int errors = 0;
    for (int i = 0; i < rs.n; i++) {
        const bench_result *r = &rs.r[i];
        errors += strcmp(r->status, "error") == 0;
        if (c.fail_above > 0 && strcmp(r->status, "ok") == 0 && !(r->max_err <= c.fail_above)) {
            fprintf(stderr,
                    "fattn_bench: %s %d %s seq %lld dim %lld: error %.3g above --fail-above %.3g\n",
                    r->backend, r->device, bench_dtype_name(r->dtype), (long long)r->shape.s,
                    (long long)r->shape.d, r->max_err, c.fail_above);
            errors++;
        }
    }
    if (c.csv && c.csv != stdout) fclose(c.csv);
    if (c.json && c.json != stdout) fclose(c.json);
    free(rs.r);
    if (errors) fprintf(stderr, "fattn_bench: %d measurement(s) failed (see the notes)\n", errors);
    return errors != 0;
}
