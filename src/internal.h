/* Core-private definitions: the context and buffer objects, and the helpers
 * the core's files share. Backends never include this. */
#ifndef FATTN_INTERNAL_H
#define FATTN_INTERNAL_H

#include "backend.h"
#include "settings.h"

struct fattn_context {
    const fattn_backend_vtable *vt;
    void *state;  /* the backend's, from vt->open */
    int device;   /* -1 around native OpenCL objects */
    int refs;     /* 1 for the context + 1 per live buffer */
    int released; /* fattn_context_free was called */
    char device_name[512];
    fattn_msg msg;                 /* detail of the last failure */
    fattn_settings_store settings; /* resolved at creation, kept for the backend */
    fattn_tuning tune;             /* context parameters (fattn_context_set_param) */
    void *workspace;               /* the backend's buffer for plans that need scratch, kept */
    uint64_t workspace_bytes;
};

struct fattn_buffer {
    fattn_context *ctx;
    void *mem; /* the backend's handle */
    size_t bytes;
    int owned;     /* 1: fattn allocated it; 0: wraps the caller's memory */
    int read_only; /* made by fattn_buffer_wrap_const */
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

/* ---- Size-first structs (extensible.c) ------------------------------------ */

/* Reads the caller's struct at src into dst, which holds the library's
 * defaults and is `own` bytes. src's size must be `own` or more (the bytes
 * past `own` zero), or one of the n_older sizes an older version of the
 * struct had (older[0], the smallest, is the first version's); copies what
 * both know. `name` is the argument ("desc"), `type` the struct
 * ("fattn_attention_desc"), for the message. */
fattn_status fattn_ext_read(void *dst, size_t own, const void *src, const size_t *older,
                            int n_older, const char *name, const char *type, fattn_msg *msg);
/* The sizes an older struct may have: where each field after the first
 * version's last begins. */
#define FATTN_OLDER(...)                                                                           \
    ((const size_t[]){__VA_ARGS__}), (int)(sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))
/* Writes the library's struct src (own bytes) to the caller's dst, only the
 * fields its size covers (own or more, or one of the older sizes, as for
 * fattn_ext_read); dst's size field is kept. */
fattn_status fattn_ext_write(void *dst, const void *src, size_t own, const size_t *older,
                             int n_older, const char *name, const char *type, fattn_msg *msg);

/* ---- Requests and problems (validate.c) ----------------------------------- */

/* The caller's description read to the library's full structs, with its
 * scalars validated (no context needed). */
typedef struct fattn_request {
    fattn_attention_desc d;
    fattn_mask_desc mask;
    fattn_varlen_desc varlen;
    fattn_paged_kv_desc paged;
    fattn_kv_append_desc append;
    int has_mask, has_varlen, has_paged, has_append;
} fattn_request;

/* Reads and checks desc (sizes, dtype, scale, causal, flags, the
 * sub-descriptions' own fields), and resolves d.head_dim_v (0 becomes
 * head_dim). Used by validation, accounting and flops. */
fattn_status fattn_read_request(const fattn_attention_desc *desc, fattn_request *r, fattn_msg *msg);

/* The one builder of a backend problem: reads and validates the request,
 * and (with tensors, has_operands) every tensor against it, then resolves
 * scale, scale * log2(e), the causal diagonal and the context's tuning.
 * Without operands (q == NULL, for memory reports) only the description is
 * used. Fails with a specific status and a message on ctx. */
fattn_status fattn_build_problem(fattn_context *ctx, fattn_op op, const fattn_attention_desc *desc,
                                 const fattn_tensor *q, const fattn_tensor *k,
                                 const fattn_tensor *v, const fattn_tensor *o,
                                 const fattn_tensor *lse, fattn_request *r, fattn_problem *p);

/* The index tables of a ragged problem (p->rag), read to the host and
 * checked by the rules of src/seam/backend.h: FATTN_ERR_INDEX_TABLE naming
 * the first bad entry. For backends that keep no fault word (take_fault
 * NULL), before every run (tables.c). */
fattn_status fattn_check_tables(fattn_context *ctx, const fattn_problem *p);

/* The problem of a fattn_combine call (op FATTN_OP_COMBINE), validated the
 * same way: sizes, dtypes, every part's bounds, outputs that overlap no part. */
fattn_status fattn_build_combine(fattn_context *ctx, const fattn_combine_desc *desc,
                                 const fattn_tensor *o_parts, const fattn_tensor *lse_parts,
                                 const fattn_tensor *o, const fattn_tensor *lse, fattn_problem *p);

/* Number of (query, key) pairs that are not masked, for a causal diagonal
 * offset off (key j visible to row i iff j <= i + off). */
double fattn_visible_pairs(int64_t seq_q, int64_t seq_kv, int causal, int64_t off);
/* The causal diagonal offset a request implies. */
int64_t fattn_causal_offset(const fattn_attention_desc *d);

#endif /* FATTN_INTERNAL_H */
