/* The private contract between the core and a backend: the vtable a backend
 * fills, and the resolved problem it receives. GPU backends are separate
 * modules (dlopen) that include only this header and fattn.h, so everything
 * here is plain data or static inline. */
#ifndef FATTN_BACKEND_H
#define FATTN_BACKEND_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fattn.h"

/* Bumped whenever this header changes incompatibly; the core refuses a
 * module built against another value. */
#define FATTN_BACKEND_ABI 13
/* The one symbol a backend module exports: const fattn_backend_vtable *f(void). */
#define FATTN_MODULE_SYMBOL "fattn_backend_module_v1"

/* Limits and constants every backend uses, named once. */
#define FATTN_INT32_MAX ((int64_t)0x7fffffff) /* kernels index rows and keys with 32-bit ints */
#define FATTN_LOG2E_F 1.4426950408889634f     /* kernels fold scale * log2(e) and use exp2 */

/* Backend names, indexed by fattn_backend_kind; inline so that modules,
 * which link none of the core, can parse them too. */
static const char *const fattn_backend_names[FATTN_BACKEND_COUNT] = {"auto", "cpu", "cuda",
                                                                     "opencl"};

static inline int fattn_parse_backend(const char *name, fattn_backend_kind *out) {
    for (int i = 0; i < FATTN_BACKEND_COUNT; i++) {
        const char *a = name, *b = fattn_backend_names[i];
        while (*a && *b && (*a | 0x20) == *b) a++, b++; /* names are lower-case letters */
        if (!*a && !*b) {
            *out = (fattn_backend_kind)i;
            return 1;
        }
    }
    return 0;
}

/* Where a backend writes the detail of a failure. The core shows it through
 * fattn_error_message(). */
typedef struct fattn_msg {
    char text[4096];
} fattn_msg;

/* Formats the message and returns `status`, so a backend can write
 * `return fattn_fail(msg, FATTN_ERR_DEVICE, "clEnqueue...: %d", err);`. */
