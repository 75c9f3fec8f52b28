/* fattn_bench: every available backend and device side by side on the
 * FlashAttention papers' sweep (head dim 64 and 128, seq 512 .. 16384,
 * batch*seq = 16384, heads*dim = 2048, causal and not) or the decode sweep
 * (--decode: one query row against a long key/value cache, GQA 32/8 and MHA
 * 32/32), and any shape given on the command line (query and key/value
 * heads, seq_q and seq_kv, a paged K/V cache, a batch of varied lengths),
 * for each dtype. Per (backend, device, shape, dtype): the median time on
 * the device's clock, TFLOP/s, GB/s (Q, K, V and O moved once, as a share
 * of the host's STREAM copy or of the GPU's --hbm-gbps), the error against
 * a float64 reference on sampled rows,
 * the naive baseline, the accounting module's bytes and the device memory
 * each path was measured to hold. Progress goes to stderr, a side-by-side
 * table to stdout, CSV / JSON lines to files. --long: the long-sequence
 * demonstration on each GPU. */
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
#include "stream.h"

enum { MAX_SHAPES = 512, LENS_POOL = 8192, MAX_PAGES = 8 };

/* A path of a cell (tiled, naive) is skipped without a call when a cell no
 * larger in any dimension, earlier on the same backend, device and dtype,
 * already took a call too long for the budget; or when its FLOPs at
 * PRIOR_MARGIN times the best throughput measured so far there, in calls of
 * at least PRIOR_MIN_S (shorter ones are mostly launch overhead), would
 * still pass the budget; that throughput is taken only from cells of the
 * same kind (GQA group, and square or the same seq_q: memory-bound decode
 * cells run at a fraction of a prefill's TFLOP/s, and an MHA decode moves
 * more bytes per FLOP than a GQA one). Every other cell is judged by its own
 * first call (measure.h). */
#define PRIOR_MARGIN 2.0
#define PRIOR_MIN_S 0.01
/* Timed STREAM copies (after one warm-up), as STREAM's NTIMES. */
#define STREAM_REPS 10

