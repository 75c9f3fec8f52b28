/* Issue 16's BLAS question: how fast is f32 attention built on a BLAS's
 * SGEMM (OpenBLAS, single-threaded per call, the blocks spread over
 * OpenMP threads, as PyTorch's CPU attention spreads its blocks), against
 * fattn's CPU backend on the same cores? Per (batch, head) and block of BQ
 * query rows: S = scale Q K^T over all keys (one SGEMM), the row softmax
 * (causal: keys past the diagonal get 0), O = P V (one SGEMM). S is held
 * per block (BQ x seq floats), so this is blocked attention, an upper bound
 * for a flash loop over the same GEMMs (which would add rescaling).
 * Not part of the build: bench/blas/run.sh compiles it against an
 * OpenBLAS it is given. Prints one CSV row per shape: seq, dim, causal,
 * batch, heads, median ms, TFLOP/s (fattn_bench's count). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int);

enum { BQ = 128 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* q, k, v, o: [b][h][s][d] (BHSD) float. */
static void attention(const float *q, const float *k, const float *v, float *o, int b, int h, int s,
                      int d, int causal, float *scratch_all) {
    const int blocks = (s + BQ - 1) / BQ;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(dynamic)
    for (long item = 0; item < (long)b * h * blocks; item++) {
        const long bh = item / blocks;
        const int r0 = (int)(item % blocks) * BQ, nr = s - r0 < BQ ? s - r0 : BQ;
        float *S = scratch_all + (size_t)omp_get_thread_num() * BQ * s;
        const float *Q = q + (bh * s + r0) * (long)d, *K = k + bh * s * (long)d,
                    *V = v + bh * s * (long)d;
        const int nk = causal ? r0 + nr : s; /* keys any row of the block sees */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nk, d, scale, Q, d, K, d, 0.0f,
                    S, nk);
        for (int r = 0; r < nr; r++) {
            float *x = S + (long)r * nk;
            const int n = causal ? r0 + r + 1 : nk;
            float mx = -INFINITY, sum = 0.0f;
            for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
            for (int j = 0; j < n; j++) sum += x[j] = expf(x[j] - mx);
            const float inv = 1.0f / sum;
            for (int j = 0; j < n; j++) x[j] *= inv;
            for (int j = n; j < nk; j++) x[j] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, d, nk, 1.0f, S, nk, V, d, 0.0f,
                    o + (bh * s + r0) * (long)d, d);
    }
}

/* Max |O - reference| over a few rows of (batch 0, head 0), the reference
 * in double: the probe times a correct computation. */
static double check(const float *q, const float *k, const float *v, const float *o, int s, int d,
                    int causal) {
    double worst = 0.0;
    const int rows[3] = {0, s / 2, s - 1};
    double *p = malloc((size_t)s * sizeof *p);
    if (!p) return INFINITY;
    for (int t = 0; t < 3; t++) {
        const int i = rows[t], n = causal ? i + 1 : s;
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < n; j++) {
            double x = 0.0;
            for (int c = 0; c < d; c++) x += (double)q[(long)i * d + c] * k[(long)j * d + c];
            p[j] = x / sqrt((double)d);
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int j = 0; j < n; j++) sum += p[j] = exp(p[j] - mx);
        for (int c = 0; c < d; c++) {
            double x = 0.0;
            for (int j = 0; j < n; j++) x += p[j] * v[(long)j * d + c];
            const double e = fabs(x / sum - o[(long)i * d + c]);
            worst = e > worst ? e : worst;
        }
    }
    free(p);
    return worst;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 3;
    openblas_set_num_threads(1);
    static const int seqs[] = {512, 1024, 2048}, dims[] = {64, 128};
    printf("# BLAS-built attention, %d OpenMP threads, single-threaded OpenBLAS SGEMM\n",
           omp_get_max_threads());
    printf("seq,dim,causal,batch,heads,ms,tflops (outputs checked against a double reference)\n");
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 2; di++)
            for (int causal = 0; causal < 2; causal++) {
                const int s = seqs[si], d = dims[di], b = 16384 / s, h = 2048 / d;
                const size_t n = (size_t)b * h * s * d;
                float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4);
                float *scratch = malloc((size_t)omp_get_max_threads() * BQ * s * 4);
                if (!q || !k || !v || !o || !scratch) return 1;
                srand(1);
                for (size_t i = 0; i < n; i++) {
                    q[i] = (float)rand() / RAND_MAX - 0.5f;
                    k[i] = (float)rand() / RAND_MAX - 0.5f;
                    v[i] = (float)rand() / RAND_MAX - 0.5f;
                }
                double t[16];
                attention(q, k, v, o, b, h, s, d, causal, scratch); /* warm-up */
                const double err = check(q, k, v, o, s, d, causal);
                if (!(err < 1e-4)) {
                    fprintf(stderr, "blas_probe: seq %d dim %d causal %d: max err %.3g\n", s, d,
                            causal, err);
                    return 1;
                }
                for (int it = 0; it < iters && it < 16; it++) {
                    const double t0 = now();
                    attention(q, k, v, o, b, h, s, d, causal, scratch);
                    t[it] = now() - t0;
                }
                qsort(t, (size_t)(iters < 16 ? iters : 16), sizeof t[0], cmp);
                const double med = t[(iters < 16 ? iters : 16) / 2];
                const double flops = 4.0 * b * h * (double)s * s * d * (causal ? 0.5 : 1.0);
                printf("%d,%d,%d,%d,%d,%.3f,%.3f\n", s, d, causal, b, h, med * 1e3,
                       flops / med * 1e-12);
                fflush(stdout);
                free(q), free(k), free(v), free(o), free(scratch);
            }
    return 0;
}