static inline fattn_status fattn_fail(fattn_msg *msg, fattn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline fattn_status fattn_fail(fattn_msg *msg, fattn_status status, const char *fmt, ...) {
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Settings a backend reads, resolved by the core: the value the caller set
 * through the API, else the environment variable, else the default. Modules
 * never read the environment themselves. Strings live as long as the
 * context (or the call, for probe and device_name). */
typedef struct fattn_settings {
    int cpu_threads;              /* CPU: worker threads; 0 = every core */
    const char *opencl_platform;  /* OpenCL: platform filter, index or name substring; NULL = any */
    const char *opencl_device;    /* OpenCL: device filter; NULL = any */
    const char *cache_dir;        /* OpenCL: program cache directory; NULL = default, "off" */
    const char *cache_dir_origin; /* who named it, for messages; NULL when default */
    const char *home, *xdg_cache; /* for the default cache directory */
    /* Kernel-development knobs, environment only (FATTN_KERNEL_DIR,
     * FATTN_OPENCL_OPTIONS, FATTN_OPENCL_TILES, FATTN_CUDA_SMALL_TILES). */
    const char *kernel_dir;
    const char *opencl_options;
    const char *opencl_tiles;
    const char *decode_tune; /* FATTN_DECODE_TUNE: "name=value,..." for the decode paths */
    int cuda_small_tiles;
    /* FATTN_CUDA_KERNEL: "auto" (NULL), "wgmma" or "mma": which CUDA kernel
     * takes f16/bf16 prefill on compute 9.0 (backends/cuda/cuda_plan.c;
     * auto is mma.sync while the wgmma kernel is brought up). */
    const char *cuda_kernel;
    /* FATTN_OPENCL_MATRIX: "auto" (NULL), "off" or "emulate": the OpenCL
     * matrix path's primitive choice (backends/opencl/ocl_mma.c). */
    const char *opencl_matrix;
    /* FATTN_OPENCL_MATRIX_TUNE: "name=value,..." overriding the matrix
     * kernel's tiles in every head-dim bucket (for sweeps). */
    const char *opencl_matrix_tune;
    /* FATTN_CPU_ISA: "auto" (NULL), "amx", "avx512", "avx2", "neon" or "portable": the most
     * the CPU backend's kernels may use (backends/cpu; for tests and
     * comparisons). */
    const char *cpu_isa;
} fattn_settings;

/* The value of `name` in a FATTN_DECODE_TUNE-style list "a=1,b=2" (a
 * kernel-development knob), else def. A malformed value is def too. */
static inline long fattn_tune_value(const char *list, const char *name, long def) {
    const size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        if (!strncmp(p, name, n) && p[n] == '=') {
            char *end;
            const long v = strtol(p + n + 1, &end, 10);
            return end != p + n + 1 && (*end == ',' || !*end) ? v : def;
        }
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return def;
}

/* What open() receives: the device and settings, and the caller's native
 * objects when the context is built around them (see fattn_context_params). */
typedef struct fattn_open_args {
    int device;
    const fattn_settings *settings;
    void *native_device;  /* OpenCL cl_device_id */
    void *native_context; /* OpenCL cl_context */
    void *native_queue;   /* OpenCL cl_command_queue, CUDA cudaStream_t */
    int native_current;   /* CUDA: use the calling thread's current context */
} fattn_open_args;

/* The operations a backend plans. A new op (split-forward, combine,
 * backward) is a new value here and rows in the backends' variant tables. */
typedef enum fattn_op {
    FATTN_OP_FORWARD = 0,       /* tiled online softmax */
    FATTN_OP_FORWARD_NAIVE = 1, /* materialised S and P, the baseline */
    FATTN_OP_COMBINE = 2,       /* merge partial results by log-sum-exp (fattn_combine) */
    FATTN_OP_COUNT
} fattn_op;

/* One operand after validation: the backend's own buffer handle plus element
 * offsets. Strides are in elements; stride_dim is always 1. */
typedef struct fattn_operand {
    void *mem;
    int64_t offset;
    int64_t stride_batch, stride_head, stride_seq;
} fattn_operand;

/* Tuning the caller may set on a context (fattn_context_set_param). */
typedef struct fattn_tuning {
    int tile_q, tile_kv; /* 0 = backend default */
    int cpu_threads;     /* CPU: threads for this call; 0 = as opened */
    int kv_splits;       /* key splits: 0 = the backend's choice, 1 = never */
} fattn_tuning;

/* Variable-length batches and paged K/V caches (desc->varlen, desc->paged_kv)
 * after validation. The index tables are int32 operands (mem NULL when not
 * given): cu_seqlens element i at offset + i * stride_seq, block_table
 * element (b, p) at offset + b * stride_batch + p * stride_seq. One
 * definition of sequence b, for every backend (fattn_seq_resolve below is
 * the host's; the kernels carry the same rules):
 * - query rows: with cu_seqlens_q, rows cu_q[b] .. cu_q[b+1]-1 of Q, O and
 *   lse at batch index 0; without, rows 0 .. seq_q-1 at batch index b;
 * - keys: with cu_seqlens_kv, rows cu_kv[b] .. of K and V at batch index 0,
 *   cu_kv[b+1] - cu_kv[b] of them; paged, key j in slot j % page_size of
 *   page block_table[b][j / page_size] (the page is K's and V's batch
 *   index); otherwise rows 0 .. at batch index b, seq_kv of them;
 *   seqused_kv[b], when given, replaces the count (a padded cache), plus
 *   keys_added, the keys an append wrote after them (fattn_append);
 * - causal alignment per sequence: bottom-right offset len_kv - len_q,
 *   top-left 0.
 * A table is bad when an offset is negative, decreases or passes its total,
 * a sequence is longer than seq_q / seq_kv (the longest, which size the
 * launch), seqused_kv[b] is negative, or it plus keys_added is more keys
 * than the sequence holds
 * (its cu_seqlens_kv span, else seq_kv, paged or not), or a page
 * a used key lies in is outside 0 .. num_pages-1. Host-visible tables are
 * checked before the call (fattn_check_tables, FATTN_ERR_INDEX_TABLE);
 * kernels that read device-resident ones never follow a bad entry: they set
 * the FATTN_FAULT_* bit of the table in the context's fault word and treat
 * what the entry names as absent (a bad query span writes no row, a bad
 * key count gives the sequence's rows no keys, a key on a bad page is
 * skipped), and the backend's take_fault() reports it at the next
 * synchronising call. */
typedef struct fattn_ragged {
    int on; /* 1 when any table below is given, or the cache is paged */
    fattn_operand cu_seqlens_q, cu_seqlens_kv, seqused_kv, block_table;
    int64_t total_q, total_kv;                   /* packed rows, with cu_seqlens */
    int64_t page_size, num_pages, pages_per_seq; /* page_size 0: K and V are not paged */
    int top_left;                                /* causal alignment (p->causal says if any) */
    int64_t keys_added; /* keys appended after seqused_kv[b] (fattn_append's seq_new), else 0 */
} fattn_ragged;

/* Bits of a backend's fault word, one per table. */
#define FATTN_FAULT_CU_SEQLENS_Q 1u
#define FATTN_FAULT_CU_SEQLENS_KV 2u
#define FATTN_FAULT_SEQUSED_KV 4u
#define FATTN_FAULT_BLOCK_TABLE 8u

/* The status and message for a fault word's bits (nonzero). */
static inline fattn_status fattn_fault_fail(unsigned bits, fattn_msg *msg) {
    return fattn_fail(msg, FATTN_ERR_INDEX_TABLE,
                      "a kernel found a bad entry in%s%s%s%s (an offset that decreases or passes "
                      "its total, a length over seq_q/seq_kv or over the cache, or a page outside "
                      "0..num_pages-1); what it named was left out of the result, which is not "
                      "valid for those sequences",
                      bits & FATTN_FAULT_CU_SEQLENS_Q ? " desc->varlen->cu_seqlens_q" : "",
                      bits & FATTN_FAULT_CU_SEQLENS_KV ? " desc->varlen->cu_seqlens_kv" : "",
                      bits & FATTN_FAULT_SEQUSED_KV ? " desc->varlen->seqused_kv" : "",
                      bits & FATTN_FAULT_BLOCK_TABLE ? " desc->paged_kv->block_table" : "");
}

/* The attention variants of desc->mask after validation (fattn.h's
 * fattn_mask_desc states the rules; fattn_seq_keys below is the host form
 * of the visible keys, causal and window together). The operands are float32 except the bias
 * (bias_dtype); mem NULL: not given.
 * - window: key j is visible to row i of a sequence iff
 *   i + off - window_left <= j <= i + off + window_right, off = len_kv -
 *   len_q of the sequence (bottom-right, whatever the causal alignment);
 *   -1 unbounded on that side; both -1: no window. With causal, both apply.
 * - softcap > 0: s = softcap * tanh(s / softcap) on the scaled score, first.
 * - alibi: slope (b, h) at offset + b * stride_batch + h * stride_head;
 *   s -= slope * |i + off - j|.
 * - bias: element (b, h, i, j) at offset + b * stride_batch + h *
 *   stride_head + i * stride_seq + j * bias_stride_dim, i and j within
 *   sequence b; s += bias.
 * - sinks: element h at offset + h * stride_head: a logit that joins the
 *   row's softmax denominator with no value row (applied once per row, at
 *   the end; a split-KV path adds it at the merge).
 * on is 1 when any of them is set; with on 0 the rest is not read (a
 * zeroed struct asks for nothing). */
typedef struct fattn_variants {
    int on;
    int64_t window_left, window_right;
    float softcap;
    fattn_operand alibi;
    fattn_operand sinks;
    fattn_operand bias;
    int64_t bias_stride_dim;
    fattn_dtype bias_dtype;
} fattn_variants;

/* Bits naming the variants (and head_dim_v != head_dim), for
 * fattn_variants_declined. */
#define FATTN_VAR_WINDOW 1u
#define FATTN_VAR_SOFTCAP 2u
#define FATTN_VAR_ALIBI 4u
#define FATTN_VAR_SINKS 8u
#define FATTN_VAR_BIAS 16u
#define FATTN_VAR_HEAD_DIM_V 32u

/* A validated attention problem (FlashAttention-2's Flash_fwd_params idea),
 * built by one function (fattn_build_problem) for validation, accounting and
 * execution alike: sizes, the resolved scale, the causal diagonal, and the
 * operands (absent, has_operands 0, when only planning for a report). */
typedef struct fattn_problem {
    fattn_op op;
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
    int64_t head_dim_v; /* of V and O: desc->head_dim_v, else head_dim; always set */
    fattn_dtype dtype;
    float scale;      /* resolved: never 0 unless the caller asked for it */
    float scale_log2; /* scale * log2(e), for kernels that use exp2 */
    int causal;       /* 1 when a causal mask applies */
    /* With causal, key j is visible to query row i iff j <= i + causal_offset:
     * seq_kv - seq_q for bottom-right alignment, 0 for top-left. */
    int64_t causal_offset;
    unsigned flags; /* FATTN_FLAG_* */
    fattn_tuning tune;
    int has_operands;
    fattn_operand q, k, v, o, lse;
    int has_lse;
    /* FATTN_OP_COMBINE: `parts` partial results; part p of O is part_o
     * (dtype part_dtype, shaped like o: [batch, heads_q, seq_q, head_dim])
     * moved by p * part_o_stride elements, part p of lse is part_lse
     * (float32) moved by p * part_lse_stride. The result goes to o (dtype)
     * and, with has_lse, lse. q, k, v, heads_kv and seq_kv are unused. */
    int64_t parts;
    fattn_dtype part_dtype;
    fattn_operand part_o, part_lse;
    int64_t part_o_stride, part_lse_stride;
    /* Variable-length sequences and paged caches; rag.on 0 for a dense batch. */
    fattn_ragged rag;
    /* Scratch for the run, at least the plan's workspace_bytes: the
     * caller's buffer or the context's own (mem NULL when the plan needs
     * none). Filled by the core after plan(), before run(). */
    fattn_operand workspace;
    /* desc->append: has_append 1 when given. Key L_b + t of sequence b
     * (L_b = seqused_kv[b], t < seq_new, the same as rag.keys_added) gets
     * row (b, h, t) of k_new, and of v_new in V, before the attention runs;
     * a sequence whose new keys break the rules above (L_b < 0, L_b +
     * seq_new over the cache, a bad page) is bad and none of it is written. */
    int has_append;
    fattn_operand k_new, v_new;
    int64_t seq_new;
    /* desc->mask's variants (fattn_variants above); var.on 0 for none. */
    fattn_variants var;
} fattn_problem;

/* The variant bits (FATTN_VAR_*) problem p uses: none of the mask's while
 * var.on is 0 (a zeroed fattn_variants, as a combine problem has, asks for
 * nothing). */
static inline unsigned fattn_variants_used(const fattn_problem *p) {
    const fattn_variants *v = &p->var;
    const unsigned dv = p->head_dim_v != p->head_dim ? FATTN_VAR_HEAD_DIM_V : 0u;
    if (!v->on) return dv;
    return dv | (v->window_left >= 0 || v->window_right >= 0 ? FATTN_VAR_WINDOW : 0u) |
           (v->softcap > 0.0f ? FATTN_VAR_SOFTCAP : 0u) | (v->alibi.mem ? FATTN_VAR_ALIBI : 0u) |
           (v->sinks.mem ? FATTN_VAR_SINKS : 0u) | (v->bias.mem ? FATTN_VAR_BIAS : 0u);
}

/* What a variant (a row of a backend's table) that runs only the variants
 * in `supported` (FATTN_VAR_* bits) says to problem p: FATTN_OK, or
 * FATTN_ERR_UNSUPPORTED naming the first variant it lacks. One line in each
 * accept function, so that "supported?" stays the planner's answer. */
static inline fattn_status fattn_variants_declined(const fattn_problem *p, unsigned supported,
                                                   fattn_msg *msg) {
    static const struct {
        unsigned bit;
        const char *what;
    } names[] = {
        {FATTN_VAR_WINDOW, "a sliding window (desc->mask->window_left/right)"},
        {FATTN_VAR_SOFTCAP, "a logit softcap (desc->mask->softcap)"},
        {FATTN_VAR_ALIBI, "ALiBi slopes (desc->mask->alibi_slopes)"},
        {FATTN_VAR_SINKS, "attention sinks (desc->mask->sinks)"},
        {FATTN_VAR_BIAS, "an additive bias (desc->mask->bias)"},
        {FATTN_VAR_HEAD_DIM_V, "a value head dimension other than head_dim (desc->head_dim_v)"},
    };
    const unsigned missing = fattn_variants_used(p) & ~supported;
    for (size_t i = 0; missing && i < sizeof names / sizeof names[0]; i++)
        if (missing & names[i].bit)
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "this kernel does not implement %s yet",
                              names[i].what);
    return FATTN_OK;
}

/* What a variant that takes only dense batches says to a ragged problem
 * (FATTN_ERR_UNSUPPORTED, or FATTN_OK for a dense one). */
static inline fattn_status fattn_dense_only(const fattn_problem *p, const char *variant,
                                            fattn_msg *msg) {
    if (!p->rag.on) return FATTN_OK;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                      "%s takes dense batches only, not variable-length sequences "
                      "(desc->varlen) or a paged K/V cache (desc->paged_kv)",
                      variant);
}