typedef struct config {
    int kinds[3], all_devices, device;
    int decode;
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
    double hbm_gbps;   /* --hbm-gbps: a GPU's peak memory bandwidth; 0: not known */
    int stream;        /* measure the host's STREAM copy (--no-stream: 0) */
    bench_stream host; /* what it measured; host.gbps 0: not measured */
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
        "all|LIST]\n"
        "                   [--seqs S1,S2,..] [--dims D1,D2] [--causal both|0|1] [--shape "
        "SHAPE]...\n"
        "                   [--decode [--batches B1,..] [--heads HQ:HKV,..]]\n"
        "                   [--page-size N[,N..]] [--kv-lens L1,L2,.. [--kv-layout "
        "padded|packed]]\n"
        "                   [--no-sweep] [--quick] [--iters N] [--warmup N] [--no-naive] "
        "[--check-rows N]\n"
        "                   [--budget SECONDS] [--csv FILE|-] [--json FILE|-] [--long [--long-seq "
        "N]]\n"
        "                   [--fail-above ERR] [--csv-header] [--hbm-gbps GBPS] [--no-stream]\n"
        "                   [--layout bshd|bhsd] [--variant V[,V..]] [--tf32]\n"
        "                   [--fast-softcap]\n"
        "Default sweep: seq 512..16384, dim 64 and 128, causal and not, batch*seq = 16384, "
        "heads*dim = 2048,\n"
        "every dtype, every backend and device; 10 timed calls after 2 warm-ups.\n"
        "--dtype: all, or a list of f32, f16, bf16 (bf16,f16).\n"
        "--backend/--device: all (the default) skips an unavailable backend with a note; a named\n"
        "  backend or device that is not here is an error (exit status 1).\n"
        "--budget: wall seconds the warm-ups and timed calls of one path (tiled, naive)\n"
        "  may take (default 10; 0: no limit). A cell first runs once, untimed, on a small\n"
        "  problem of its dtype, head dim, GQA group, mask and K/V storage (kernel builds are\n"
        "  not counted); then (warm-ups + timed calls) x its own first call is the estimate (the\n"
        "  faster of the first two calls when the first took at most half the budget). Over the\n"
        "  budget, the path stops there and is reported skipped with the estimate. A path is\n"
        "  skipped unrun when a cell no larger in any dimension, earlier on the same backend,\n"
        "  device and dtype, took a call too long for the budget, or when its FLOPs at 2x the\n"
        "  best throughput measured so far there on cells of its kind (GQA group; square, or the\n"
        "  same seq_q) in calls of 10 ms or more would pass it. A cell whose Q, K, V and O do\n"
        "  not fit the device's free memory (or one buffer's limit) is skipped as 'no room'.\n"
        "--quick: seq 256..1024, dim 64, batch*seq = 2048, heads*dim = 512, 3 calls, budget 2 s\n"
        "  (with --decode: batch 1 and 8, seq_kv 4096 and 16384).\n"
        "--shape: BxHxSxD[c|t], where H may be HQ:HKV (query and key/value heads, GQA) and S\n"
        "  SQ:SKV (query and key/value lengths); c: causal, bottom-right (the API's default:\n"
        "  the last query sees every key), t: causal, top-left (PyTorch's is_causal). Or\n"
        "  named: b=1,hq=32,hkv=8,sq=1,skv=32768,d=128[,causal=0|br|tl] (b defaults to 1, hkv\n"
        "  to hq, skv to sq), with optional page=N (a paged K/V cache), lens=L1/L2/.. (a batch\n"
        "  of varied lengths: b is their count, skv the cache's length, by default the\n"
        "  longest), kv=padded|packed (as --kv-layout) and dtype=f32|f16|bf16 (this shape in\n"
        "  that dtype only, whatever --dtype says). 2x16x4096x128c is batch 2, 16 heads, seq\n"
        "  4096, dim 128, causal; 8x32:8x4:4100x128c is speculative decoding against a cache.\n"
        "  Added to the sweep.\n"
        "--page-size N[,N..]: each shape again with K and V in a paged cache of pages of N keys\n"
        "  (0: contiguous, as it is): K/V [pages, page, heads_kv, dim] in memory (BSHD) behind a\n"
        "  block table whose pages are shuffled, seqused_kv = each sequence's keys\n"
        "  (fattn_paged_kv_desc).\n"
        "--kv-lens L1,L2,..: every dense shape becomes a batch of one sequence per length\n"
        "  (batch = their count, seq_kv the longest; 0 allowed); with --decode, the batches and\n"
        "  seq_kv lists give way to it. --kv-layout padded (the default): K/V padded to seq_kv,\n"
        "  each sequence's keys in seqused_kv; packed: Q, K, V and O of every dense shape packed\n"
        "  without padding through cu_seqlens_q/kv (fattn_varlen_desc), with or without\n"
        "  --kv-lens. A backend that answers FATTN_ERR_UNSUPPORTED to\n"
        "  a paged or variable-length cell gets 'unsupported: <its message>' there (not a\n"
        "  failure) and the run goes on. The check reads K/V through the same table or offsets.\n"
        "--layout bhsd: dense cells lay Q, K, V and O out [batch, heads, seq, dim] (each head's\n"
        "  keys contiguous, as PyTorch's tensors in peers_torch.py) instead of BSHD (the\n"
        "  default, bshd); timing only, with --check-rows 0 (the check reads BSHD).\n"
        "--variant V[,V..]: every cell's forward gets these attention variants (fattn_mask_desc):\n"
        "  window=L (keys at most L before the diagonal; with a causal shape, Mistral's window),\n"
        "  window=L:R (L before, R after; -1 unbounded), softcap=C, alibi (a slope per query\n"
        "  head), sinks (a logit per query head), bias (one [seq_q, seq_kv] plane in the cell's\n"
        "  dtype, stride 0 over batch and heads: seq_q * seq_kv elements of memory), bias=keys\n"
        "  (a bias per key, [batch, 1, 1, seq_kv]: a padding mask, stride 0 over heads and rows).\n"
        "  Timing only: add --check-rows 0. A backend that declines a variant reports the cell\n"
        "  as an error with its message (exit status 1). TFLOP/s still counts the causal pairs\n"
        "  only.\n"
        "--tf32: f32 cells carry FATTN_FLAG_ALLOW_TF32 (TF32 matrix units where a backend has\n"
        "  them; the check's error then shows TF32's 10-bit inputs).\n"
        "--fast-softcap: every cell carries FATTN_FLAG_FAST_SOFTCAP (the softcap's tanh may be\n"
        "  the GPU's approximation, 2^-11 relative).\n"
        "--decode: instead of the papers' sweep, decoding: seq_q 1, not causal, batch\n"
        "  --batches (1,8,64) x seq_kv --seqs (4096,16384,32768,131072) x heads --heads\n"
        "  (32:8 GQA, 32:32 MHA) x dim --dims (64,128), every dtype; the tiled path only (as\n"
        "  --no-naive); the budget rules above skip the cells a slow backend cannot time.\n"
        "--check-rows N: rows compared with the float64 reference (16); 0: no check. They lie\n"
        "  in up to four (batch, head) pairs; where those pairs' sequences hold more than 256\n"
        "  MiB of K and V, only the first and the last pair (first and last batch) are read back\n"
        "  and recomputed, which keeps a 64 x 128k decode cell's check to two sequences.\n"
        "--long: batch 1, 16 heads, dim 128, causal, seq --long-seq (131072) on every GPU, bf16 "
        "and f32\n"
        "  (no GPU here: a note, exit status 0, unless --backend names one).\n"
        "--fail-above: exit status 1 if a sampled error exceeds ERR (or was not checked).\n"
        "--hbm-gbps: the GPUs' peak memory bandwidth (4800 for an H200): GPU rows then give\n"
        "  GB/s as a share of it. Rows of the CPU and of OpenCL CPU devices give it as a share\n"
        "  of the host's STREAM copy, measured once at the start (--no-stream: not measured):\n"
        "  two arrays of max(256 MiB, 4 x the last-level cache), one thread per core (or\n"
        "  FATTN_CPU_THREADS, as the CPU backend), best of 10, read + write bytes counted.\n"
        "Output: TFLOP/s counts 4*B*HQ*D per visible (query, key) pair; GB/s counts the bytes\n"
        "  of Q, K, V and O, each moved once, over the median time (only the keys each sequence\n"
        "  uses). CSV columns after gbps: workspace_bytes, kv_layout, page_size, kv_lens,\n"
        "  stream_gbps, bw_ref (stream or hbm), bw_ref_gbps, bw_pct. A paged or variable-length\n"
        "  cell runs with a workspace the bench allocates (fattn_workspace_size), like any other.\n"
        "Exit status: 0 done; 1 a measurement failed, or a named backend or device is missing;\n"
        "  2 a bad option.\n");
}

