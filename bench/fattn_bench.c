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
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fattn.h"
#include "measure.h"
#include "report.h"

enum { MAX_SHAPES = 256 };

/* A path of a cell (tiled, naive) is skipped without a call when a cell no
 * larger in any dimension, earlier on the same backend, device and dtype,
 * already took a call too long for the budget; or when its FLOPs at
 * PRIOR_MARGIN times the best throughput measured so far there, in calls of
 * at least PRIOR_MIN_S (shorter ones are mostly launch overhead), would
 * still pass the budget. Every other cell is judged by its own first call
 * (measure.h). */
#define PRIOR_MARGIN 2.0
#define PRIOR_MIN_S 0.01

typedef struct config {
    int kinds[3], all_devices, device;
    int dtypes[3];
    bench_shape shapes[MAX_SHAPES];
    int nshapes;
    bench_opts opts;
    double budget_s;   /* wall seconds per path of a cell (measure.h); 0: no limit */
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
        "every dtype, every backend and device; 10 timed calls after 2 warm-ups.\n"
        "--backend/--device: all (the default) skips an unavailable backend with a note; a named\n"
        "  backend or device that is not here is an error (exit status 1).\n"
        "--budget: wall seconds the warm-ups and timed calls of one path (tiled, naive)\n"
        "  may take (default 10; 0: no limit). A cell first runs once, untimed, on a small\n"
        "  problem of its dtype, head dim and mask (kernel builds are not counted); then\n"
        "  (warm-ups + timed calls) x its own first call is the estimate (the faster of the\n"
        "  first two calls when the first took at most half the budget). Over the budget,\n"
        "  the path stops there and is reported skipped with the estimate. A path is skipped\n"
        "  unrun when a cell no larger in any dimension, earlier on the same backend, device\n"
        "  and dtype, took a call too long for the budget, or when its FLOPs at 2x the best\n"
        "  throughput measured so far there (in calls of 10 ms or more) would pass it.\n"
        "--quick: seq 256..1024, dim 64, batch*seq = 2048, heads*dim = 512, 3 calls, budget 2 s.\n"
        "--shape: 2x16x4096x128c is batch 2, 16 heads, seq 4096, dim 128, causal (added to the "
        "sweep).\n"
        "--long: batch 1, 16 heads, dim 128, causal, seq --long-seq (131072) on every GPU, bf16 "
        "and f32\n"
        "  (no GPU here: a note, exit status 0, unless --backend names one).\n"
        "--fail-above: exit status 1 if a sampled error exceeds ERR (or was not checked).\n"
        "Exit status: 0 done; 1 a measurement failed, or a named backend or device is missing;\n"
        "  2 a bad option.\n");
}

/* A bad option: which one and why, then the usage; main returns 2. */
static int bad_option(const char *opt, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fattn_bench: %s: ", opt);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage();
    return 2;
}

/* A whole number in [min, max], nothing after it. */
static int parse_int(const char *v, long long min, long long max, long long *out) {
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < min || x > max) return 0;
    *out = x;
    return 1;
}

/* A finite number >= min, nothing after it. */
static int parse_num(const char *v, double min, double *out) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end || errno == ERANGE || !isfinite(x) || x < min) return 0;
    *out = x;
    return 1;
}

/* Comma-separated whole numbers >= 1, at most max of them; the count, or 0
 * when one is bad (then *why says which). */
static int parse_list(const char *v, int64_t *out, int max, char *why, size_t len) {
    int n = 0;
    for (const char *c = v;; n++) {
        const char *comma = strchr(c, ',');
        char item[32];
        const size_t k = comma ? (size_t)(comma - c) : strlen(c);
        long long x;
        if (n == max) {
            snprintf(why, len, "at most %d values", max);
            return 0;
        }
        snprintf(item, sizeof item, "%.*s", (int)(k < sizeof item - 1 ? k : sizeof item - 1), c);
        if (k >= sizeof item || !parse_int(item, 1, INT64_MAX, &x)) {
            snprintf(why, len, "'%.*s' is not a whole number >= 1", (int)k, c);
            return 0;
        }
        out[n] = x;
        if (!comma) return n + 1;
        c = comma + 1;
    }
}

/* BxHxSxD with an optional trailing c, nothing else. */
static int parse_shape(const char *v, bench_shape *s) {
    long long b, h, q, d;
    int used = 0;
    if (sscanf(v, "%lldx%lldx%lldx%lld%n", &b, &h, &q, &d, &used) < 4 || b < 1 || h < 1 || q < 1 ||
        d < 1)
        return 0;
    const int causal = v[used] == 'c';
    if (v[used + causal] != '\0') return 0;
    *s = (bench_shape){b, h, q, d, causal};
    return 1;
}