/* Sequence b of a problem, resolved from host-readable tables (the CPU
 * backend's; fattn_check_tables has vetted them): where its rows and keys
 * lie and its causal offset. Keys of a paged cache are found through
 * fattn_page_of. */
typedef struct fattn_seq {
    int64_t q_batch, q_row0, len_q;    /* Q, O, lse: batch index and first row */
    int64_t kv_batch, kv_row0, len_kv; /* K, V (not paged): batch index and first row */
    int64_t causal_offset;
} fattn_seq;

static inline int32_t fattn_table_at(const fattn_operand *t, const void *base, int64_t row,
                                     int64_t i) {
    return ((const int32_t *)base)[t->offset + row * t->stride_batch + i * t->stride_seq];
}

/* base_*: the tables' host pointers (at element 0 of their buffers), NULL
 * when absent. */
static inline void fattn_seq_resolve(const fattn_problem *p, const void *base_cu_q,
                                     const void *base_cu_kv, const void *base_used, int64_t b,
                                     fattn_seq *s) {
    const fattn_ragged *r = &p->rag;
    s->q_batch = b, s->q_row0 = 0, s->len_q = p->seq_q;
    s->kv_batch = b, s->kv_row0 = 0, s->len_kv = p->seq_kv;
    if (r->on && base_cu_q) {
        s->q_batch = 0;
        s->q_row0 = fattn_table_at(&r->cu_seqlens_q, base_cu_q, 0, b);
        s->len_q = fattn_table_at(&r->cu_seqlens_q, base_cu_q, 0, b + 1) - s->q_row0;
    }
    if (r->on && base_cu_kv) {
        s->kv_batch = 0;
        s->kv_row0 = fattn_table_at(&r->cu_seqlens_kv, base_cu_kv, 0, b);
        s->len_kv = fattn_table_at(&r->cu_seqlens_kv, base_cu_kv, 0, b + 1) - s->kv_row0;
    }
    if (r->on && base_used)
        s->len_kv = fattn_table_at(&r->seqused_kv, base_used, 0, b) + r->keys_added;
    s->causal_offset = !r->on ? p->causal_offset : r->top_left ? 0 : s->len_kv - s->len_q;
}