/* --variant's list (usage) into o->variant; 0 with *why for a bad item. */
static int parse_variant(const char *v, bench_opts *o, char *why, size_t len) {
    o->variant.on = 1;
    o->variant.window_left = o->variant.window_right = -1;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        const size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char item[64], *end;
        snprintf(item, sizeof item, "%.*s", (int)(n < 63 ? n : 63), p);
        if (!strncmp(item, "window=", 7)) {
            const long long l = strtoll(item + 7, &end, 10);
            long long r = -1;
            if (*end == ':') r = strtoll(end + 1, &end, 10);
            if (end == item + 7 || *end || l < -1 || r < -1) {
                snprintf(why, len, "'%s' is not window=L or window=L:R (each >= -1)", item);
                return 0;
            }
            o->variant.window_left = l, o->variant.window_right = r;
        } else if (!strncmp(item, "softcap=", 8)) {
            o->variant.softcap = strtof(item + 8, &end);
            if (end == item + 8 || *end || !(o->variant.softcap > 0.0f)) {
                snprintf(why, len, "'%s' is not softcap=C with C > 0", item);
                return 0;
            }
        } else if (!strcmp(item, "alibi")) {
            o->variant.alibi = 1;
        } else if (!strcmp(item, "sinks")) {
            o->variant.sinks = 1;
        } else if (!strcmp(item, "bias")) {
            o->variant.bias = 1;
        } else if (!strcmp(item, "bias=keys")) {
            o->variant.bias = 2;
        } else {
            snprintf(why, len, "'%s' is not window=L[:R], softcap=C, alibi, sinks, bias or bias=keys",
                     item);
            return 0;
        }
        if (!comma) return 1;
        p = comma + 1;
    }
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

/* A whole number >= 1 at *p, advancing *p past it. */
static int take_num(const char **p, int64_t *out) {
    char *end;
    if (**p < '0' || **p > '9') return 0;
    errno = 0;
    const long long x = strtoll(*p, &end, 10);
    if (errno == ERANGE || x < 1) return 0;
    *out = x, *p = end;
    return 1;
}

/* The key counts of varied-length batches (--kv-lens, lens=), kept for the
 * whole run: shapes point into it (measure.h). */
typedef struct lens_pool {
    int64_t v[LENS_POOL];
    int n;
} lens_pool;

/* Whole numbers >= 0 in [v, vend), separated by any of `seps`, at least one
 * of them >= 1, appended to the pool: the first of them, their count and
 * largest; NULL when bad (*why says why). */
static const int64_t *parse_lens(const char *v, const char *vend, const char *seps, lens_pool *pool,
                                 int64_t *count, int64_t *max, char *why, size_t len) {
    const int first = pool->n;
    *count = 0, *max = 0;
    for (const char *c = v; c <= vend;) {
        const char *end = c;
        while (end < vend && !strchr(seps, *end)) end++;
        char item[32];
        long long x;
        const size_t k = (size_t)(end - c);
        snprintf(item, sizeof item, "%.*s", (int)(k < sizeof item - 1 ? k : sizeof item - 1), c);
        if (k >= sizeof item || !parse_int(item, 0, INT32_MAX, &x)) {
            snprintf(why, len, "'%.*s' is not a key count (a whole number >= 0)", (int)k, c);
            pool->n = first;
            return NULL;
        }
        if (pool->n == LENS_POOL) {
            snprintf(why, len, "more than %d sequence lengths in all", LENS_POOL);
            pool->n = first;
            return NULL;
        }
        pool->v[pool->n++] = x;
        ++*count;
        if (x > *max) *max = x;
        c = end + 1;
    }
    if (*max < 1) {
        snprintf(why, len, "every sequence has 0 keys: give at least one a key");
        pool->n = first;
        return NULL;
    }
    return &pool->v[first];
}

/* The dtype named v ("f32", "f16", "bf16"), -1 when none. */
static int dtype_named(const char *v, size_t n) {
    static const char *const names[3] = {"f32", "f16", "bf16"};
    for (int k = 0; k < 3; k++)
        if (strlen(names[k]) == n && !strncmp(v, names[k], n)) return k;
    return -1;
}

/* A shape (usage): BxHxSxD[c|t] with H = HQ[:HKV] and S = SQ[:SKV], or
 * named fields (with the K/V storage and the dtype: lens, page, kv, dtype,
 * which need `pool`); 0 when bad, *why saying why. */
