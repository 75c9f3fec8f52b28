/* A STREAM-style Copy (stream.h): the host's sustainable memory bandwidth,
 * multi-threaded, arrays well above the last-level cache, best of several
 * reps, counted as STREAM counts (bytes read plus bytes written). Each
 * thread copies its slice with memcpy, which glibc streams with
 * non-temporal stores at these sizes, as STREAM built with them; a plain
 * loop's stores would also read their target (write-allocate), moving half
 * again the bytes counted. */
#define _POSIX_C_SOURCE 200809L
#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The smallest array: STREAM asks for four times the caches; 256 MiB is
 * that for a 64 MiB L3, and keeps a rep at tens of milliseconds. */
#define STREAM_MIN_ARRAY ((size_t)256 << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_stream_default_threads(void) {
    /* The bench reads the library's variable to size its own threads as a
     * CPU context made with the defaults does (fattn has no getter for the
     * count it chose). */
    const char *v = getenv("FATTN_CPU_THREADS");
    if (v && *v) {
        char *end;
        const long n = strtol(v, &end, 10);
        if (!*end && n >= 1 && n <= 1024) return (int)n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

/* "32768K", "1M", "512" (bytes) -> bytes; 0 when unreadable. */
static size_t read_size(const char *path) {
    FILE *f = fopen(path, "r");
    char buf[64] = {0};
    if (!f) return 0;
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return 0;
    char *end;
    const unsigned long long n = strtoull(buf, &end, 10);
    const size_t unit = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : *end == 'G' ? 1u << 30 : 1;
    return (size_t)n * unit;
}

/* The last-level caches of every CPU (sysfs), each instance once (by its
 * shared_cpu_list), summed; 0 where sysfs does not say. */
static size_t last_level_cache(void) {
    enum { MAX_INSTANCES = 512 };
    static char seen[MAX_INSTANCES][64];
    int nseen = 0, top = 0;
    size_t total = 0;
    const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    for (long cpu = 0; cpu < (ncpu > 0 ? ncpu : 1); cpu++)
        for (int idx = 0; idx < 10; idx++) {
            char path[128], list[64] = {0};
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cache/index%d/level", cpu,
                     idx);
            FILE *f = fopen(path, "r");
            int level = 0;
            if (!f) break;
            if (fscanf(f, "%d", &level) != 1) level = 0;
            fclose(f);
            if (level < top || level == 0) continue;
            if (level > top) top = level, total = 0, nseen = 0; /* a higher level: start again */
            snprintf(path, sizeof path,
                     "/sys/devices/system/cpu/cpu%ld/cache/index%d/shared_cpu_list", cpu, idx);
            if ((f = fopen(path, "r"))) {
                if (!fgets(list, sizeof list, f)) list[0] = '\0';
                fclose(f);
            }
            int dup = 0;
            for (int i = 0; i < nseen && !dup; i++) dup = strcmp(seen[i], list) == 0;
            if (dup || nseen == MAX_INSTANCES) continue;
            snprintf(seen[nseen++], sizeof seen[0], "%s", list);
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cache/index%d/size", cpu,
                     idx);
            total += read_size(path);
        }
    return total;
}

/* The threads wait at the gate until every one of them was started (go),
 * or leave when one could not be (abort): the barrier counts them all. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 wait, 1 go, 2 abort */
} gate;

typedef struct worker {
    double *a, *c;
    size_t n;
    int reps, id;
    gate *g;
    pthread_barrier_t *bar;
    double *times; /* thread 0 writes one per rep (rep 0 the warm-up) */
} worker;

static void open_gate(gate *g, int state) {
    pthread_mutex_lock(&g->mu);
    g->state = state;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void *run(void *arg) {
    worker *w = arg;
    pthread_mutex_lock(&w->g->mu);
    while (w->g->state == 0) pthread_cond_wait(&w->g->cv, &w->g->mu);
    const int go = w->g->state == 1;
    pthread_mutex_unlock(&w->g->mu);
    if (!go) return NULL;
    for (size_t i = 0; i < w->n; i++) w->a[i] = 1.0 + (double)(i & 1023), w->c[i] = 0.0;
    pthread_barrier_wait(w->bar);
    for (int r = 0; r <= w->reps; r++) {
        double t0 = 0.0;
        pthread_barrier_wait(w->bar);
        if (w->id == 0) t0 = now();
        memcpy(w->c, w->a, w->n * sizeof *w->a);
        pthread_barrier_wait(w->bar);
        if (w->id == 0) w->times[r] = now() - t0;
    }
    return NULL;
}

int bench_stream_copy(int threads, size_t array_bytes, int reps, bench_stream *out, char *why,
                      size_t why_len) {
    memset(out, 0, sizeof *out);
    if (threads < 1) threads = 1;
    if (reps < 1) reps = 1;
    out->l3_bytes = last_level_cache();
    if (array_bytes == 0) {
        array_bytes = 4 * out->l3_bytes > STREAM_MIN_ARRAY ? 4 * out->l3_bytes : STREAM_MIN_ARRAY;
        const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        const size_t cap = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8 : 0;
        if (cap && array_bytes > cap)
            array_bytes = cap > ((size_t)16 << 20) ? cap : (size_t)16 << 20;
    }
    const size_t n = array_bytes / sizeof(double) / (size_t)threads * (size_t)threads;
    double *a = malloc(n * sizeof *a), *c = malloc(n * sizeof *c);
    double *times = calloc((size_t)reps + 1, sizeof *times);
    worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    pthread_barrier_t bar;
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int started = 1, rc = -1;
    if (!a || !c || !times || !w || !tid || n == 0) {
        snprintf(why, why_len, "cannot allocate two arrays of %zu MiB", array_bytes >> 20);
        goto done;
    }
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        const size_t per = n / (size_t)threads;
        w[t] = (worker){a + (size_t)t * per, c + (size_t)t * per, per, reps, t, &g, &bar, times};
    }
    for (int t = 1; t < threads && started; t++)
        if (pthread_create(&tid[t], NULL, run, &w[t]) != 0) {
            snprintf(why, why_len, "cannot start thread %d of %d", t + 1, threads);
            open_gate(&g, 2);
            for (int k = 1; k < t; k++) pthread_join(tid[k], NULL);
            started = 0;
        }
    if (started) {
        open_gate(&g, 1);
        run(&w[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        double best = times[1];
        for (int r = 2; r <= reps; r++)
            if (times[r] < best) best = times[r];
        if (c[0] != a[0] || c[n - 1] != a[n - 1]) {
            snprintf(why, why_len, "the copy came out wrong");
        } else if (best > 0) {
            out->best_s = best;
            out->array_bytes = n * sizeof *a;
            out->gbps = 2.0 * (double)out->array_bytes / best / 1e9;
            out->threads = threads, out->reps = reps;
            rc = 0;
        }
    }
    pthread_barrier_destroy(&bar);
done:
    free(a);
    free(c);
    free(times);
    free(w);
    free(tid);
    return rc;
}
