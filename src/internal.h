/* Core-private definitions: the context and buffer objects, and the helpers
 * the core's files share. Backends never include this. */
#ifndef FATTN_INTERNAL_H
#define FATTN_INTERNAL_H

#include "backend.h"

struct fattn_context {
    const fattn_backend_vtable *vt;
    void *state;               /* the backend's, from vt->open */
    int device;
    int refs;                  /* 1 for the context + 1 per live buffer */
    int released;              /* fattn_context_free was called */
    char device_name[512];
    fattn_msg msg;             /* detail of the last failure */
};

struct fattn_buffer {
    fattn_context *ctx;
    void *mem;                 /* the backend's handle */
    size_t bytes;
};

/* Drops one reference (buffers and timers hold one); the backend state goes
 * with the last. */
void fattn_context_release(fattn_context *ctx);

/* Records a failure on ctx (or, with ctx NULL, for the calling thread) and
 * returns status. */
fattn_status fattn_ctx_fail(fattn_context *ctx, fattn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Clears the message at the start of a public call. */
void fattn_ctx_clear(fattn_context *ctx);
/* The thread's message for calls without a context. */
fattn_msg *fattn_thread_msg(void);

/* Turns a description and tensors into a backend problem, or fails with a
 * specific status and a message on ctx. Does not ask the backend anything. */
fattn_status fattn_validate(fattn_context *ctx, const fattn_attention_desc *desc,
                            const fattn_tensor *q, const fattn_tensor *k, const fattn_tensor *v,
                            const fattn_tensor *o, const fattn_tensor *lse, fattn_problem *p);

/* Checks the description alone (sizes, dtype, scale, flags, tiles) and
 * writes a message into msg. Used by validation and by accounting. */
fattn_status fattn_validate_desc(const fattn_attention_desc *desc, fattn_msg *msg);

/* Number of (query, key) pairs that are not masked. */
double fattn_visible_pairs(int64_t seq_q, int64_t seq_kv, int causal);

#endif /* FATTN_INTERNAL_H */