static int parse_shape(const char *v, bench_shape *s, lens_pool *pool, char *why, size_t len) {
    bench_shape sh = {1, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
    int64_t nlens = 0, maxlen = 0;
    int b_given = 0;
    if (strchr(v, '=')) {
        for (const char *c = v; *c;) {
            const char *eq = strchr(c, '='), *comma = strchr(c, ',');
            const size_t klen = eq ? (size_t)(eq - c) : 0;
            if (!eq || (comma && comma < eq)) {
                snprintf(why, len, "'%.*s' is not name=value",
                         comma ? (int)(comma - c) : (int)strlen(c), c);
                return 0;
            }
            const char *val = eq + 1, *vend = comma ? comma : val + strlen(val);
            char key[16];
            snprintf(key, sizeof key, "%.*s", (int)(klen < sizeof key ? klen : sizeof key - 1), c);
            if (pool && !strcmp(key, "lens")) {
                if (!(sh.lens = parse_lens(val, vend, "/:", pool, &nlens, &maxlen, why, len)))
                    return 0;
            } else if (pool && !strcmp(key, "kv")) {
                if ((size_t)(vend - val) == 6 && !strncmp(val, "packed", 6))
                    sh.packed = 1;
                else if ((size_t)(vend - val) == 6 && !strncmp(val, "padded", 6))
                    sh.packed = 0;
                else {
                    snprintf(why, len, "kv=%.*s is not padded or packed", (int)(vend - val), val);
                    return 0;
                }
            } else if (pool && !strcmp(key, "dtype")) {
                const int k = dtype_named(val, (size_t)(vend - val));
                if (k < 0) {
                    snprintf(why, len, "dtype=%.*s is not f32, f16 or bf16", (int)(vend - val),
                             val);
                    return 0;
                }
                sh.dtype1 = k + 1;
            } else if (!strcmp(key, "causal")) {
                char cv[16];
                snprintf(cv, sizeof cv, "%.*s", (int)(vend - val < 15 ? vend - val : 15), val);
                if (!strcmp(cv, "0") || !strcmp(cv, "none"))
                    sh.causal = 0;
                else if (!strcmp(cv, "1") || !strcmp(cv, "br"))
                    sh.causal = 1;
                else if (!strcmp(cv, "2") || !strcmp(cv, "tl"))
                    sh.causal = 2;
                else {
                    snprintf(why, len,
                             "causal=%.*s is not 0, br (1, bottom-right) or tl (2, top-left)",
                             (int)(vend - val), val);
                    return 0;
                }
            } else {
                int64_t *f =
                    !strcmp(key, "b") || !strcmp(key, "batch")                         ? &sh.b
                    : !strcmp(key, "h") || !strcmp(key, "hq") || !strcmp(key, "heads") ? &sh.hq
                    : !strcmp(key, "hkv") || !strcmp(key, "heads_kv")                  ? &sh.hkv
                    : !strcmp(key, "s") || !strcmp(key, "sq") || !strcmp(key, "seq")   ? &sh.sq
                    : !strcmp(key, "skv") || !strcmp(key, "seq_kv")                    ? &sh.skv
                    : !strcmp(key, "d") || !strcmp(key, "dim")                         ? &sh.d
                    : pool && !strcmp(key, "page")                                     ? &sh.page
                                                                                       : NULL;
                const char *p = val;
                if (!f) {
                    snprintf(why, len, "'%s' is not b, hq, hkv, sq, skv, d, causal%s", key,
                             pool ? ", lens, page, kv or dtype" : "");
                    return 0;
                }
                b_given |= f == &sh.b;
                if (!take_num(&p, f) || p != vend) {
                    snprintf(why, len, "%s=%.*s is not a whole number >= 1", key, (int)(vend - val),
                             val);
                    return 0;
                }
            }
            c = comma ? comma + 1 : vend;
        }
        if (!sh.hq || !sh.sq || !sh.d) {
            snprintf(why, len, "hq (or h), sq (or s) and d are needed");
            return 0;
        }
        if (sh.lens) {
            if (b_given && sh.b != nlens) {
                snprintf(why, len, "b=%lld but lens gives %lld sequences", (long long)sh.b,
                         (long long)nlens);
                return 0;
            }
            if (sh.skv && sh.skv < maxlen) {
                snprintf(why, len,
                         "skv=%lld (the cache's length) is less than the longest lens %lld",
                         (long long)sh.skv, (long long)maxlen);
                return 0;
            }
            sh.b = nlens;
            if (!sh.skv) sh.skv = maxlen;
        }
        if (sh.packed && sh.page) {
            snprintf(why, len,
                     "kv=packed and page exclude each other (a paged cache takes its "
                     "lengths from seqused_kv)");
            return 0;
        }
    } else {
        const char *p = v;
        int ok = take_num(&p, &sh.b) && *p++ == 'x' && take_num(&p, &sh.hq);
        if (ok && *p == ':') p++, ok = take_num(&p, &sh.hkv);
        ok = ok && *p++ == 'x' && take_num(&p, &sh.sq);
        if (ok && *p == ':') p++, ok = take_num(&p, &sh.skv);
        ok = ok && *p++ == 'x' && take_num(&p, &sh.d);
        if (ok && (*p == 'c' || *p == 't')) sh.causal = *p++ == 'c' ? 1 : 2;
        if (!ok || *p) {
            snprintf(why, len,
                     "not BxHxSxD[c|t] (H may be HQ:HKV, S may be SQ:SKV) with whole numbers >= 1, "
                     "e.g. 2x16x4096x128c or 8x32:8x1:32768x128");
            return 0;
        }
    }
    if (!sh.hkv) sh.hkv = sh.hq;
    if (!sh.skv) sh.skv = sh.sq;
    if (sh.hq % sh.hkv) {
        snprintf(why, len, "query heads %lld are not a multiple of key/value heads %lld",
                 (long long)sh.hq, (long long)sh.hkv);
        return 0;
    }
    *s = sh;
    return 1;
}

/* The shape as --shape takes it: 2x16x4096x128c, 8x32:8x1:32768x128. */
static const char *shape_str(bench_shape sh, char *buf, size_t len) {
    char h[48], q[48];
    if (sh.hq == sh.hkv)
        snprintf(h, sizeof h, "%lld", (long long)sh.hq);
    else
        snprintf(h, sizeof h, "%lld:%lld", (long long)sh.hq, (long long)sh.hkv);
    if (sh.sq == sh.skv)
        snprintf(q, sizeof q, "%lld", (long long)sh.sq);
    else
        snprintf(q, sizeof q, "%lld:%lld", (long long)sh.sq, (long long)sh.skv);
    snprintf(buf, len, "%lldx%sx%sx%lld%s", (long long)sh.b, h, q, (long long)sh.d,
             sh.causal == 2 ? "t"
             : sh.causal    ? "c"
                            : "");
    if (!bench_is_dense(sh)) { /* the K/V storage, as the named form gives it */
        size_t at = strlen(buf);
        if (sh.page) at += (size_t)snprintf(buf + at, len - at, " page=%lld", (long long)sh.page);
        if (sh.packed && at < len) at += (size_t)snprintf(buf + at, len - at, " kv=packed");
        for (int64_t i = 0; sh.lens && i < sh.b && at + 16 < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%lld",
                                   i ? "/" : " lens=", (long long)sh.lens[i]);
    }
    return buf;
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
                c->shapes[c->nshapes++] = bench_square(tokens / s > 0 ? tokens / s : 1,
                                                       width / d > 0 ? width / d : 1, s, d, cz);
            }
        }
}

