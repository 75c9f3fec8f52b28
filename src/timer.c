/* Timers: two marks on the context's queue and the time between them, from
 * the backend's device clock (CUDA events, OpenCL profiling), or the host
 * clock for the synchronous CPU backend, where it is exact. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "internal.h"

struct fattn_timer {
    fattn_context *ctx;
    int host;           /* 1: host clock */
    void *start, *stop; /* the backend's marks */
    double host_start, host_stop;
    int started, stopped;
};

static double host_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

fattn_status fattn_timer_create(fattn_context *ctx, fattn_timer **out) {
    if (!ctx) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "ctx is NULL");
    fattn_ctx_clear(ctx);
    if (!out) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "out (the timer pointer) is NULL");
    *out = NULL;
    const int device_clock = ctx->vt->mark && ctx->vt->mark_elapsed && ctx->vt->mark_free;
    if (!device_clock && ctx->vt->synchronize)
        return fattn_ctx_fail(ctx, FATTN_ERR_UNSUPPORTED, "backend '%s' has no device timer",
                              ctx->vt->name);
    fattn_timer *t = calloc(1, sizeof *t);
    if (!t) return fattn_ctx_fail(ctx, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate a timer");
    t->ctx = ctx;
    t->host = !device_clock;
    ctx->refs++;
    *out = t;
    return FATTN_OK;
}

static void drop_marks(fattn_timer *t) {
    fattn_context *ctx = t->ctx;
    if (t->start) ctx->vt->mark_free(ctx->state, t->start);
    if (t->stop) ctx->vt->mark_free(ctx->state, t->stop);
    t->start = t->stop = NULL;
}

/* Records start (which = 0) or stop (1). */
static fattn_status record(fattn_timer *t, int which) {
    if (!t) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "timer is NULL");
    fattn_context *ctx = t->ctx;
    fattn_ctx_clear(ctx);
    if (which == 1 && !t->started)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "fattn_timer_stop before fattn_timer_start");
    if (which == 0) {
        if (!t->host) drop_marks(t);
        t->started = 0;
    }
    t->stopped = 0; /* until the new mark exists */
    if (t->host) {
        *(which ? &t->host_stop : &t->host_start) = host_seconds();
    } else {
        void **slot = which ? &t->stop : &t->start;
        if (*slot) ctx->vt->mark_free(ctx->state, *slot), *slot = NULL;
        fattn_status st = ctx->vt->mark(ctx->state, slot, &ctx->msg);
        if (st != FATTN_OK) return st;
    }
    *(which ? &t->stopped : &t->started) = 1;
    return FATTN_OK;
}

fattn_status fattn_timer_start(fattn_timer *t) { return record(t, 0); }
fattn_status fattn_timer_stop(fattn_timer *t) { return record(t, 1); }

fattn_status fattn_timer_elapsed_ms(fattn_timer *t, double *ms) {
    if (!t) return fattn_ctx_fail(NULL, FATTN_ERR_NULL_POINTER, "timer is NULL");
    fattn_context *ctx = t->ctx;
    fattn_ctx_clear(ctx);
    if (!ms) return fattn_ctx_fail(ctx, FATTN_ERR_NULL_POINTER, "ms is NULL");
    if (!t->started || !t->stopped)
        return fattn_ctx_fail(ctx, FATTN_ERR_INVALID_ARGUMENT,
                              "the timer was not started and stopped");
    if (t->host) {
        *ms = (t->host_stop - t->host_start) * 1e3;
        return FATTN_OK;
    }
    return ctx->vt->mark_elapsed(ctx->state, t->start, t->stop, ms, &ctx->msg);
}

void fattn_timer_free(fattn_timer *t) {
    if (!t) return;
    fattn_context *ctx = t->ctx;
    if (!t->host) drop_marks(t);
    free(t);
    fattn_context_release(ctx);
}

int fattn_timer_is_device_clock(const fattn_timer *t) { return t && !t->host; }
