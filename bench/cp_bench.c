/* cp_bench: context parallelism over NCCL on the GPUs of one host, one
 * thread per GPU (ncclCommInitAll). Two modes:
 *   --check   each rank's O and lse against one fattn_forward over the whole
 *             sequence on GPU 0, over a list of configurations (layouts,
 *             transfers, causal, window, GQA, dtypes); exits 1 on a miss.
 *   --scale   a causal pass at each --seqs length on every GPU against one
 *             GPU, and the same schedule with the transfers skipped
 *             (fattn_cp_skip_transfers: wrong numbers, the same work), so
 *             that the time the ring waits on transfers shows. CSV out.
 * NCCL is opened with dlopen (libnccl.so.2), as fattn's CUDA module does;
 * keep NCCL_NVLS_ENABLE=0 where the host asks for it. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cp.h"
#include "fattn.h"
#include "half.h"
#include "test_util.h"

typedef int (*init_all_fn)(void **comms, int ndev, const int *devs);
typedef int (*destroy_fn)(void *comm);

#define MAXG 8
#define TRY(call)                                                                                  \
    do {                                                                                           \
        fattn_status st_ = (call);                                                                 \
        if (st_ != FATTN_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    fattn_status_string(st_));                                                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

typedef struct cfg {
    int64_t batch, hq, hkv, d, n; /* n: whole sequence */
    fattn_dtype dt;
    int causal;
    int64_t wl;
    fattn_cp_layout layout;
    fattn_cp_transfer transfer;
} cfg;

static int G;
static void *comms[MAXG];
static fattn_context *ctxs[MAXG];
static pthread_barrier_t bar;

/* Tensors of one rank (or of the whole sequence). */
typedef struct set {
    fattn_buffer *b[5];
    fattn_tensor t[5]; /* q k v o lse */
} set;

static void set_alloc(fattn_context *ctx, const cfg *c, int64_t n, set *s) {
    const int64_t heads[4] = {c->hq, c->hkv, c->hkv, c->hq};
    const size_t es = fattn_dtype_size(c->dt);
    for (int x = 0; x < 4; x++) {
        TRY(fattn_buffer_alloc(ctx, (size_t)(c->batch * heads[x] * n * c->d) * es, &s->b[x]));
        TRY(fattn_tensor_init(s->b[x], c->dt, FATTN_LAYOUT_BSHD, c->batch, heads[x], n, c->d, 0,
                              &s->t[x]));
    }
    TRY(fattn_buffer_alloc(ctx, (size_t)(c->batch * c->hq * n) * 4, &s->b[4]));
    TRY(fattn_tensor_init_lse(s->b[4], c->batch, c->hq, n, 0, &s->t[4]));
}

static void set_free(set *s) {
    for (int x = 0; x < 5; x++) fattn_buffer_free(s->b[x]);
}

/* Random inputs: a block of random elements, uploaded over and over. */
static void fill(fattn_buffer *b, fattn_dtype dt, uint64_t seed) {
    const size_t bytes = fattn_buffer_size(b), es = fattn_dtype_size(dt);
    const size_t block = bytes < ((size_t)64 << 20) ? bytes : ((size_t)64 << 20);
    unsigned char *h = malloc(block);
    for (size_t i = 0; i < block / es; i++) {
        const float x = uniform(&seed);
        if (dt == FATTN_F32) ((float *)h)[i] = x;
        else ((uint16_t *)h)[i] = dt == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
    }
    for (size_t off = 0; off < bytes; off += block)
        TRY(fattn_buffer_write(b, off, h, bytes - off < block ? bytes - off : block));
    free(h);
}

static fattn_attention_desc desc_of(const cfg *c, int64_t n, fattn_mask_desc *m) {
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = c->batch, d.heads_q = c->hq, d.heads_kv = c->hkv, d.head_dim = c->d;
    d.seq_q = d.seq_kv = n, d.dtype = c->dt;
    d.causal = c->causal ? FATTN_CAUSAL_BOTTOM_RIGHT : FATTN_CAUSAL_NONE;
    *m = (fattn_mask_desc)FATTN_MASK_DESC_INIT;
    m->window_left = c->wl;
    d.mask = c->wl >= 0 ? m : NULL;
    return d;
}

/* ---- The rank threads ------------------------------------------------------ */