/* The decode sweep: seq_q 1, not causal; ascending in every dimension
 * within a head dim and head configuration, so that the budget's rules
 * (prior_skip) see the smaller cells first. */
static void add_decode(config *c, const int64_t *batches, int nb, const int64_t *seqs, int nseq,
                       const int64_t *dims, int ndim, const int64_t (*heads)[2], int nh) {
    for (int di = 0; di < ndim; di++)
        for (int hi = 0; hi < nh; hi++)
            for (int bi = 0; bi < nb; bi++)
                for (int si = 0; si < nseq && c->nshapes < MAX_SHAPES; si++)
                    c->shapes[c->nshapes++] = (bench_shape){.b = batches[bi],
                                                            .hq = heads[hi][0],
                                                            .hkv = heads[hi][1],
                                                            .sq = 1,
                                                            .skv = seqs[si],
                                                            .d = dims[di]};
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
    const bench_shape sh = r->shape;
    char h[48], q[48];
    if (sh.hq == sh.hkv)
        snprintf(h, sizeof h, "%lld", (long long)sh.hq);
    else
        snprintf(h, sizeof h, "%lld/%lld", (long long)sh.hq, (long long)sh.hkv);
    if (sh.sq == sh.skv)
        snprintf(q, sizeof q, "%lld", (long long)sh.sq);
    else
        snprintf(q, sizeof q, "%lld/%lld", (long long)sh.sq, (long long)sh.skv);
    fprintf(stderr, "[%3d/%d %5.0fs] %-6s %d %-4s b%-3lld h%-3s seq %-6s d%-3lld %-6s ", k, total,
            now() - t0, r->backend, r->device, bench_dtype_name(r->dtype), (long long)sh.b, h, q,
            (long long)sh.d,
            sh.causal == 2 ? "causal-tl"
            : sh.causal    ? "causal"
                           : "");
    if (!bench_is_dense(sh)) {
        char ss[256];
        const char *kv = strchr(shape_str(sh, ss, sizeof ss), ' ');
        fprintf(stderr, "%s ", kv ? kv + 1 : "");
    }
    if (strcmp(r->status, "ok") != 0)
        fprintf(stderr, "%s: %s\n", r->status, r->note);
    else {
        fprintf(stderr, "%8.3f ms %7.2f TFLOP/s %8.1f GB/s", r->ms, r->tflops, r->gbps);
        if (r->bw_ref_gbps > 0)
            fprintf(stderr, " (%.0f%% of %s)", 100.0 * r->gbps / r->bw_ref_gbps,
                    !strcmp(r->bw_ref, "stream") ? "STREAM" : "HBM");
        if (r->max_err >= 0) fprintf(stderr, "  err %.1e", r->max_err);
        if (r->kernel[0]) fprintf(stderr, "  [%s]", r->kernel);
        if (r->naive_ok)
            fprintf(stderr, "  naive %7.2f TFLOP/s", r->naive_tflops);
        else if (strncmp(r->naive_note, "impossible", 10) == 0)
            fprintf(stderr, "  naive %s", r->naive_note);
        fputc('\n', stderr);
    }
}

/* Whether the cell `sh` is no smaller than `p` in any dimension (a causal
 * cell does less work than the same shape unmasked, and top-left no more
 * than bottom-right where seq_q < seq_kv). */
static int covers(bench_shape sh, bench_shape p) {
    return sh.b >= p.b && sh.hq >= p.hq && sh.hkv >= p.hkv && sh.sq >= p.sq && sh.skv >= p.skv &&
           sh.d >= p.d && (!sh.causal || sh.causal == p.causal || (sh.causal == 1 && p.causal));
}

/* Whether the cells are of one kind for the throughput rule (PRIOR_MARGIN):
 * the same GQA group, and both square (seq_q = seq_kv) or the same seq_q. */
