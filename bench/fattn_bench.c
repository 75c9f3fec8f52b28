/* Throughput of fattn_forward on one backend and device, over the
 * FlashAttention papers' shapes (batch*seq = 16384, heads*dim = 2048) or one
 * shape from the command line, and optionally the naive baseline beside it
 * with the accounting module's bytes for both and the device memory each
 * call was measured to hold. Median of repeated calls after warm-up, timed
 * by the device's clock (fattn_timer: CUDA events, OpenCL profiling) where
 * the backend has one, else on the host around a synchronised call; the
 * clock column says which.
 * Inputs are random (never zeros). Prints one CSV row per shape. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fattn.h"
#include "half.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A CSV field: quoted, inner quotes doubled, line breaks (build logs) as spaces. */
static void put_quoted(const char *text) {
    putchar('"');
    for (const char *c = text; *c; c++) {
        if (*c == '"') putchar('"');
        putchar(*c == '\n' || *c == '\r' ? ' ' : *c);
    }
    putchar('"');
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A buffer of n random elements in [-1, 1]. */
static fattn_status random_buffer(fattn_context *ctx, fattn_dtype t, size_t n, uint64_t seed,
                                  fattn_buffer **out) {
    const size_t es = fattn_dtype_size(t);
    unsigned char *h = malloc(n * es);
    if (!h) return FATTN_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float x = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        if (t == FATTN_F32) memcpy(h + i * 4, &x, 4);
        else {
            uint16_t b = t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
            memcpy(h + i * 2, &b, 2);
        }
    }
    fattn_status st = fattn_buffer_alloc(ctx, n * es, out);
    if (st == FATTN_OK) st = fattn_buffer_write(*out, 0, h, n * es);
    free(h);
    return st;
}

typedef struct shape {
    int64_t b, h, s, d;
    int causal;
} shape;

typedef fattn_status (*forward_fn)(fattn_context *, const fattn_attention_desc *, const fattn_tensor *,
                                   const fattn_tensor *, const fattn_tensor *, const fattn_tensor *,
                                   const fattn_tensor *);

/* Median milliseconds of `iters` forward+synchronize calls after `warmup`
 * calls (2 by default; the first builds or loads the kernels). */
static int warmup = 2;

static const char *clock_used = "host";

static fattn_status median_ms(fattn_context *ctx, forward_fn f, const fattn_attention_desc *d,
                              const fattn_tensor *x, int iters, double *out) {
    double *ms = calloc((size_t)iters, sizeof *ms);
    fattn_status st = ms ? FATTN_OK : FATTN_ERR_OUT_OF_MEMORY;
    /* The device's own clock where the backend has one (CUDA events, OpenCL
     * profiling); else the host clock around a synchronised call. */
    fattn_timer *timer = NULL;
    if (fattn_timer_create(ctx, &timer) != FATTN_OK) timer = NULL;
    clock_used = fattn_timer_is_device_clock(timer) ? "device" : "host";
    for (int i = -warmup; i < iters && st == FATTN_OK; i++) {
        double t0 = now(), dev_ms = 0.0;
        if (timer) st = fattn_timer_start(timer);
        if (st == FATTN_OK) st = f(ctx, d, &x[0], &x[1], &x[2], &x[3], NULL);
        if (st == FATTN_OK && timer) st = fattn_timer_stop(timer);
        if (st == FATTN_OK && timer) st = fattn_timer_elapsed_ms(timer, &dev_ms);
        if (st == FATTN_OK) st = fattn_context_synchronize(ctx);
        if (i >= 0) ms[i] = timer ? dev_ms : (now() - t0) * 1e3;
    }
    fattn_timer_free(timer);
    if (st == FATTN_OK) {
        qsort(ms, (size_t)iters, sizeof *ms, cmp_double);
        *out = ms[iters / 2];
    }
    free(ms);
    return st;
}

/* Device memory the call holds while it runs: the reading right after the
 * (asynchronous) call returns, before synchronising, minus the one before the
 * call, after synchronising. "" where the backend cannot measure; about 0 on
 * synchronous backends (the CPU), which free before returning. */