typedef struct job {
    int rank;
    const cfg *c;
    set *whole; /* on this rank's device: sliced with fattn_cp_shard (check) */
    set local;
    fattn_cp *cp;
    int iters, skip;
    double ms;
    fattn_cp_info info;
} job;

static job jobs[MAXG];

static void *rank_main(void *arg) {
    job *j = arg;
    const cfg *c = j->c;
    fattn_mask_desc m;
    const int64_t L = c->n / G;
    fattn_attention_desc d = desc_of(c, L, &m);
    fattn_cp_desc cd = FATTN_CP_DESC_INIT;
    cd.layout = c->layout, cd.transfer = c->transfer;
    for (int it = -1; it < j->iters; it++) { /* one warm-up */
        pthread_barrier_wait(&bar);
        const double t0 = now();
        TRY(fattn_cp_forward(j->cp, &cd, &d, &j->local.t[0], &j->local.t[1], &j->local.t[2],
                             &j->local.t[3], &j->local.t[4]));
        TRY(fattn_context_synchronize(ctxs[j->rank]));
        pthread_barrier_wait(&bar);
        if (it >= 0) j->ms += (now() - t0) * 1e3 / j->iters;
    }
    j->info = (fattn_cp_info)FATTN_CP_INFO_INIT;
    TRY(fattn_cp_get_info(j->cp, &j->info));
    return NULL;
}

/* Every rank runs the configuration `iters` times; the time is the mean
 * between barriers, so the slowest rank's. */
static double run_ranks(const cfg *c, int iters, int skip) {
    pthread_t th[MAXG];
    fattn_cp_skip_transfers = skip;
    for (int r = 0; r < G; r++) {
        jobs[r].c = c, jobs[r].iters = iters, jobs[r].ms = 0;
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < G; r++) pthread_join(th[r], NULL);
    fattn_cp_skip_transfers = 0;
    return jobs[0].ms;
}

static double run_single(const cfg *c, set *w, int iters) {
    fattn_mask_desc m;
    fattn_attention_desc d = desc_of(c, c->n, &m);
    double ms = 0;
    for (int it = -1; it < iters; it++) {
        const double t0 = now();
        TRY(fattn_forward(ctxs[0], &d, &w->t[0], &w->t[1], &w->t[2], &w->t[3], &w->t[4]));
        TRY(fattn_context_synchronize(ctxs[0]));
        if (it >= 0) ms += (now() - t0) * 1e3 / iters;
    }
    return ms;
}

static const char *tname(fattn_cp_transfer t) {
    return t == FATTN_CP_TRANSFER_RING ? "ring" : t == FATTN_CP_TRANSFER_ALLGATHER ? "allgather" : "auto";
}

/* ---- --check ------------------------------------------------------------------- */