static int same_kind(bench_shape a, bench_shape b) {
    return a.hq / a.hkv == b.hq / b.hkv &&
           ((a.sq == a.skv && b.sq == b.skv) || (a.sq != a.skv && b.sq != b.skv && a.sq == b.sq));
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
            char ps[160];
            snprintf(why, len,
                     "%sa cell no larger (%s) took %.3g s a call: %d calls over --budget %g s",
                     prefix, shape_str(p, ps, sizeof ps), call_s, calls, budget);
            return 1;
        }
        if (call_s >= PRIOR_MIN_S && same_kind(sh, p) && path_flops(p, path) / call_s > best)
            best = path_flops(p, path) / call_s;
    }
    const double est = best > 0 ? calls * path_flops(sh, path) / (PRIOR_MARGIN * best) : 0;
    if (est <= budget) return 0;
    snprintf(why, len,
             "%sestimated %.3g s even at %gx the best %.3g TFLOP/s measured so far here on its "
             "kind, over --budget %g s",
             prefix, est, PRIOR_MARGIN, best / 1e12, budget);
    return 1;
}

/* Whether a shape asks for dtype t of its own (named dtype=). */
static int has_dtype_shape(const bench_shape *shapes, int nshapes, int t) {
    for (int i = 0; i < nshapes; i++)
        if (shapes[i].dtype1 == t + 1) return 1;
    return 0;
}

/* The cells one device runs: each shape in every dtype asked for, or in its
 * own. */
static int cells_per_device(const config *c, const bench_shape *shapes, int nshapes) {
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < nshapes; i++)
            n += shapes[i].dtype1 ? shapes[i].dtype1 == t + 1 : c->dtypes[t];
    return n;
}

/* Measures one device over the shapes and dtypes, each cell's budget judged
 * from the cells before it on the same dtype (prior_skip) and from its own
 * first call (bench_measure). Returns 0, or -1 when no context could be made
 * (said on stderr). */