static FILE *open_out(const char *path) {
    if (strcmp(path, "-") == 0) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "fattn_bench: cannot write %s\n", path);
    return f;
}

/* The papers' sweep: total tokens and heads*dim fixed, ascending seq. */
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

/* Whether the cell `sh` is no smaller than `p` in any dimension (a causal
 * cell does less work than the same shape unmasked). */
static int covers(bench_shape sh, bench_shape p) {
    return sh.b >= p.b && sh.h >= p.h && sh.s >= p.s && sh.d >= p.d && (!sh.causal || p.causal);
}

/* The FLOPs that a path's time follows: the tiled path skips the masked
 * pairs, the naive one computes all of S and P. */
static double path_flops(bench_shape sh, int path) {
    if (path) sh.causal = 0;
    return bench_flops(sh);
}

/* Whether path 0 (tiled) or 1 (naive) of the cell `sh` is skipped without a
 * call (PRIOR_MARGIN), judged from the cells before it on this backend,
 * device and dtype (prev[0..n)); *why says so. */
static int prior_skip(const bench_result *prev, int n, int path, bench_shape sh, int calls,
                      double budget, char *why, size_t len) {
    if (budget <= 0) return 0;
    const char *prefix = path ? "skipped: " : "";
    double best = 0; /* FLOP/s */
    for (int i = 0; i < n; i++) {
        const double call_s = path ? prev[i].naive_call_s : prev[i].call_s;
        const bench_shape p = prev[i].shape;
        if (call_s * calls > budget && covers(sh, p)) {
            snprintf(why, len,
                     "%sa cell no larger (%lldx%lldx%lldx%lld%s) took %.3g s a call: %d calls "
                     "over --budget %g s",
                     prefix, (long long)p.b, (long long)p.h, (long long)p.s, (long long)p.d,
                     p.causal ? "c" : "", call_s, calls, budget);
            return 1;
        }
        if (call_s >= PRIOR_MIN_S && path_flops(p, path) / call_s > best)
            best = path_flops(p, path) / call_s;
    }
    const double est = best > 0 ? calls * path_flops(sh, path) / (PRIOR_MARGIN * best) : 0;
    if (est <= budget) return 0;
    snprintf(why, len,
             "%sestimated %.3g s even at %gx the best %.3g TFLOP/s measured so far here, over "
             "--budget %g s",
             prefix, est, PRIOR_MARGIN, best / 1e12, budget);
    return 1;
}

/* Measures one device over the shapes and dtypes, each cell's budget judged
 * from the cells before it on the same dtype (prior_skip) and from its own
 * first call (bench_measure). Returns 0, or -1 when no context could be made
 * (said on stderr). */