static double get(const void *p, fattn_dtype t, size_t i) {
    if (t == FATTN_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return t == FATTN_F16 ? fattn_f16_to_f32(h) : fattn_bf16_to_f32(h);
}

static int check(const cfg *c) {
    const size_t es = fattn_dtype_size(c->dt);
    const int64_t L = c->n / G;
    set whole[MAXG];
    /* The whole inputs, the same on every device (same seeds). */
    for (int r = 0; r < G; r++) {
        set_alloc(ctxs[r], c, c->n, &whole[r]);
        for (int x = 0; x < 3; x++) fill(whole[r].b[x], c->dt, 1000 + (uint64_t)x);
    }
    const double single_ms = run_single(c, &whole[0], 0);
    (void)single_ms;
    const int64_t heads[3] = {c->hq, c->hkv, c->hkv};
    for (int r = 0; r < G; r++) {
        set_alloc(ctxs[r], c, L, &jobs[r].local);
        for (int x = 0; x < 3; x++)
            TRY(fattn_cp_shard(ctxs[r], c->layout, G, r, c->batch, heads[x], c->n, c->d,
                               &whole[r].t[x], &jobs[r].local.t[x], 1));
        TRY(fattn_context_synchronize(ctxs[r]));
    }
    run_ranks(c, 0, 0);
    /* Compare: one row of O holds hq * d elements (BSHD). */
    const size_t row = (size_t)(c->hq * c->d);
    unsigned char *one = malloc((size_t)(c->batch * c->n) * row * es), *mine = malloc((size_t)(c->batch * L) * row * es);
    float *one_l = malloc((size_t)(c->batch * c->hq * c->n) * 4), *mine_l = malloc((size_t)(c->batch * c->hq * L) * 4);
    TRY(fattn_buffer_read(whole[0].b[3], 0, one, (size_t)(c->batch * c->n) * row * es));
    TRY(fattn_buffer_read(whole[0].b[4], 0, one_l, (size_t)(c->batch * c->hq * c->n) * 4));
    double err = 0, lerr = 0, scale = 0;
    for (int r = 0; r < G; r++) {
        TRY(fattn_buffer_read(jobs[r].local.b[3], 0, mine, (size_t)(c->batch * L) * row * es));
        TRY(fattn_buffer_read(jobs[r].local.b[4], 0, mine_l, (size_t)(c->batch * c->hq * L) * 4));
        int64_t start[2], len[2];
        int n = 0;
        TRY(fattn_cp_slices(c->layout, G, r, c->n, start, len, &n));
        for (int64_t b = 0; b < c->batch; b++)
            for (int64_t lr = 0, g = 0; g < n; g++)
                for (int64_t i = 0; i < len[g]; i++, lr++) {
                    const int64_t gi = start[g] + i;
                    for (size_t e = 0; e < row; e++) {
                        const double x = get(mine, c->dt, (size_t)(b * L + lr) * row + e);
                        const double y = get(one, c->dt, (size_t)(b * c->n + gi) * row + e);
                        if (!(fabs(x - y) <= err)) err = isnan(x - y) ? INFINITY : fabs(x - y);
                        if (fabs(y) > scale) scale = fabs(y);
                    }
                    for (int64_t h = 0; h < c->hq; h++) {
                        const double x = mine_l[(b * c->hq + h) * L + lr];
                        const double y = one_l[(b * c->hq + h) * c->n + gi];
                        const double dl = x == y ? 0 : fabs(x - y);
                        if (!(dl <= lerr)) lerr = isnan(dl) ? INFINITY : dl;
                    }
                }
    }
    const double tol = c->dt == FATTN_F32 ? 1e-5 : c->dt == FATTN_F16 ? 2e-3 : 1.6e-2;
    const int ok = err <= tol * (scale > 1 ? scale : 1) && lerr <= 1e-3;
    printf("check,%d,%s,%lld,%lldx%lld:%lld,%lld,%s,%s,%s,window=%lld,calls=%lld,O_err=%.3g,"
           "lse_err=%.3g,%s\n",
           G, fattn_dtype_name(c->dt), (long long)c->n, (long long)c->batch, (long long)c->hq,
           (long long)c->hkv, (long long)c->d, c->causal ? "causal" : "full",
           c->layout == FATTN_CP_ZIGZAG ? "zigzag" : "contiguous", tname(jobs[0].info.transfer),
           (long long)c->wl, (long long)jobs[0].info.calls, err, lerr, ok ? "PASS" : "FAIL");
    for (int r = 0; r < G; r++) set_free(&whole[r]), set_free(&jobs[r].local);
    free(one), free(mine), free(one_l), free(mine_l);
    return ok;
}

/* ---- --emulate ------------------------------------------------------------------ */

/* The scaling runs' problem: causal bf16, 16 heads of 128, n tokens, in
 * the layout lp names (zigzag or contiguous), over a ring. */
static cfg scaling_cfg(int64_t n, const char *lp) {
    const int zig = !strncmp(lp, "zigzag", 6);
    const cfg c = {1, 16, 16, 128, n, FATTN_BF16, 1, -1,
                   zig ? FATTN_CP_ZIGZAG : FATTN_CP_CONTIGUOUS, FATTN_CP_TRANSFER_RING};
    return c;
}

/* One GPU's time (ms) for c's whole sequence, the baseline of the scaling. */
static double one_gpu_ms(const cfg *c, int iters) {
    set whole;
    set_alloc(ctxs[0], c, c->n, &whole);
    for (int x = 0; x < 3; x++) fill(whole.b[x], c->dt, 7 + (uint64_t)x);
    const double one = run_single(c, &whole, iters);
    set_free(&whole);
    return one;
}

/* One GPU times every rank's compute for R ranks (fattn_cp_create_solo:
 * the rank's schedule on its own K/V, no transfers), so the scaling the
 * compute allows, max over ranks against one GPU, shows for any R; the
 * per-step compute is what a link must beat to hide a slice's transfer. */
static void emulate(const int64_t *seqs, int nseq, const int *Rs, int nR, const char *layouts,
                    int iters) {
    printf("ranks,layout,seq,ms_one_gpu,ms_rank_max,ms_rank_min,speedup_bound,ms_per_step,"
           "slice_kv_bytes\n");
    for (int s = 0; s < nseq; s++)
        for (const char *lp = layouts; *lp;) {
            cfg c = scaling_cfg(seqs[s], lp);
            const double one = one_gpu_ms(&c, iters);
            for (int ri = 0; ri < nR; ri++) {
                const int R = Rs[ri];
                if (c.n % (2 * R)) continue;
                const int64_t L = c.n / R;
                double mx = 0, mn = 1e30;
                set loc;
                set_alloc(ctxs[0], &c, L, &loc);
                for (int x = 0; x < 3; x++) fill(loc.b[x], c.dt, 7 + (uint64_t)x);
                fattn_mask_desc m;
                fattn_attention_desc d = desc_of(&c, L, &m);
                fattn_cp_desc cd = FATTN_CP_DESC_INIT;
                cd.layout = c.layout, cd.transfer = c.transfer;
                for (int r = 0; r < R; r++) {
                    fattn_cp *cp = NULL;
                    TRY(fattn_cp_create_solo(ctxs[0], R, r, &cp));
                    double ms = 0;
                    /* One warm-up, for the first rank only: every rank runs
                     * the same kernels. */
                    for (int it = r || ri ? 0 : -1; it < iters; it++) {
                        const double t0 = now();
                        TRY(fattn_cp_forward(cp, &cd, &d, &loc.t[0], &loc.t[1], &loc.t[2], &loc.t[3],
                                             &loc.t[4]));
                        TRY(fattn_context_synchronize(ctxs[0]));
                        if (it >= 0) ms += (now() - t0) * 1e3 / iters;
                    }
                    fattn_cp_free(cp);
                    if (ms > mx) mx = ms;
                    if (ms < mn) mn = ms;
                }
                set_free(&loc);
                printf("%d,%s,%lld,%.2f,%.2f,%.2f,%.3f,%.2f,%llu\n", R, c.layout == FATTN_CP_ZIGZAG ? "zigzag" : "contiguous",
                       (long long)c.n, one, mx, mn, one / mx, mx / R,
                       (unsigned long long)(2 * L * c.hkv * c.d * 2));
                fflush(stdout);
            }
            lp = strchr(lp, ',');
            if (!lp) break;
            lp++;
        }
}

int main(int argc, char **argv) {
    int do_check = 0, iters = 3, single_iters = 2, Rs[8] = {0}, nR = 0;
    int64_t seqs[16] = {131072, 524288, 1048576};
    int nseq = 3;
    const char *layouts = "zigzag";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) do_check = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layouts") && i + 1 < argc) layouts = argv[++i];
        else if (!strcmp(argv[i], "--emulate") && i + 1 < argc) {
            for (char *p = argv[++i]; *p && nR < 8; p++) {
                Rs[nR++] = (int)strtol(p, &p, 10);
                if (!*p) break;
            }
        }
        else if (!strcmp(argv[i], "--seqs") && i + 1 < argc) {
            nseq = 0;
            for (char *p = argv[++i]; *p && nseq < 16; p++) {
                seqs[nseq++] = strtoll(p, &p, 10);
                if (!*p) break;
            }
        } else {
            fprintf(stderr, "usage: cp_bench [--check | --emulate R1,R2,..] [--seqs a,b,c] [--iters n] "
                            "[--layouts zigzag,contiguous]\n");
            return 2;
        }
    }
    fattn_backend_info bi;
    memset(&bi, 0, sizeof bi);
    bi.size = sizeof bi;
    TRY(fattn_backend_get_info(FATTN_BACKEND_CUDA, &bi));
    G = bi.device_count > MAXG ? MAXG : bi.device_count;
    if (G < 1) {
        fprintf(stderr, "no CUDA device\n");
        return 2;
    }
    if (nR) {
        TRY(fattn_context_create(FATTN_BACKEND_CUDA, 0, &ctxs[0]));
        printf("# emulated ranks on one GPU: %s\n", fattn_context_device_name(ctxs[0]));
        emulate(seqs, nseq, Rs, nR, layouts, iters);
        fattn_context_free(ctxs[0]);
        return 0;
    }
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "cp_bench needs libnccl.so.2: %s\n", dlerror());
        return 2;
    }
    init_all_fn init_all = (init_all_fn)dlsym(h, "ncclCommInitAll");
    destroy_fn destroy = (destroy_fn)dlsym(h, "ncclCommDestroy");
    int devs[MAXG];
    for (int r = 0; r < G; r++) devs[r] = r;
    if (!init_all || init_all(comms, G, devs) != 0) {
        fprintf(stderr, "ncclCommInitAll failed\n");
        return 2;
    }
    pthread_barrier_init(&bar, NULL, (unsigned)G);
    for (int r = 0; r < G; r++) {
        TRY(fattn_context_create(FATTN_BACKEND_CUDA, r, &ctxs[r]));
        TRY(fattn_cp_create_nccl(ctxs[r], comms[r], &jobs[r].cp));
        jobs[r].rank = r;
    }
    printf("# %d GPUs: %s\n", G, fattn_context_device_name(ctxs[0]));
    int fails = 0;
    if (do_check) {
        const int64_t n0 = 8192 * G;
        const cfg list[] = {
            {1, 16, 16, 128, n0, FATTN_BF16, 1, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_RING},
            {1, 16, 16, 128, n0, FATTN_BF16, 1, -1, FATTN_CP_CONTIGUOUS, FATTN_CP_TRANSFER_RING},
            {1, 16, 16, 128, n0, FATTN_BF16, 0, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_RING},
            {2, 8, 8, 64, n0 / 2 + 2 * G * 3, FATTN_F16, 1, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_RING},
            {1, 32, 4, 128, n0, FATTN_BF16, 1, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_AUTO},
            {1, 32, 4, 128, n0, FATTN_BF16, 1, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_ALLGATHER},
            {1, 8, 8, 128, n0, FATTN_BF16, 1, 3000, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_RING},
            {1, 8, 2, 256, n0 / 4, FATTN_BF16, 1, 700, FATTN_CP_CONTIGUOUS, FATTN_CP_TRANSFER_RING},
            {1, 4, 4, 64, 2 * G * 77, FATTN_F32, 1, -1, FATTN_CP_ZIGZAG, FATTN_CP_TRANSFER_RING},
        };
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) fails += !check(&list[i]);
    } else {
        printf("ranks,layout,seq,transfer,ms_cp,ms_compute_only,ms_one_gpu,speedup,wait_share,calls,bytes_sent\n");
        for (int s = 0; s < nseq; s++)
            for (const char *lp = layouts; *lp;) {
                cfg c = scaling_cfg(seqs[s], lp);
                const double one = one_gpu_ms(&c, single_iters);
                for (int r = 0; r < G; r++) {
                    set_alloc(ctxs[r], &c, c.n / G, &jobs[r].local);
                    for (int x = 0; x < 3; x++) fill(jobs[r].local.b[x], c.dt, 7 + (uint64_t)x + 16 * (uint64_t)r);
                }
                const double ms = run_ranks(&c, iters, 0);
                const double info_calls = (double)jobs[0].info.calls;
                const uint64_t sent = jobs[0].info.bytes_sent;
                const double comp = run_ranks(&c, iters, 1);
                printf("%d,%s,%lld,%s,%.2f,%.2f,%.2f,%.3f,%.3f,%.0f,%llu\n", G,
                       c.layout == FATTN_CP_ZIGZAG ? "zigzag" : "contiguous", (long long)c.n, tname(c.transfer), ms, comp,
                       one, one / ms, ms > comp ? (ms - comp) / ms : 0.0, info_calls,
                       (unsigned long long)sent);
                fflush(stdout);
                for (int r = 0; r < G; r++) set_free(&jobs[r].local);
                lp = strchr(lp, ',');
                if (!lp) break;
                lp++;
            }
    }
    for (int r = 0; r < G; r++) {
        fattn_cp_free(jobs[r].cp);
        fattn_context_free(ctxs[r]);
        if (destroy) destroy(comms[r]);
    }
    return fails ? 1 : 0;
}