static void print_grown(fattn_context *ctx, forward_fn f, const fattn_attention_desc *d, const fattn_tensor *x) {
    uint64_t used0, used1, total;
    fattn_status st = fattn_context_synchronize(ctx);
    if (st == FATTN_OK) st = fattn_context_device_memory(ctx, &used0, &total);
    if (st == FATTN_OK) st = f(ctx, d, &x[0], &x[1], &x[2], &x[3], NULL);
    if (st == FATTN_OK) st = fattn_context_device_memory(ctx, &used1, &total);
    fattn_context_synchronize(ctx);
    if (st == FATTN_OK) printf("%llu,", (unsigned long long)(used1 > used0 ? used1 - used0 : 0));
    else printf(",");
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

/* Times the naive baseline and compares its output with the tiled kernel's,
 * which `o` holds on entry: a check that both ran on the same data. */
static fattn_status max_diff_after(fattn_context *ctx, const fattn_attention_desc *d, const fattn_tensor *x,
                                   fattn_buffer *o, size_t n, int iters, double *ms, double *diff) {
    const size_t bytes = n * fattn_dtype_size(d->dtype);
    unsigned char *tiled = malloc(bytes), *naive = malloc(bytes);
    fattn_status st = tiled && naive ? fattn_buffer_read(o, 0, tiled, bytes) : FATTN_ERR_OUT_OF_MEMORY;
    if (st == FATTN_OK) st = median_ms(ctx, fattn_forward_naive, d, x, iters, ms);
    if (st == FATTN_OK) st = fattn_buffer_read(o, 0, naive, bytes);
    *diff = 0.0;
    for (size_t i = 0; st == FATTN_OK && i < n; i++) {
        const double e = fabs((double)elem(tiled, d->dtype, i) - (double)elem(naive, d->dtype, i));
        if (!(e <= *diff)) *diff = e;   /* NaN wins */
    }
    free(tiled);
    free(naive);
    return st;
}

static int bench_one(fattn_context *ctx, const char *label, fattn_dtype t, shape sh, int iters, int naive) {
    fattn_attention_desc d = {.batch = sh.b, .heads_q = sh.h, .heads_kv = sh.h, .seq_q = sh.s,
                              .seq_kv = sh.s, .head_dim = sh.d, .dtype = t, .causal = sh.causal};
    const size_t n = (size_t)(sh.b * sh.h * sh.s * sh.d);
    fattn_buffer *buf[4] = {0};
    fattn_tensor x[4];
    fattn_status st = FATTN_OK;
    for (int i = 0; i < 4 && st == FATTN_OK; i++) {
        st = random_buffer(ctx, t, n, 1234 + (uint64_t)i, &buf[i]);
        if (st == FATTN_OK) st = fattn_tensor_init(&x[i], buf[i], t, FATTN_LAYOUT_BSHD, sh.h, sh.s, sh.d);
    }
    double med = 0.0, naive_ms = 0.0;
    fattn_memory_report mem = {0};
    if (st == FATTN_OK) st = median_ms(ctx, fattn_forward, &d, x, iters, &med);
    if (st == FATTN_OK) st = fattn_context_memory_report(ctx, &d, &mem);
    const char *dt = t == FATTN_F32 ? "f32" : t == FATTN_F16 ? "f16" : "bf16";
    printf("%s,", label);
    put_quoted(fattn_context_device_name(ctx));
    printf(",%s,%lld,%lld,%lld,%lld,%d,", dt, (long long)sh.b, (long long)sh.h, (long long)sh.s, (long long)sh.d,
           sh.causal);
    if (st != FATTN_OK) {
        printf("error,,,,,,,,,");
        put_quoted(fattn_error_message(ctx));
        putchar('\n');
    } else {
        printf("%.4f,%.3f,%llu,%llu,", med, fattn_flops(&d) / (med * 1e-3) / 1e12,
               (unsigned long long)mem.flash_bytes, (unsigned long long)mem.naive_bytes);
        print_grown(ctx, fattn_forward, &d, x);
        /* The naive baseline is optional and may not fit: its failure is a value, not an error. */
        double diff = -1.0;
        fattn_status ns = naive ? max_diff_after(ctx, &d, x, buf[3], n, iters, &naive_ms, &diff)
                                : FATTN_ERR_UNSUPPORTED;
        if (ns == FATTN_OK) {
            printf("%.4f,%.3f,", naive_ms, fattn_flops(&d) / (naive_ms * 1e-3) / 1e12);
            print_grown(ctx, fattn_forward_naive, &d, x);
            printf("%s,max |O_naive - O_tiled| = %.3g\n", clock_used, diff);
        } else {
            printf(",,,%s,", clock_used);
            put_quoted(naive ? fattn_error_message(ctx) : "");
            putchar('\n');
        }
    }
    fflush(stdout);
    for (int i = 0; i < 4; i++) fattn_buffer_free(buf[i]);
    return st != FATTN_OK;
}

static void usage(void) {
    fprintf(stderr,
            "usage: fattn_bench [--backend cpu|cuda|opencl] [--device N] [--dtype f32|f16|bf16|all]\n"
            "                   [--seq S --dim D [--batch B --heads H] [--causal]] [--iters N]\n"
            "                   [--warmup N] [--naive]   (--naive: also time fattn_forward_naive)\n"
            "                   [--seqs S1,S2,...]\n"
            "Without --seq: seq 4096 and 8192 (or --seqs), dim 64 and 128, causal and not, batch*seq = 16384,\n"
            "heads*dim = 2048.\n");
}

int main(int argc, char **argv) {
    fattn_backend_kind kind = FATTN_BACKEND_AUTO;
    int device = -1, iters = 10, causal = 0, naive = 0;
    int64_t seq = 0, dim = 128, batch = 0, heads = 0;
    int64_t seqs[8] = {4096, 8192};
    int nseqs = 2;
    const char *dts = "all";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--causal")) { causal = 1; continue; }
        if (!strcmp(a, "--naive")) { naive = 1; continue; }
        if (!v) { usage(); return 2; }
        i++;
        if (!strcmp(a, "--backend")) {
            if (fattn_backend_from_name(v, &kind) != FATTN_OK) { usage(); return 2; }
        } else if (!strcmp(a, "--device")) device = atoi(v);
        else if (!strcmp(a, "--dtype")) dts = v;
        else if (!strcmp(a, "--seq")) seq = atoll(v);
        else if (!strcmp(a, "--seqs")) {   /* the sweep's sequence lengths, comma-separated */
            nseqs = 0;
            for (const char *c = v; *c && nseqs < 8; c = strchr(c, ',') ? strchr(c, ',') + 1 : "")
                if (atoll(c) > 0) seqs[nseqs++] = atoll(c);
            if (!nseqs) { usage(); return 2; }
        }
        else if (!strcmp(a, "--dim")) dim = atoll(v);
        else if (!strcmp(a, "--batch")) batch = atoll(v);
        else if (!strcmp(a, "--heads")) heads = atoll(v);
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v) < 0 ? 0 : atoi(v);
        else { usage(); return 2; }
    }
    if (iters < 1) iters = 1;
    fattn_context *ctx;
    if (fattn_context_create(&ctx, kind, device) != FATTN_OK) {
        fprintf(stderr, "fattn_bench: %s\n", fattn_error_message(NULL));
        return 1;
    }
    shape shapes[2 * 8 * 2];
    int ns = 0;
    if (seq > 0) {
        shapes[ns++] = (shape){batch ? batch : (16384 / seq > 0 ? 16384 / seq : 1),
                               heads ? heads : (2048 / dim > 0 ? 2048 / dim : 1), seq, dim, causal};
    } else {
        for (int64_t d = 64; d <= 128; d *= 2)
            for (int i = 0; i < nseqs; i++)
                for (int c = 0; c < 2; c++) {
                    const int64_t s = seqs[i];
                    shapes[ns++] = (shape){16384 / s > 0 ? 16384 / s : 1, 2048 / d, s, d, c};
                }
    }
    const fattn_dtype all[3] = {FATTN_F32, FATTN_F16, FATTN_BF16};
    int failures = 0;
    printf("backend,device,dtype,batch,heads,seq,dim,causal,ms,tflops,flash_bytes,naive_bytes,"
           "flash_measured_bytes,naive_ms,naive_tflops,naive_measured_bytes,clock,note\n");
    for (int t = 0; t < 3; t++) {
        const char *names[3] = {"f32", "f16", "bf16"};
        if (strcmp(dts, "all") && strcmp(dts, names[t])) continue;
        for (int i = 0; i < ns; i++)
            failures += bench_one(ctx, fattn_context_backend_name(ctx), all[t], shapes[i], iters, naive);
    }
    fattn_context_free(ctx);
    return failures != 0;
}