static int run_device(const config *c, fattn_backend_kind kind, int dev, const bench_shape *shapes,
                      int nshapes, const bench_opts *o, results *rs, int *k, int total, double t0) {
    fattn_context *ctx;
    if (fattn_context_create(kind, dev, &ctx) != FATTN_OK) {
        fprintf(stderr, "fattn_bench: %s device %d: %s\n", fattn_backend_name(kind), dev,
                fattn_error_message(NULL));
        return -1;
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
    const double budget = c->budget_s;
    const int calls = o->warmup + o->iters;
    for (int t = 0; t < 3; t++) {
        if (!c->dtypes[t]) continue;
        const int first = rs->n; /* this device and dtype's cells start here */
        for (int i = 0; i < nshapes; i++) {
            bench_result *r = push(rs);
            if (!r) break;
            snprintf(r->backend, sizeof r->backend, "%s", fattn_backend_name(kind));
            r->device = dev;
            snprintf(r->device_name, sizeof r->device_name, "%s", fattn_context_device_name(ctx));
            r->dtype = all[t];
            r->shape = shapes[i];
            const bench_result *prev = &rs->r[first];
            const int nprev = rs->n - 1 - first;
            bench_opts oo = *o;
            oo.budget_s = budget;
            if (prior_skip(prev, nprev, 0, shapes[i], calls, budget, r->note, sizeof r->note)) {
                snprintf(r->status, sizeof r->status, "skipped");
            } else {
                char why[sizeof r->naive_note];
                if (o->naive &&
                    prior_skip(prev, nprev, 1, shapes[i], calls, budget, why, sizeof why))
                    oo.naive = 0;
                bench_measure(ctx, &oo, r);
                if (o->naive && !oo.naive && strcmp(r->status, "ok") == 0)
                    snprintf(r->naive_note, sizeof r->naive_note, "%s", why);
            }
            progress(++*k, total, r, t0);
            if (c->csv) report_csv(c->csv, r);
            if (c->json) report_json(c->json, r);
        }
    }
    fattn_context_free(ctx);
    return 0;
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
    int named_backend = 0; /* --backend named one: its absence is an error */
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
        static const char *const with_value[] = {
            "--backend", "--device",     "--dtype",    "--seqs",   "--dims",
            "--causal",  "--shape",      "--iters",    "--warmup", "--check-rows",
            "--budget",  "--fail-above", "--long-seq", "--csv",    "--json"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known) return bad_option(a, "unknown option");
        if (!v) return bad_option(a, "needs a value");
        if (v[0] == '-' && v[1] == '-' && v[2])
            return bad_option(a, "needs a value (got the option %s)", v);
        i++;
        long long n;
        double x;
        char why[64];
        if (!strcmp(a, "--backend")) {
            fattn_backend_kind kind;
            if (strcmp(v, "all") == 0) {
                for (int k = 0; k < 3; k++) c.kinds[k] = 1;
                named_backend = 0;
                continue;
            }
            if (fattn_backend_from_name(v, &kind) != FATTN_OK || kind == FATTN_BACKEND_AUTO)
                return bad_option(a, "'%s' is not all, cpu, cuda or opencl", v);
            for (int k = 0; k < 3; k++) c.kinds[k] = (int)kind == k + 1;
            named_backend = 1;
        } else if (!strcmp(a, "--device")) {
            c.all_devices = strcmp(v, "all") == 0;
            if (!c.all_devices) {
                if (!parse_int(v, 0, INT_MAX, &n))
                    return bad_option(a, "'%s' is not all or a device index (0, 1, ..)", v);
                c.device = (int)n;
            }
        } else if (!strcmp(a, "--dtype")) {
            const char *names[3] = {"f32", "f16", "bf16"};
            int any = 0;
            for (int k = 0; k < 3; k++)
                any |= c.dtypes[k] = !strcmp(v, "all") || !strcmp(v, names[k]);
            if (!any) return bad_option(a, "'%s' is not all, f32, f16 or bf16", v);
        } else if (!strcmp(a, "--seqs")) {
            if (!(nseq = parse_list(v, seqs, 16, why, sizeof why))) return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--dims")) {
            if (!(ndim = parse_list(v, dims, 4, why, sizeof why))) return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--causal")) {
            if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "both"))
                return bad_option(a, "'%s' is not both, 0 or 1", v);
            causal_mask = !strcmp(v, "0") ? 1 : !strcmp(v, "1") ? 2 : 3;
        } else if (!strcmp(a, "--shape")) {
            if (c.nshapes == MAX_SHAPES) return bad_option(a, "more than %d shapes", MAX_SHAPES);
            if (!parse_shape(v, &c.shapes[c.nshapes]))
                return bad_option(
                    a, "'%s' is not BxHxSxD[c] with whole numbers >= 1 (2x16x4096x128c)", v);
            c.nshapes++;
        } else if (!strcmp(a, "--iters")) {
            if (!parse_int(v, 1, INT_MAX / 2, &n))
                return bad_option(a, "'%s' is not a whole number >= 1", v);
            c.opts.iters = (int)n;
        } else if (!strcmp(a, "--warmup")) {
            if (!parse_int(v, 0, INT_MAX / 2, &n))
                return bad_option(a, "'%s' is not a whole number >= 0", v);
            c.opts.warmup = (int)n;
        } else if (!strcmp(a, "--check-rows")) {
            if (!parse_int(v, 0, INT_MAX, &n))
                return bad_option(a, "'%s' is not a whole number >= 0", v);
            c.opts.check_rows = (int)n;
        } else if (!strcmp(a, "--budget")) {
            if (!parse_num(v, 0, &x))
                return bad_option(a, "'%s' is not a number of seconds >= 0 (0: no limit)", v);
            c.budget_s = x;
        } else if (!strcmp(a, "--fail-above")) {
            if (!parse_num(v, 0, &x))
                return bad_option(a, "'%s' is not a number >= 0 (0: never)", v);
            c.fail_above = x;
        } else if (!strcmp(a, "--long-seq")) {
            if (!parse_int(v, 1, INT64_MAX, &n))
                return bad_option(a, "'%s' is not a whole number >= 1", v);
            c.long_seq = n;
        } else if (!strcmp(a, "--csv")) {
            if (!(c.csv = open_out(v))) return 2;
            if (c.csv == stdout) c.table = 0;
        } else { /* --json */
            if (!(c.json = open_out(v))) return 2;
            if (c.json == stdout) c.table = 0;
        }
    }
    if (quick) {
        const int64_t qs[3] = {256, 512, 1024}, qd[1] = {64};
        add_sweep(&c, qs, 3, qd, 1, causal_mask, 2048, 512);
        c.opts.iters = 3, c.opts.warmup = 1, c.budget_s = 2.0;
    } else if (sweep && !c.long_demo) {
        add_sweep(&c, seqs, nseq, dims, ndim, causal_mask, 16384, 2048);
    }
    if (c.nshapes == 0 && !c.long_demo)
        return bad_option("--no-sweep", "no --shape given: nothing to measure");
    if (c.csv) report_csv_header(c.csv);

    /* Every (backend, device) to run, GPUs only for the long demo. A backend
     * or device index that the command line named and that is not here is an
     * error; under --backend all, an unavailable backend is skipped with a
     * note. */
    struct {
        fattn_backend_kind kind;
        int dev;
    } devs[64];
    int ndev = 0, missing = 0, gpus = 0, has_device = 0;
    for (int k = 0; k < 3; k++) {
        const fattn_backend_kind kind = (fattn_backend_kind)(k + 1);
        const char *name = fattn_backend_name(kind);
        if (!c.kinds[k]) continue;
        fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
        const fattn_status st = fattn_backend_get_info(kind, &info);
        if (st != FATTN_OK || !info.available || info.device_count == 0) {
            const char *why = st != FATTN_OK   ? fattn_error_message(NULL)
                              : info.reason[0] ? info.reason
                                               : "no devices";
            if (named_backend) {
                fprintf(stderr, "fattn_bench: --backend %s: not available here: %s\n", name, why);
                missing++;
            } else {
                fprintf(stderr, "fattn_bench: %s: skipped (%s)\n", name, why);
            }
            continue;
        }
        const int n =
            c.long_demo ? (kind == FATTN_BACKEND_CPU ? 0 : info.gpu_count) : info.device_count;
        gpus += c.long_demo ? n : 0;
        if (c.long_demo && n == 0) {
            if (named_backend) {
                fprintf(stderr,
                        "fattn_bench: --backend %s --long: %s has no GPU here (%d device(s), none "
                        "a GPU); the long-sequence demonstration runs on GPUs only\n",
                        name, name, info.device_count);
                missing++;
            }
            continue;
        }
        if (!c.all_devices && c.device >= n) {
            if (named_backend) {
                fprintf(stderr, "fattn_bench: --device %d: %s has %d %s here (0..%d)\n", c.device,
                        name, n, c.long_demo ? "GPU(s)" : "device(s)", n - 1);
                missing++;
            } else {
                fprintf(stderr, "fattn_bench: %s: skipped (no device %d; it has %d)\n", name,
                        c.device, n);
            }
            continue;
        }
        has_device = 1;
        for (int d = 0; d < n && ndev < 64; d++)
            if (c.all_devices || d == c.device) devs[ndev].kind = kind, devs[ndev++].dev = d;
    }
    if (missing) {
        fprintf(stderr, "fattn_bench: nothing measured: what the command line named is missing\n");
        return 1;
    }
    if (c.long_demo && ndev == 0 && (c.all_devices || gpus == 0)) {
        fprintf(stderr,
                "fattn_bench: no GPU here; the long-sequence demonstration runs on GPUs only\n");
        return 0;
    }
    if (!has_device && !c.all_devices) {
        fprintf(stderr, "fattn_bench: --device %d: no backend here has a device %d\n", c.device,
                c.device);
        return 1;
    }
    if (ndev == 0) {
        fprintf(stderr, "fattn_bench: no backend is available here (see the notes above)\n");
        return 1;
    }
    bench_shape long_shape = {1, 16, c.long_seq, 128, 1};
    const bench_shape *shapes = c.long_demo ? &long_shape : c.shapes;
    const int nshapes = c.long_demo ? 1 : c.nshapes;
    bench_opts o = c.opts;
    if (c.long_demo) {
        o.iters = 3, o.warmup = 1, c.budget_s = 0;                      /* no limit */
        if (c.dtypes[0] && c.dtypes[1] && c.dtypes[2]) c.dtypes[1] = 0; /* bf16 and f32 */
    }
    const int total = ndev * nshapes * (c.dtypes[0] + c.dtypes[1] + c.dtypes[2]);
    fprintf(stderr, "fattn_bench: %d device(s), %d shape(s), %d measurement(s)\n", ndev, nshapes,
            total);
    results rs = {0};
    int k = 0;
    const double t0 = now();
    int errors = 0;
    for (int i = 0; i < ndev; i++)
        errors -=
            run_device(&c, devs[i].kind, devs[i].dev, shapes, nshapes, &o, &rs, &k, total, t0);
    if (c.table) report_table(stdout, rs.r, rs.n);
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