/* The keys [*lo, *hi) of sequence s that its query row i sees (0 <= i <
 * s->len_q): causal (s->causal_offset) and the window (p->var, aligned
 * bottom-right: offset len_kv - len_q) together, clamped to 0..len_kv;
 * *lo >= *hi when it sees none. Both ends grow with i. */
static inline void fattn_seq_keys(const fattn_problem *p, const fattn_seq *s, int64_t i,
                                  int64_t *lo, int64_t *hi) {
    int64_t a = 0, z = s->len_kv;
    if (p->causal && i + s->causal_offset + 1 < z) z = i + s->causal_offset + 1;
    if (p->var.on) {
        const int64_t diag = i + s->len_kv - s->len_q;
        if (p->var.window_right >= 0 && diag + p->var.window_right + 1 < z)
            z = diag + p->var.window_right + 1;
        if (p->var.window_left >= 0 && diag - p->var.window_left > a) a = diag - p->var.window_left;
    }
    *lo = a > s->len_kv ? s->len_kv : a;
    *hi = z < 0 ? 0 : z;
}

/* Keys j < fattn_key_limit(p, i) are visible to query row i, clamped to
 * 0..seq_kv: one definition of the mask for every backend's host code. */
static inline int64_t fattn_key_limit(const fattn_problem *p, int64_t i) {
    if (!p->causal) return p->seq_kv;
    const int64_t lim = i + p->causal_offset + 1;
    return lim < 0 ? 0 : (lim > p->seq_kv ? p->seq_kv : lim);
}

