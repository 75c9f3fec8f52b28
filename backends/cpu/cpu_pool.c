/* The CPU backend's thread pool: one per context, its workers started on
 * the first call that wants them and kept, asleep between calls, until the
 * context is destroyed. A call posts one job; threads take items from a
 * shared atomic counter, so uneven items (causal tiles) balance, and the
 * caller works too. Each thread keeps its scratch from call to call (grown
 * when a call needs more), so a steady stream of forwards allocates nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

/* A thread's scratch: 64-byte aligned for the vector kernels. */
typedef struct pool_scratch {
    float *mem;
    size_t bytes;
} pool_scratch;

typedef struct pool_worker {
    struct cpu_pool *pool;
    int index; /* 1.. (the caller is 0) */
    pthread_t tid;
    pool_scratch scratch;
} pool_worker;

struct cpu_pool {
    pthread_mutex_t call;  /* one job at a time, even if two threads break the one-thread rule */
    pthread_mutex_t lock;  /* guards stop, generation, joining and pending */
    pthread_cond_t wake;   /* a new job, or stop */
    pthread_cond_t done;   /* the last worker of a job finished */
    pid_t pid;             /* the process that made the pool (see cpu_pool_destroy) */
    int started;           /* workers running, in workers[0 .. started); the caller's */
    int stop;
    uint64_t generation;   /* of the posted job */
    int joining;           /* workers with index <= joining take part in it */
    int pending;           /* of them, those not yet finished */
    pool_worker workers[CPU_POOL_MAX - 1];
    pool_scratch caller;
    /* The posted job: written by the caller before the generation moves
     * (under lock), read by the workers after they see it move. */
    atomic_llong next;
    int64_t n;
    size_t scratch_bytes;
    cpu_item_fn fn;
    void *arg;
};

/* Makes s hold at least `bytes`; 0 where it cannot (s then holds nothing). */
static int scratch_reserve(pool_scratch *s, size_t bytes) {
    if (s->bytes >= bytes) return 1;
    free(s->mem);
    s->mem = NULL;
    s->bytes = 0;
    const size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return 0;
    s->mem = aligned_alloc(64, rounded);
    if (!s->mem) return 0;
    s->bytes = rounded;
    return 1;
}

/* Takes items of the posted job until none is left. */
static void take_items(cpu_pool *pool, pool_scratch *s) {
    if (pool->scratch_bytes && !scratch_reserve(s, pool->scratch_bytes))
        return; /* the others take the items */
    for (;;) {
        const long long item = atomic_fetch_add(&pool->next, 1);
        if (item >= pool->n) break;
        pool->fn(pool->arg, item, s->mem);
    }
}

static void *worker_main(void *arg) {
    pool_worker *w = arg;
    cpu_pool *pool = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stop && pool->generation == seen) pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stop) break;
        seen = pool->generation;
        if (w->index > pool->joining) continue; /* this call wants fewer threads */
        pthread_mutex_unlock(&pool->lock);
        take_items(pool, &w->scratch);
        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

cpu_pool *cpu_pool_create(void) {
    cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    if (pthread_mutex_init(&pool->call, NULL)) goto fail_call;
    if (pthread_mutex_init(&pool->lock, NULL)) goto fail_lock;
    if (pthread_cond_init(&pool->wake, NULL)) goto fail_wake;
    if (pthread_cond_init(&pool->done, NULL)) goto fail_done;
    pool->pid = getpid();
    atomic_init(&pool->next, 0);
    return pool;
fail_done:
    pthread_cond_destroy(&pool->wake);
fail_wake:
    pthread_mutex_destroy(&pool->lock);
fail_lock:
    pthread_mutex_destroy(&pool->call);
fail_call:
    free(pool);
    return NULL;
}

void cpu_pool_destroy(cpu_pool *pool) {
    if (!pool) return;
    /* In a child of fork() the workers do not exist (only the forking
     * thread is copied), and the locks may have been copied held: joining
     * or locking would hang, so the child leaves them alone. */
    if (pool->pid == getpid()) {
        pthread_mutex_lock(&pool->lock);
        pool->stop = 1;
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
        for (int i = 0; i < pool->started; i++) pthread_join(pool->workers[i].tid, NULL);
        pthread_cond_destroy(&pool->done);
        pthread_cond_destroy(&pool->wake);
        pthread_mutex_destroy(&pool->lock);
        pthread_mutex_destroy(&pool->call);
    }
    for (int i = 0; i < pool->started; i++) free(pool->workers[i].scratch.mem);
    free(pool->caller.mem);
    free(pool);
}

/* Starts workers until `want` run (fewer where the system refuses). */
static void start_workers(cpu_pool *pool, int want) {
    while (pool->started < want) {
        pool_worker *w = &pool->workers[pool->started];
        memset(w, 0, sizeof *w);
        w->pool = pool;
        w->index = pool->started + 1;
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) return;
        pool->started++;
    }
}

fattn_status cpu_parallel_for(cpu_state *state, int threads, int64_t n, size_t scratch_bytes,
                              cpu_item_fn fn, void *arg, fattn_msg *msg) {
    if (n <= 0) return FATTN_OK;
    if (state->pool->pid != getpid()) {
        /* A child of fork(): the workers stayed in the parent. */
        cpu_pool *fresh = cpu_pool_create();
        if (!fresh)
            return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a CPU thread pool");
        cpu_pool_destroy(state->pool);
        state->pool = fresh;
    }
    cpu_pool *pool = state->pool;
    if (threads > n) threads = (int)n;
    if (threads > CPU_POOL_MAX) threads = CPU_POOL_MAX;
    if (threads < 1) threads = 1;

    pthread_mutex_lock(&pool->call);
    /* No other thread reads the job fields until the generation moves. */
    start_workers(pool, threads - 1);
    const int joining = threads - 1 < pool->started ? threads - 1 : pool->started;
    atomic_store(&pool->next, 0);
    pool->n = n;
    pool->scratch_bytes = scratch_bytes;
    pool->fn = fn;
    pool->arg = arg;
    pthread_mutex_lock(&pool->lock);
    pool->joining = joining;
    pool->pending = joining;
    pool->generation++;
    if (joining) pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    take_items(pool, &pool->caller);

    pthread_mutex_lock(&pool->lock);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    const int left = atomic_load(&pool->next) < n;
    pthread_mutex_unlock(&pool->call);
    /* Items are left undone only if no thread got its scratch. */
    if (left)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate %zu bytes of CPU scratch per thread", scratch_bytes);
    return FATTN_OK;
}