static int run_device(const config *c, fattn_backend_kind kind, int dev, int host_memory,
                      const bench_shape *shapes, int nshapes, const bench_opts *o, results *rs,
                      int *k, int total, double t0) {
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
                const double per_token = 4.0 * (double)shapes[0].hq * (double)shapes[0].d *
                                         (double)fattn_dtype_size(all[t]);
                fprintf(stderr,
                        "fattn_bench: %s device %d holds Q, K, V and O of up to %.0f tokens in %s "
                        "(%d heads, dim %lld)\n",
                        fattn_backend_name(kind), dev, 0.9 * (double)mem_total / per_token,
                        bench_dtype_name(all[t]), (int)shapes[0].hq, (long long)shapes[0].d);
            }
    const double budget = c->budget_s;
    const int calls = o->warmup + o->iters;
    for (int t = 0; t < 3; t++) {
        if (!c->dtypes[t] && !has_dtype_shape(shapes, nshapes, t)) continue;
        const int first = rs->n; /* this device and dtype's cells start here */
        for (int i = 0; i < nshapes; i++) {
            /* A shape with a dtype of its own runs in that one only. */
            if (shapes[i].dtype1 ? shapes[i].dtype1 - 1 != t : !c->dtypes[t]) continue;
            bench_result *r = push(rs);
            if (!r) break;
            snprintf(r->backend, sizeof r->backend, "%s", fattn_backend_name(kind));
            r->device = dev;
            snprintf(r->device_name, sizeof r->device_name, "%s", fattn_context_device_name(ctx));
            r->dtype = all[t];
            r->shape = shapes[i];
            /* GB/s is read against the host's STREAM copy where the device's
             * memory is the host's, else against --hbm-gbps. */
            r->stream_gbps = c->host.gbps;
            r->bw_ref = "";
            if (host_memory && c->host.gbps > 0)
                r->bw_ref = "stream", r->bw_ref_gbps = c->host.gbps;
            else if (!host_memory && c->hbm_gbps > 0)
                r->bw_ref = "hbm", r->bw_ref_gbps = c->hbm_gbps;
            const bench_result *prev = &rs->r[first];
            const int nprev = rs->n - 1 - first;
            bench_opts oo = *o;
            oo.budget_s = budget;
            oo.host_memory = host_memory;
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
    int nseq = 6, ndim = 2, causal_mask = 3, sweep = 1, quick = 0, seqs_given = 0;
    int64_t batches[16] = {1, 8, 64}, heads[16][2] = {{32, 8}, {32, 32}};
    int nbatch = 3, nheads = 2;
    int named_backend = 0; /* --backend named one: its absence is an error */
    static lens_pool pool; /* shapes point into it until the end */
    const int64_t *kv_lens = NULL;
    int64_t nkv_lens = 0, max_kv_len = 0, pages[MAX_PAGES];
    int npages = 0, kv_packed = 0;
    c.stream = 1;
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
        if (!strcmp(a, "--decode")) {
            c.decode = 1;
            continue;
        }
        if (!strcmp(a, "--tf32")) {
            c.opts.tf32 = 1;
            continue;
        }
        if (!strcmp(a, "--fast-softcap")) {
            c.opts.fast_softcap = 1;
            continue;
        }
        if (!strcmp(a, "--no-stream")) {
            c.stream = 0;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        static const char *const with_value[] = {
            "--backend",   "--device",  "--dtype",     "--seqs",       "--dims",   "--causal",
            "--shape",     "--iters",   "--warmup",    "--check-rows", "--budget", "--fail-above",
            "--long-seq",  "--csv",     "--json",      "--batches",    "--heads",  "--hbm-gbps",
            "--page-size", "--kv-lens", "--kv-layout", "--layout",     "--variant"};
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
        char why[192];
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
            for (int k = 0; k < 3; k++) c.dtypes[k] = !strcmp(v, "all");
            for (const char *p = v; strcmp(v, "all");) {
                const char *comma = strchr(p, ',');
                const size_t len = comma ? (size_t)(comma - p) : strlen(p);
                const int k = dtype_named(p, len);
                if (k < 0)
                    return bad_option(a, "'%.*s' is not all, f32, f16 or bf16 (or a list of them)",
                                      (int)len, p);
                c.dtypes[k] = 1;
                if (!comma) break;
                p = comma + 1;
            }
        } else if (!strcmp(a, "--layout")) {
            if (strcmp(v, "bshd") && strcmp(v, "bhsd"))
                return bad_option(a, "'%s' is not bshd or bhsd", v);
            c.opts.bhsd = !strcmp(v, "bhsd");
        } else if (!strcmp(a, "--variant")) {
            if (!parse_variant(v, &c.opts, why, sizeof why)) return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--hbm-gbps")) {
            if (!parse_num(v, 0, &x) || x <= 0)
                return bad_option(a, "'%s' is not a bandwidth in GB/s > 0", v);
            c.hbm_gbps = x;
        } else if (!strcmp(a, "--page-size")) {
            int64_t list[MAX_PAGES];
            npages = 0;
            for (const char *p = v;;) {
                const char *comma = strchr(p, ',');
                const size_t len = comma ? (size_t)(comma - p) : strlen(p);
                char item[32];
                snprintf(item, sizeof item, "%.*s", (int)(len < 31 ? len : 31), p);
                if (npages == MAX_PAGES) return bad_option(a, "at most %d page sizes", MAX_PAGES);
                if (len > 31 || !parse_int(item, 0, INT32_MAX, &n))
                    return bad_option(a, "'%.*s' is not a page size (keys >= 1, or 0: contiguous)",
                                      (int)len, p);
                list[npages++] = n;
                if (!comma) break;
                p = comma + 1;
            }
            memcpy(pages, list, sizeof list);
        } else if (!strcmp(a, "--kv-lens")) {
            if (!(kv_lens = parse_lens(v, v + strlen(v), ",", &pool, &nkv_lens, &max_kv_len, why,
                                       sizeof why)))
                return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--kv-layout")) {
            if (strcmp(v, "padded") && strcmp(v, "packed"))
                return bad_option(a, "'%s' is not padded or packed", v);
            kv_packed = !strcmp(v, "packed");
        } else if (!strcmp(a, "--seqs")) {
            if (!(nseq = parse_list(v, seqs, 16, why, sizeof why))) return bad_option(a, "%s", why);
            seqs_given = 1;
        } else if (!strcmp(a, "--batches")) {
            if (!(nbatch = parse_list(v, batches, 16, why, sizeof why)))
                return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--heads")) {
            nheads = 0;
            for (const char *p = v;; nheads++) {
                bench_shape hs;
                char item[64];
                const char *comma = strchr(p, ',');
                const size_t len = comma ? (size_t)(comma - p) : strlen(p);
                if (nheads == 16) return bad_option(a, "at most 16 head configurations");
                snprintf(item, sizeof item, "1x%.*sx1x1", (int)(len < 40 ? len : 40), p);
                if (len >= 40 || !parse_shape(item, &hs, NULL, why, sizeof why))
                    return bad_option(a,
                                      "'%.*s' is not HQ:HKV (query and key/value heads, HQ a "
                                      "multiple of HKV) or H",
                                      (int)len, p);
                heads[nheads][0] = hs.hq, heads[nheads][1] = hs.hkv;
                if (!comma) {
                    nheads++;
                    break;
                }
                p = comma + 1;
            }
        } else if (!strcmp(a, "--dims")) {
            if (!(ndim = parse_list(v, dims, 4, why, sizeof why))) return bad_option(a, "%s", why);
        } else if (!strcmp(a, "--causal")) {
            if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "both"))
                return bad_option(a, "'%s' is not both, 0 or 1", v);
            causal_mask = !strcmp(v, "0") ? 1 : !strcmp(v, "1") ? 2 : 3;
        } else if (!strcmp(a, "--shape")) {
            if (c.nshapes == MAX_SHAPES) return bad_option(a, "more than %d shapes", MAX_SHAPES);
            if (!parse_shape(v, &c.shapes[c.nshapes], &pool, why, sizeof why))
                return bad_option(a, "'%s': %s", v, why);
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
    if (c.decode && c.long_demo) return bad_option("--decode", "not with --long");
    if (c.decode) {
        /* The decode sweep's own seq_kv list unless --seqs names one; --quick
         * keeps the two smallest batches and lengths. */
        static const int64_t decode_seqs[4] = {4096, 16384, 32768, 131072};
        if (!seqs_given) {
            memcpy(seqs, decode_seqs, sizeof decode_seqs);
            nseq = 4;
        }
        if (quick) {
            nbatch = nbatch < 2 ? nbatch : 2;
            nseq = nseq < 2 ? nseq : 2;
            c.opts.iters = 3, c.opts.warmup = 1, c.budget_s = 2.0;
        }
        c.opts.naive = 0; /* tiled only */
        if (kv_lens) {    /* one batch: the lengths given */
            batches[0] = nkv_lens, seqs[0] = max_kv_len;
            nbatch = nseq = 1;
        }
        if (sweep) {
            const int room = MAX_SHAPES - c.nshapes;
            if (nbatch * nseq * ndim * nheads > room)
                return bad_option("--decode", "more than %d cells", MAX_SHAPES);
            add_decode(&c, batches, nbatch, seqs, nseq, dims, ndim, (const int64_t(*)[2])heads,
                       nheads);
        }
    } else if (quick) {
        const int64_t qs[3] = {256, 512, 1024}, qd[1] = {64};
        add_sweep(&c, qs, 3, qd, 1, causal_mask, 2048, 512);
        c.opts.iters = 3, c.opts.warmup = 1, c.budget_s = 2.0;
    } else if (sweep && !c.long_demo) {
        add_sweep(&c, seqs, nseq, dims, ndim, causal_mask, 16384, 2048);
    }
    if (c.nshapes == 0 && !c.long_demo)
        return bad_option("--no-sweep", "no --shape given: nothing to measure");
    if (c.opts.bhsd && c.opts.check_rows)
        return bad_option("--layout", "bhsd is timing only: add --check-rows 0");
    if (c.opts.variant.on && c.opts.check_rows)
        return bad_option("--variant", "timing only (the check knows no variant): add "
                                       "--check-rows 0");
    /* --kv-lens and --kv-layout give every dense shape their lengths and
     * storage; --page-size then repeats each dense-layout or padded shape
     * once per page size (0: as it is). */
    for (int i = 0; i < c.nshapes; i++) {
        bench_shape *sh = &c.shapes[i];
        if (!bench_is_dense(*sh)) continue;
        if (kv_lens) sh->lens = kv_lens, sh->b = nkv_lens, sh->skv = max_kv_len;
        sh->packed = kv_packed;
    }
    if (npages) {
        if (kv_packed)
            return bad_option("--page-size", "not with --kv-layout packed (a paged cache takes its "
                                             "lengths from seqused_kv)");
        bench_shape out[MAX_SHAPES];
        int n = 0;
        for (int i = 0; i < c.nshapes; i++)
            for (int k = 0; k < (c.shapes[i].page || c.shapes[i].packed ? 1 : npages); k++) {
                if (n == MAX_SHAPES)
                    return bad_option("--page-size", "more than %d cells", MAX_SHAPES);
                out[n] = c.shapes[i];
                if (!c.shapes[i].page && !c.shapes[i].packed) out[n].page = pages[k];
                n++;
            }
        memcpy(c.shapes, out, (size_t)n * sizeof *out);
        c.nshapes = n;
    }
    if (c.csv) report_csv_header(c.csv);

    /* Every (backend, device) to run, GPUs only for the long demo. A backend
     * or device index that the command line named and that is not here is an
     * error; under --backend all, an unavailable backend is skipped with a
     * note. */
    struct {
        fattn_backend_kind kind;
        int dev, host_memory; /* the device's memory is the host's */
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
            if (c.all_devices || d == c.device) {
                devs[ndev].kind = kind, devs[ndev].dev = d;
                devs[ndev++].host_memory = kind == FATTN_BACKEND_CPU || d >= info.gpu_count;
            }
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
    bench_shape long_shape = bench_square(1, 16, c.long_seq, 128, 1);
    const bench_shape *shapes = c.long_demo ? &long_shape : c.shapes;
    const int nshapes = c.long_demo ? 1 : c.nshapes;
    bench_opts o = c.opts;
    if (c.long_demo) {
        o.iters = 3, o.warmup = 1, c.budget_s = 0;                      /* no limit */
        if (c.dtypes[0] && c.dtypes[1] && c.dtypes[2]) c.dtypes[1] = 0; /* bf16 and f32 */
    }
    const int total = ndev * cells_per_device(&c, shapes, nshapes);
    fprintf(stderr, "fattn_bench: %d device(s), %d shape(s), %d measurement(s)\n", ndev, nshapes,
            total);
    if (c.stream && !c.long_demo) {
        char why[160];
        if (bench_stream_copy(bench_stream_default_threads(), 0, STREAM_REPS, &c.host, why,
                              sizeof why) == 0)
            fprintf(stderr,
                    "fattn_bench: host STREAM copy: %.1f GB/s (%d threads, 2 x %zu MiB arrays, "
                    "last-level cache %zu MiB, best of %d)\n",
                    c.host.gbps, c.host.threads, c.host.array_bytes >> 20, c.host.l3_bytes >> 20,
                    c.host.reps);
        else
            fprintf(stderr, "fattn_bench: host STREAM copy not measured: %s\n", why);
    }
    results rs = {0};
    int k = 0;
    const double t0 = now();
    int errors = 0;
    for (int i = 0; i < ndev; i++)
        errors -= run_device(&c, devs[i].kind, devs[i].dev, devs[i].host_memory, shapes, nshapes,
                             &o, &rs, &k, total, t0);
    if (c.table) report_table(stdout, rs.r, rs.n);
    for (int i = 0; i < rs.n; i++) {
        const bench_result *r = &rs.r[i];
        errors += strcmp(r->status, "error") == 0;
        if (c.fail_above > 0 && strcmp(r->status, "ok") == 0 && !(r->max_err <= c.fail_above)) {
            char ss[160];
            fprintf(stderr, "fattn_bench: %s %d %s %s: error %.3g above --fail-above %.3g\n",
                    r->backend, r->device, bench_dtype_name(r->dtype),
                    shape_str(r->shape, ss, sizeof ss), r->max_err, c.fail_above);
            errors++;
        }
    }
    if (c.csv && c.csv != stdout) fclose(c.csv);
    if (c.json && c.json != stdout) fclose(c.json);
    free(rs.r);
    if (errors) fprintf(stderr, "fattn_bench: %d measurement(s) failed (see the notes)\n", errors);
    return errors != 0;
}