/* What a backend found on this machine. */
typedef struct fattn_probe {
    int device_count;
    int gpu_count;
    /* How much FATTN_BACKEND_AUTO wants this backend here, at most the
     * rank in the registry's table (0: never chosen automatically). AUTO
     * takes the highest score; see registry.c. */
    int auto_score;
    char reason[256]; /* why device_count is 0 */
} fattn_probe;

/* The backend's decision for one problem: which row of its variant table
 * runs, the tiling it reports, and the variant's typed launch parameters
 * in an opaque area (a backend keeps its own struct there, checked with
 * FATTN_PLAN_FITS). plan() is the only place that decides, so "is it
 * supported" and "what runs" cannot disagree; a plan may describe several
 * launches. */
#define FATTN_PLAN_BYTES 256
typedef struct fattn_plan {
    fattn_op op;
    int variant;              /* index into the backend's variant table */
    const char *variant_name; /* static */
    fattn_tiling tiling;      /* tile sizes, resident groups, workspace */
    union {
        unsigned char bytes[FATTN_PLAN_BYTES];
        int64_t align_i;
        double align_d;
        void *align_p;
    } area;
} fattn_plan;

/* A backend's typed view of plan->area; pair each use with FATTN_PLAN_FITS. */
#define FATTN_PLAN_AREA(plan, type) ((type *)(void *)(plan)->area.bytes)
#define FATTN_PLAN_FITS(type)                                                                      \
    _Static_assert(sizeof(type) <= FATTN_PLAN_BYTES, #type " does not fit in fattn_plan's area")

/* A row of a backend's variant table: its name, the op it serves, and a
 * function that says whether it takes a problem and fills the plan (or
 * fails with FATTN_ERR_UNSUPPORTED and the reason). A planner walks its
 * table in order and takes the first row that accepts. */
typedef struct fattn_variant {
    const char *name;
    fattn_op op;
    fattn_status (*accept)(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg);
    fattn_status (*run)(void *state, const fattn_problem *p, const fattn_plan *plan,
                        fattn_msg *msg);
} fattn_variant;

/* The shared planner over a variant table: the first row for p->op that
 * accepts wins; when none does, the last row's reason is kept (rows are
 * ordered most to least capable, so the last reason is the most general). */
static inline fattn_status fattn_plan_from_table(const fattn_variant *rows, int n, void *state,
                                                 const fattn_problem *p, fattn_plan *plan,
                                                 fattn_msg *msg) {
    fattn_status st = FATTN_ERR_UNSUPPORTED;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].op != p->op) continue;
        seen = 1;
        plan->op = p->op;
        plan->variant = i;
        plan->variant_name = rows[i].name;
        if ((st = rows[i].accept(state, p, plan, msg)) == FATTN_OK && msg) msg->text[0] = '\0';
        /* A row that declined may have left its reason; a later row's
         * acceptance clears it, so a successful call reports nothing. */
        if (st != FATTN_ERR_UNSUPPORTED) return st;
    }
    if (!seen)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "this backend has no %s kernel",
                          p->op == FATTN_OP_FORWARD_NAIVE ? "naive baseline"
                          : p->op == FATTN_OP_COMBINE     ? "combine"
                                                          : "forward");
    return st;
}

