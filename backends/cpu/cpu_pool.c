/* A fork-join loop over work items for the CPU backend: threads take items
 * from a shared atomic counter, so uneven items (causal tiles) balance. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"

typedef struct pool_job {
    atomic_llong next;
    int64_t n;
    size_t scratch_bytes;
    cpu_item_fn fn;
    void *arg;
} pool_job;

static void *pool_worker(void *p) {
    pool_job *job = p;
    float *scratch = job->scratch_bytes ? malloc(job->scratch_bytes) : NULL;
    if (job->scratch_bytes && !scratch) return NULL; /* others take the items */
    for (;;) {
        long long item = atomic_fetch_add(&job->next, 1);
        if (item >= job->n) break;
        job->fn(job->arg, item, scratch);
    }
    free(scratch);
    return NULL;
}

fattn_status cpu_parallel_for(int threads, int64_t n, size_t scratch_bytes, cpu_item_fn fn,
                              void *arg, fattn_msg *msg) {
    pool_job job;
    atomic_init(&job.next, 0);
    job.n = n;
    job.scratch_bytes = scratch_bytes;
    job.fn = fn;
    job.arg = arg;
    if (n <= 0) return FATTN_OK;
    if (threads > n) threads = (int)n;
    if (threads < 1) threads = 1;

    pthread_t tids[1024];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tids[started], NULL, pool_worker, &job) != 0) break;
        started++;
    }
    pool_worker(&job); /* the calling thread works too */
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    /* Items are left undone only if no thread got its scratch. */
    if (atomic_load(&job.next) < n)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate %zu bytes of CPU scratch per thread", scratch_bytes);
    return FATTN_OK;
}