/* Runs a plan made by fattn_plan_from_table over the same table. */
static inline fattn_status fattn_run_from_table(const fattn_variant *rows, int n, void *state,
                                                const fattn_problem *p, const fattn_plan *plan,
                                                fattn_msg *msg) {
    if (plan->variant < 0 || plan->variant >= n || rows[plan->variant].op != plan->op)
        return fattn_fail(msg, FATTN_ERR_INTERNAL, "plan names variant %d, not in the table",
                          plan->variant);
    return rows[plan->variant].run(state, p, plan, msg);
}

/* Element size of a dtype, for modules that link none of the core. */
static inline int64_t fattn_esize(fattn_dtype t) {
    return t == FATTN_F32 || t == FATTN_I32 ? 4 : 2;
}

/* A byte range of a backend buffer (its mem handle), for transfers. */
typedef struct fattn_cp_span {
    void *mem;
    uint64_t offset, bytes;
} fattn_cp_span;

typedef struct fattn_backend_vtable {
    int abi; /* FATTN_BACKEND_ABI */
    /* sizeof(fattn_backend_vtable) where the module was built: the core
     * refuses a module whose table is smaller than its own, or that leaves a
     * required slot NULL, instead of calling through a missing pointer. */
    size_t size;
    fattn_backend_kind kind;
    const char *name;
    /* 1 when the backend's buffers are host memory (the CPU backend): the
     * host convenience call then wraps the caller's arrays instead of copying. */
    int native_is_host;

    /* Counts devices under the settings' filters; a missing driver is
     * device_count 0 plus a reason. */
    void (*probe)(const fattn_settings *settings, fattn_probe *out);
    fattn_status (*device_name)(const fattn_settings *settings, int device, char *buf, size_t len,
                                fattn_msg *msg);

    /* A per-context state for one device. On success open may leave a note
     * in msg (e.g. "disk cache off: ..."); the core appends it to the
     * context's device description, so a degraded mode is never silent. */
    fattn_status (*open)(const fattn_open_args *args, void **state, fattn_msg *msg);
    void (*close)(void *state);

    /* Optional: NULL means the backend has no queues, and the core accepts
     * only a NULL stream. */
    fattn_status (*set_stream)(void *state, void *native_stream, fattn_msg *msg);
    /* Optional: NULL means the backend's calls are synchronous. */
    fattn_status (*synchronize)(void *state, fattn_msg *msg);

    /* Buffers. The core checks ranges before calling read/write, and keeps
     * whether it allocated a buffer or wraps the caller's memory. */
    fattn_status (*buffer_alloc)(void *state, size_t bytes, void **mem, fattn_msg *msg);
    /* Optional: NULL makes fattn_buffer_wrap return FATTN_ERR_UNSUPPORTED. */
    fattn_status (*buffer_wrap)(void *state, void *native, size_t bytes, void **mem,
                                fattn_msg *msg);
    /* Frees what alloc made (owned 1), or only the wrapper of what wrap made. */
    void (*buffer_free)(void *state, void *mem, int owned);
    fattn_status (*buffer_write)(void *state, void *mem, size_t offset, const void *src,
                                 size_t bytes, fattn_msg *msg);
    fattn_status (*buffer_read)(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                fattn_msg *msg);
    void *(*buffer_native)(void *state, void *mem);
    /* Where a buffer's memory lies, for the core's overlap and alignment
     * checks: *root names the allocation it is part of and *start is the
     * byte position of the buffer's first byte in that allocation's space.
     * Address backends (CPU, CUDA) give root NULL and start = the address,
     * so wrappers of the same memory meet; OpenCL gives the top cl_mem of a
     * sub-buffer chain and the sub-buffer's origin, so two wrappers of one
     * cl_mem, or a buffer and its sub-buffer, meet too. The core requires
     * start to be a multiple of the element size of each tensor on it. */
    fattn_status (*buffer_region)(void *state, void *mem, const void **root, uint64_t *start,
                                  fattn_msg *msg);

    /* Can this problem (its op included) run, and how: FATTN_ERR_UNSUPPORTED
     * with a reason if not. Called without operands (p->has_operands 0) for
     * memory reports. run() receives the plan that this returned. Most
     * backends implement both with fattn_plan_from_table/fattn_run_from_table. */
    fattn_status (*plan)(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg);
    fattn_status (*run)(void *state, const fattn_problem *p, const fattn_plan *plan,
                        fattn_msg *msg);
    /* Optional: device memory in use (by anyone) and total, measured now;
     * NULL makes fattn_context_device_memory return FATTN_ERR_UNSUPPORTED. */
    fattn_status (*device_memory)(void *state, uint64_t *used, uint64_t *total, fattn_msg *msg);
    /* Optional, all three or none: a mark recorded on the current queue,
     * the milliseconds between two marks (waiting for the second), and its
     * release. NULL: timers use the host clock when the backend is
     * synchronous (synchronize NULL), else fattn_timer_create is unsupported. */
    fattn_status (*mark)(void *state, void **mark, fattn_msg *msg);
    fattn_status (*mark_elapsed)(void *state, void *start, void *stop, double *ms, fattn_msg *msg);
    void (*mark_free)(void *state, void *mark);
    /* Optional: describes the opened state's device (and what open chose
     * for it), for every context; NULL gives device_name's description, or
     * a generic one for contexts made around the caller's native objects. */
    void (*describe)(void *state, char *buf, size_t len);
    /* Optional: the faults kernels recorded in the context's fault word
     * (fattn_ragged) since the last call, cleared as they are reported
     * (fattn_fault_fail); FATTN_OK when none. The core calls it after each
     * successful synchronize and buffer_read. NULL: the backend checks
     * every table on the host before it runs. */
    fattn_status (*take_fault)(void *state, fattn_msg *msg);
    /* Optional: writes a problem's new keys and values into its cache
     * (p->has_append with p->seq_new > 0), enqueued before the run() that
     * follows on the same queue; the core calls it after plan() accepted.
     * NULL: desc->append is FATTN_ERR_UNSUPPORTED. */
    fattn_status (*append)(void *state, const fattn_problem *p, fattn_msg *msg);

    /* Optional, all five or none: context parallelism's transfers
     * (fattn_cp_*, src/cp.c) over a communicator the caller made. cp_open
     * binds `comm` (NCCL's ncclComm_t on CUDA) to the state and says this
     * rank's place; the handle it returns goes to the others. Transfers run
     * on a queue of the handle's own, each after everything enqueued on the
     * context's queue before it was called. */
    fattn_status (*cp_open)(void *state, void *comm, void **link, int *ranks, int *rank,
                            fattn_msg *msg);
    void (*cp_close)(void *state, void *link);
    /* n sends of send[i] to rank `to` and n receives into recv[i] (the same
     * bytes) from rank `from`, as one group. */
    fattn_status (*cp_sendrecv)(void *state, void *link, int n, const fattn_cp_span *send,
                                const fattn_cp_span *recv, int to, int from, fattn_msg *msg);
    /* n all-gathers: every rank's send[i] lands at recv[i] + rank * bytes. */
    fattn_status (*cp_allgather)(void *state, void *link, int n, const fattn_cp_span *send,
                                 const fattn_cp_span *recv, fattn_msg *msg);
    /* The context's queue waits for the transfers enqueued so far; reports
     * a failed transfer the communicator knows of. */
    fattn_status (*cp_wait)(void *state, void *link, fattn_msg *msg);
} fattn_backend_vtable;

typedef const fattn_backend_vtable *(*fattn_backend_module_fn)(void);

#endif /* FATTN_BACKEND_H */
