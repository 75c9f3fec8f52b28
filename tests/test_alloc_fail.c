/* Allocation failures: fails the 1st, 2nd, ... allocation that fattn's own
 * code makes during a whole run (create a context, allocate and write
 * buffers, forward, read, the host call, a timer, a decode forced into key
 * splits with no caller workspace (the context's split workspace and the
 * merge), a paged cache with seqused_kv (the tables read to check them),
 * fattn_combine, free everything) until a
 * run sees no injected failure. Every step must return a known status, a
 * failed create must leave NULL and a message, a run that still succeeds must
 * give the right answer, and what fattn allocated must all be freed.
 *
 * malloc, calloc, realloc, aligned_alloc, posix_memalign and free are
 * interposed here and forward to the next definition (libc, or the ASan
 * runtime in the sanitizer build). "Made by fattn" means the return address
 * lies in an executable segment of libfattn.so or libfattn-opencl.so: this
 * program links the shared library rather than fattn_static, so fattn's code
 * and the test's own never share an object and no symbol names are needed
 * (fattn's are hidden). Allocations inside libc, PoCL or the ICD loader are
 * left alone: failing those would test them, not fattn. So are those of
 * libfattn-cuda.so, which holds the CUDA runtime statically: its two
 * allocations of its own cannot be told from the runtime's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fattn.h"
#include "test_backend.h"

/* ---- The interposed allocator --------------------------------------------------- */

/* The hooks run before the ASan runtime has started (its own start-up calls
 * malloc), so they carry no sanitizer instrumentation. */
#define NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void (*real_free)(void *);

/* dlsym may allocate while the real functions are being looked up. */
static _Alignas(64) unsigned char boot[1 << 16];
static size_t boot_used;
static int resolving;

NO_SANITIZE static void *boot_alloc(size_t n) {
    n = (n + 63) & ~(size_t)63;
    if (n > sizeof boot - boot_used) return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

NO_SANITIZE static int in_boot(const void *p) {
    return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

NO_SANITIZE static void resolve(void) {
    if (real_free || resolving) return;
    resolving = 1;
    *(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc");
    *(void **)&real_calloc = dlsym(RTLD_NEXT, "calloc");
    *(void **)&real_realloc = dlsym(RTLD_NEXT, "realloc");
    *(void **)&real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    *(void **)&real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    *(void **)&real_free = dlsym(RTLD_NEXT, "free");
    resolving = 0;
}

/* Executable segments of fattn's objects, refreshed by the test (not from
 * inside malloc) once the backend modules are loaded. */
typedef struct seg {
    uintptr_t lo, hi;
} seg;
static seg segs[16];
static atomic_int seg_count;

static int collect_seg(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    int *n = arg;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (!base || strncmp(base, "libfattn", 8) != 0 || strncmp(base, "libfattn-cuda", 13) == 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && *n < 16; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        segs[*n].lo = info->dlpi_addr + ph->p_vaddr;
        segs[*n].hi = segs[*n].lo + ph->p_memsz;
        (*n)++;
    }
    return 0;
}

static int refresh_segments(void) {
    int n = 0;
    atomic_store(&seg_count, 0);
    dl_iterate_phdr(collect_seg, &n);
    atomic_store(&seg_count, n);
    return n;
}

NO_SANITIZE static int from_fattn(const void *ret) {
    const uintptr_t a = (uintptr_t)ret;
    const int n = atomic_load(&seg_count);
    for (int i = 0; i < n; i++)
        if (a >= segs[i].lo && a < segs[i].hi) return 1;
    return 0;
}

/* Live allocations made by fattn: an open-addressing set of pointers. */
enum { LIVE_SLOTS = 1 << 16 };
#define TOMB ((void *)1)
static void *live[LIVE_SLOTS];
static long live_count;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

NO_SANITIZE static size_t slot_of(const void *p) {
    return ((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 48;
}

NO_SANITIZE static void live_add(void *p) {
    pthread_mutex_lock(&live_lock);
    for (size_t i = slot_of(p), n = 0; n < LIVE_SLOTS; i = (i + 1) & (LIVE_SLOTS - 1), n++)
        if (live[i] == NULL || live[i] == TOMB) {
            live[i] = p;
            live_count++;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

NO_SANITIZE static void live_remove(void *p) {
    if (__atomic_load_n(&live_count, __ATOMIC_RELAXED) == 0) return;
    pthread_mutex_lock(&live_lock);
    for (size_t i = slot_of(p), n = 0; n < LIVE_SLOTS && live[i];
         i = (i + 1) & (LIVE_SLOTS - 1), n++)
        if (live[i] == p) {
            live[i] = TOMB;
            live_count--;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

static long live_now(void) {
    pthread_mutex_lock(&live_lock);
    long n = live_count;
    pthread_mutex_unlock(&live_lock);
    return n;
}

/* Injection: the fail_at-th allocation by fattn since arming returns NULL. */
static atomic_long fattn_allocs;
static atomic_long fail_at; /* 0: never */
static atomic_int injected;

/* 1 when this allocation, made from `ret`, is to fail; tracks the count. */
NO_SANITIZE static int should_fail(const void *ret, int *ours) {
    *ours = from_fattn(ret);
    if (!*ours) return 0;
    long n = atomic_fetch_add(&fattn_allocs, 1) + 1;
    if (n == atomic_load(&fail_at)) {
        atomic_store(&injected, 1);
        return 1;
    }
    return 0;
}

NO_SANITIZE void *malloc(size_t n) {
    if (!real_malloc) {
        resolve();
        if (!real_malloc) return boot_alloc(n);
    }
    int ours;
    if (should_fail(__builtin_return_address(0), &ours)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = real_malloc(n);
    if (p && ours) live_add(p);
    return p;
}

NO_SANITIZE void *calloc(size_t n, size_t size) {
    if (!real_calloc) {
        resolve();
        if (!real_calloc) { /* zeroed: boot is static and never reused */
            size_t bytes;
            return __builtin_mul_overflow(n, size, &bytes) ? NULL : boot_alloc(bytes);
        }
    }
    int ours;
    if (should_fail(__builtin_return_address(0), &ours)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = real_calloc(n, size);
    if (p && ours) live_add(p);
    return p;
}

NO_SANITIZE void *realloc(void *old, size_t n) {
    if (!real_realloc) resolve();
    int ours;
    if (in_boot(old)) { /* out of the start-up arena, which is never reused */
        const size_t room = (size_t)(boot + sizeof boot - (unsigned char *)old);
        void *p = real_malloc(n);
        if (p) memcpy(p, old, n < room ? n : room);
        return p;
    }
    if (should_fail(__builtin_return_address(0), &ours)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = real_realloc(old, n);
    if (p || n == 0) {
        if (old) live_remove(old);
        if (p && ours) live_add(p);
    }
    return p;
}

NO_SANITIZE void *aligned_alloc(size_t align, size_t n) {
    if (!real_aligned_alloc) resolve();
    int ours;
    if (should_fail(__builtin_return_address(0), &ours)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = real_aligned_alloc(align, n);
    if (p && ours) live_add(p);
    return p;
}

NO_SANITIZE int posix_memalign(void **out, size_t align, size_t n) {
    if (!real_posix_memalign) resolve();
    int ours;
    if (should_fail(__builtin_return_address(0), &ours)) return ENOMEM;
    int rc = real_posix_memalign(out, align, n);
    if (rc == 0 && ours) live_add(*out);
    return rc;
}

NO_SANITIZE void free(void *p) {
    if (!p || in_boot(p)) return;
    if (!real_free) resolve();
    live_remove(p);
    real_free(p);
}

/* ---- The run ------------------------------------------------------------------------ */

static int status_known(fattn_status st) {
    switch (st) {
#define KNOWN_(name, value, text) case FATTN_##name:
        FATTN_STATUS_MAP(KNOWN_)
#undef KNOWN_
        return 1;
    default: return 0;
    }
}

/* The problem every run computes: small, GQA, causal, odd sizes, with LSE. */
enum { B = 1, HQ = 4, HKV = 2, SQ = 33, SKV = 47, D = 40 };
enum { NQ = B * HQ * SQ * D, NKV = B * HKV * SKV * D, NL = B * HQ * SQ };

/* A decode shape with the keys forced into splits and no caller workspace
 * (the context allocates the split workspace, then the merge runs), and a
 * paged cache with seqused_kv (the CPU reads the tables to check them). */
enum { DHQ = 8, DHKV = 2, DSKV = 520, DSPLITS = 3 };
enum { NDQ = DHQ * D, NDKV = DHKV * DSKV * D, NDL = DHQ };
enum { PB = 2, PSQ = 3, PAGE = 8, PPS = 3, PAGES = 6, PSKV = PAGE * PPS };
enum { NPQ = PB * HQ * PSQ * D, NPKV = PAGES * HKV * PAGE * D, NPL = PB * HQ * PSQ };
/* fattn_combine of CPARTS parts of [1, HQ, SQ, D]. */
enum { CPARTS = 3 };

typedef struct run_out {
    float o[NQ], lse[NL], host_o[NQ];
    float dec_o[NDQ], dec_lse[NDL], pag_o[NPQ], pag_lse[NPL], comb_o[NQ], comb_lse[NL];
    int ok;           /* every step succeeded */
    const char *step; /* the step that failed */
    fattn_status st;
} run_out;

static float q_host[NQ], k_host[NKV], v_host[NKV];
static float dq_host[NDQ], dk_host[NDKV], dv_host[NDKV];
static float pq_host[NPQ], pk_host[NPKV], pv_host[NPKV];
static float co_host[CPARTS * NQ], cl_host[CPARTS * NL];
static const int32_t page_table[PB * PPS] = {4, 1, 5, 0, 3, 2}, page_used[PB] = {13, 20};

static void fill_inputs(void) {
    uint64_t s = 0x0a11;
    float *arrays[11] = {q_host,  k_host,  v_host,  dq_host, dk_host, dv_host,
                         pq_host, pk_host, pv_host, co_host, cl_host};
    const int counts[11] = {NQ,  NKV,  NKV,  NDQ,         NDKV,       NDKV,
                            NPQ, NPKV, NPKV, CPARTS * NQ, CPARTS * NL};
    for (int a = 0; a < 11; a++)
        for (int i = 0; i < counts[a]; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            arrays[a][i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        }
}

/* A failed step: a known error with a message. */
static void check_failure(fattn_status st, const fattn_context *ctx, const char *step) {
    if (!status_known(st) || st >= 0)
        fail_msg("%s returned %d, not a fattn error status", step, (int)st);
    const char *msg = fattn_error_message(ctx);
    if (!msg || !*msg)
        fail_msg("%s failed with %s and an empty message", step, fattn_status_string(st));
}

#define STEP(call, ctx_for_msg, name)                                                              \
    do {                                                                                           \
        fattn_status st_ = (call);                                                                 \
        if (st_ != FATTN_OK) {                                                                     \
            check_failure(st_, (ctx_for_msg), (name));                                             \
            out->ok = 0;                                                                           \
            out->step = (name);                                                                    \
            out->st = st_;                                                                         \
            goto cleanup;                                                                          \
        }                                                                                          \
    } while (0)

/* Buffers of a step, freed at the run's end. */
enum { MAX_BUFS = 24 };
typedef struct bufs {
    fattn_buffer *b[MAX_BUFS];
    int n;
} bufs;

static fattn_status buf_with(fattn_context *ctx, bufs *bs, const void *src, size_t bytes,
                             fattn_buffer **out) {
    *out = NULL;
    fattn_status st = fattn_buffer_alloc(ctx, bytes, out);
    if (st != FATTN_OK) return st;
    bs->b[bs->n++] = *out;
    return src ? fattn_buffer_write(*out, 0, src, bytes) : FATTN_OK;
}

/* The split decode without a workspace, on the context's own. */
static fattn_status run_decode(fattn_context *ctx, bufs *bs, run_out *out) {
    fattn_buffer *b[5];
    fattn_tensor t[5];
    fattn_status st;
    if ((st = buf_with(ctx, bs, dq_host, sizeof dq_host, &b[0])) ||
        (st = buf_with(ctx, bs, dk_host, sizeof dk_host, &b[1])) ||
        (st = buf_with(ctx, bs, dv_host, sizeof dv_host, &b[2])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->dec_o, &b[3])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->dec_lse, &b[4])))
        return st;
    if ((st = fattn_tensor_init(b[0], FATTN_F32, FATTN_LAYOUT_BSHD, 1, DHQ, 1, D, 0, &t[0])) ||
        (st = fattn_tensor_init(b[1], FATTN_F32, FATTN_LAYOUT_BSHD, 1, DHKV, DSKV, D, 0, &t[1])) ||
        (st = fattn_tensor_init(b[2], FATTN_F32, FATTN_LAYOUT_BSHD, 1, DHKV, DSKV, D, 0, &t[2])) ||
        (st = fattn_tensor_init(b[3], FATTN_F32, FATTN_LAYOUT_BSHD, 1, DHQ, 1, D, 0, &t[3])) ||
        (st = fattn_tensor_init_lse(b[4], 1, DHQ, 1, 0, &t[4])))
        return st;
    const fattn_attention_desc desc = {.size = sizeof desc,
                                       .batch = 1,
                                       .heads_q = DHQ,
                                       .heads_kv = DHKV,
                                       .seq_q = 1,
                                       .seq_kv = DSKV,
                                       .head_dim = D,
                                       .dtype = FATTN_F32};
    if ((st = fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, DSPLITS)) ||
        (st = fattn_forward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[4])) ||
        (st = fattn_context_synchronize(ctx)) ||
        (st = fattn_buffer_read(b[3], 0, out->dec_o, sizeof out->dec_o)) ||
        (st = fattn_buffer_read(b[4], 0, out->dec_lse, sizeof out->dec_lse)))
        return st;
    return fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, 0);
}

/* A paged cache: pages of PAGE keys through a block table, seqused_kv. */
static fattn_status run_paged(fattn_context *ctx, bufs *bs, run_out *out) {
    fattn_buffer *b[7];
    fattn_tensor t[7];
    fattn_status st;
    if ((st = buf_with(ctx, bs, pq_host, sizeof pq_host, &b[0])) ||
        (st = buf_with(ctx, bs, pk_host, sizeof pk_host, &b[1])) ||
        (st = buf_with(ctx, bs, pv_host, sizeof pv_host, &b[2])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->pag_o, &b[3])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->pag_lse, &b[4])) ||
        (st = buf_with(ctx, bs, page_table, sizeof page_table, &b[5])) ||
        (st = buf_with(ctx, bs, page_used, sizeof page_used, &b[6])))
        return st;
    if ((st = fattn_tensor_init(b[0], FATTN_F32, FATTN_LAYOUT_BSHD, PB, HQ, PSQ, D, 0, &t[0])) ||
        (st = fattn_tensor_init(b[1], FATTN_F32, FATTN_LAYOUT_BSHD, PAGES, HKV, PAGE, D, 0,
                                &t[1])) ||
        (st = fattn_tensor_init(b[2], FATTN_F32, FATTN_LAYOUT_BSHD, PAGES, HKV, PAGE, D, 0,
                                &t[2])) ||
        (st = fattn_tensor_init(b[3], FATTN_F32, FATTN_LAYOUT_BSHD, PB, HQ, PSQ, D, 0, &t[3])) ||
        (st = fattn_tensor_init_lse(b[4], PB, HQ, PSQ, 0, &t[4])) ||
        (st = fattn_tensor_init_index(b[5], PB, PPS, 0, &t[5])) ||
        (st = fattn_tensor_init_index(b[6], 1, PB, 0, &t[6])))
        return st;
    fattn_varlen_desc vl = FATTN_VARLEN_DESC_INIT;
    vl.seqused_kv = &t[6];
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    pg.block_table = &t[5];
    pg.pages_per_seq = PPS;
    pg.page_size = PAGE;
    pg.num_pages = PAGES;
    fattn_attention_desc desc = FATTN_ATTENTION_DESC_INIT;
    desc.batch = PB, desc.heads_q = HQ, desc.heads_kv = HKV, desc.seq_q = PSQ;
    desc.seq_kv = PSKV, desc.head_dim = D, desc.dtype = FATTN_F32;
    desc.causal = FATTN_CAUSAL_BOTTOM_RIGHT, desc.varlen = &vl, desc.paged_kv = &pg;
    if ((st = fattn_forward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[4])) ||
        (st = fattn_context_synchronize(ctx)) ||
        (st = fattn_buffer_read(b[3], 0, out->pag_o, sizeof out->pag_o)))
        return st;
    return fattn_buffer_read(b[4], 0, out->pag_lse, sizeof out->pag_lse);
}

/* The public merge: CPARTS partial results in one buffer each. */
static fattn_status run_combine(fattn_context *ctx, bufs *bs, run_out *out) {
    fattn_buffer *b[4];
    fattn_tensor t[4];
    fattn_status st;
    if ((st = buf_with(ctx, bs, co_host, sizeof co_host, &b[0])) ||
        (st = buf_with(ctx, bs, cl_host, sizeof cl_host, &b[1])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->comb_o, &b[2])) ||
        (st = buf_with(ctx, bs, NULL, sizeof out->comb_lse, &b[3])))
        return st;
    if ((st = fattn_tensor_init(b[0], FATTN_F32, FATTN_LAYOUT_BSHD, 1, HQ, SQ, D, 0, &t[0])) ||
        (st = fattn_tensor_init_lse(b[1], 1, HQ, SQ, 0, &t[1])) ||
        (st = fattn_tensor_init(b[2], FATTN_F32, FATTN_LAYOUT_BSHD, 1, HQ, SQ, D, 0, &t[2])) ||
        (st = fattn_tensor_init_lse(b[3], 1, HQ, SQ, 0, &t[3])))
        return st;
    fattn_combine_desc cd = FATTN_COMBINE_DESC_INIT;
    cd.batch = 1, cd.heads = HQ, cd.seq = SQ, cd.head_dim = D, cd.parts = CPARTS;
    cd.o_part_stride = NQ, cd.lse_part_stride = NL;
    if ((st = fattn_combine(ctx, &cd, &t[0], &t[1], &t[2], &t[3])) ||
        (st = fattn_context_synchronize(ctx)) ||
        (st = fattn_buffer_read(b[2], 0, out->comb_o, sizeof out->comb_o)))
        return st;
    return fattn_buffer_read(b[3], 0, out->comb_lse, sizeof out->comb_lse);
}

static void run_once(fattn_backend_kind kind, run_out *out) {
    fattn_context *ctx = (fattn_context *)(uintptr_t)1; /* create must overwrite it */
    fattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL;
    bufs bs = {{0}, 0};
    fattn_timer *timer = NULL;
    out->ok = 1;
    out->step = "";
    out->st = FATTN_OK;
    fattn_status st = fattn_context_create(kind, 0, &ctx);
    if (st != FATTN_OK) {
        if (ctx != NULL)
            fail_msg("a failed fattn_context_create left *out = %p, not NULL", (void *)ctx);
        check_failure(st, NULL, "fattn_context_create");
        out->ok = 0;
        out->step = "fattn_context_create";
        out->st = st;
        return;
    }
    const fattn_attention_desc desc = {.size = sizeof desc,
                                       .batch = B,
                                       .heads_q = HQ,
                                       .heads_kv = HKV,
                                       .seq_q = SQ,
                                       .seq_kv = SKV,
                                       .head_dim = D,
                                       .dtype = FATTN_F32,
                                       .causal = FATTN_CAUSAL_BOTTOM_RIGHT};
    fattn_tensor tq, tk, tv, to, tl;
    STEP(fattn_buffer_alloc(ctx, sizeof q_host, &bq), ctx, "fattn_buffer_alloc q");
    STEP(fattn_buffer_alloc(ctx, sizeof k_host, &bk), ctx, "fattn_buffer_alloc k");
    STEP(fattn_buffer_alloc(ctx, sizeof v_host, &bv), ctx, "fattn_buffer_alloc v");
    STEP(fattn_buffer_alloc(ctx, sizeof out->o, &bo), ctx, "fattn_buffer_alloc o");
    STEP(fattn_buffer_alloc(ctx, sizeof out->lse, &bl), ctx, "fattn_buffer_alloc lse");
    STEP(fattn_buffer_write(bq, 0, q_host, sizeof q_host), ctx, "fattn_buffer_write q");
    STEP(fattn_buffer_write(bk, 0, k_host, sizeof k_host), ctx, "fattn_buffer_write k");
    STEP(fattn_buffer_write(bv, 0, v_host, sizeof v_host), ctx, "fattn_buffer_write v");
    STEP(fattn_tensor_init(bq, FATTN_F32, FATTN_LAYOUT_BSHD, B, HQ, SQ, D, 0, &tq), NULL,
         "fattn_tensor_init q");
    STEP(fattn_tensor_init(bk, FATTN_F32, FATTN_LAYOUT_BSHD, B, HKV, SKV, D, 0, &tk), NULL,
         "fattn_tensor_init k");
    STEP(fattn_tensor_init(bv, FATTN_F32, FATTN_LAYOUT_BSHD, B, HKV, SKV, D, 0, &tv), NULL,
         "fattn_tensor_init v");
    STEP(fattn_tensor_init(bo, FATTN_F32, FATTN_LAYOUT_BSHD, B, HQ, SQ, D, 0, &to), NULL,
         "fattn_tensor_init o");
    STEP(fattn_tensor_init_lse(bl, B, HQ, SQ, 0, &tl), NULL, "fattn_tensor_init_lse");
    st = fattn_timer_create(ctx, &timer); /* a backend may have no timer */
    if (st != FATTN_ERR_UNSUPPORTED) STEP(st, ctx, "fattn_timer_create");
    if (timer) STEP(fattn_timer_start(timer), ctx, "fattn_timer_start");
    STEP(fattn_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl), ctx, "fattn_forward");
    if (timer) STEP(fattn_timer_stop(timer), ctx, "fattn_timer_stop");
    STEP(fattn_context_synchronize(ctx), ctx, "fattn_context_synchronize");
    STEP(fattn_buffer_read(bo, 0, out->o, sizeof out->o), ctx, "fattn_buffer_read o");
    STEP(fattn_buffer_read(bl, 0, out->lse, sizeof out->lse), ctx, "fattn_buffer_read lse");
    if (timer) {
        double ms;
        STEP(fattn_timer_elapsed_ms(timer, &ms), ctx, "fattn_timer_elapsed_ms");
    }
    STEP(fattn_attention_host(ctx, &desc, FATTN_LAYOUT_BSHD, q_host, k_host, v_host, out->host_o,
                              NULL),
         ctx, "fattn_attention_host");
    STEP(run_decode(ctx, &bs, out), ctx, "split decode (no workspace)");
    STEP(run_paged(ctx, &bs, out), ctx, "paged forward");
    STEP(run_combine(ctx, &bs, out), ctx, "fattn_combine");
cleanup:
    for (int i = 0; i < bs.n; i++) fattn_buffer_free(bs.b[i]);
    fattn_timer_free(timer);
    fattn_buffer_free(bq);
    fattn_buffer_free(bk);
    fattn_buffer_free(bv);
    fattn_buffer_free(bo);
    fattn_buffer_free(bl);
    fattn_context_free(ctx);
}

/* ---- Tests ---------------------------------------------------------------------- */

static char cache_dir[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static float max_diff(const float *a, const float *b, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) {
        if (isinf(a[i]) && isinf(b[i]) && a[i] == b[i]) continue;
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

static void fail_each_allocation(void **state) {
    const fattn_backend_kind kind = *(const fattn_backend_kind *)*state;
    fattn_backend_info info = FATTN_BACKEND_INFO_INIT;
    test_use_backend(kind, &info);

    /* An uninjected run first: it loads the backend's module and caches its
     * programs, and gives the answer later runs must reproduce. */
    static run_out want, got;
    atomic_store(&fail_at, 0);
    run_once(kind, &want);
    if (!want.ok) fail_msg("uninjected run: %s: %s", want.step, fattn_status_string(want.st));
    assert_true(refresh_segments() > 0);
    run_once(kind, &want); /* with the modules' segments known */
    assert_true(want.ok);
    const long baseline = live_now();

    long n = 1, injected_failures = 0, recovered = 0;
    for (;; n++) {
        if (n > 5000) fail_msg("still injecting after %ld allocations", n);
        atomic_store(&fattn_allocs, 0);
        atomic_store(&injected, 0);
        atomic_store(&fail_at, n);
        memset(&got, 0xff, sizeof got);
        run_once(kind, &got);
        atomic_store(&fail_at, 0);
        const int hit = atomic_load(&injected);
        const long leaked = live_now() - baseline;
        if (leaked != 0)
            fail_msg(
                "failing allocation %ld (%s): %ld allocations made by fattn are still live after "
                "everything was freed",
                n, hit ? got.step : "none failed", leaked);
        if (!hit) {
            if (!got.ok)
                fail_msg("run %ld failed with no injected failure: %s: %s", n, got.step,
                         fattn_status_string(got.st));
            break;
        }
        if (got.ok) {
            /* fattn absorbed the failure (a worker without scratch, a cache
             * miss): the answer must not change. */
            recovered++;
            const float d = fmaxf(
                fmaxf(max_diff(got.o, want.o, NQ), fmaxf(max_diff(got.lse, want.lse, NL),
                                                         max_diff(got.host_o, want.host_o, NQ))),
                fmaxf(fmaxf(fmaxf(max_diff(got.dec_o, want.dec_o, NDQ),
                                  max_diff(got.dec_lse, want.dec_lse, NDL)),
                            fmaxf(max_diff(got.pag_o, want.pag_o, NPQ),
                                  max_diff(got.pag_lse, want.pag_lse, NPL))),
                      fmaxf(max_diff(got.comb_o, want.comb_o, NQ),
                            max_diff(got.comb_lse, want.comb_lse, NL))));
            if (!(d <= 1e-5f))
                fail_msg("failing allocation %ld: every call succeeded but the output "
                         "differs by %g",
                         n, (double)d);
        } else {
            injected_failures++;
            if (got.st != FATTN_ERR_OUT_OF_MEMORY)
                print_message("note: failing allocation %ld made %s return %s\n", n, got.step,
                              fattn_status_string(got.st));
        }
    }
    print_message(
        "%s: %ld allocations by fattn per run; each failed in turn: %ld runs failed with a "
        "status, %ld recovered with the right answer, none leaked\n",
        info.name, n - 1, injected_failures, recovered);
    assert_true(n > 1); /* a run that allocates nothing tested nothing */
}

static int setup(void **state) {
    (void)state;
    fill_inputs();
    snprintf(cache_dir, sizeof cache_dir, "/tmp/fattn-alloc-fail-XXXXXX");
    if (!mkdtemp(cache_dir)) return -1;
    /* OpenCL programs are cached per context: each run loads them from here. */
    setenv("FATTN_CACHE_DIR", cache_dir, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return nftw(cache_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    static const fattn_backend_kind cpu = FATTN_BACKEND_CPU, opencl = FATTN_BACKEND_OPENCL,
                                    cuda = FATTN_BACKEND_CUDA;
    const struct CMUnitTest tests[] = {
        {"cpu", fail_each_allocation, NULL, NULL, (void *)&cpu},
        {"opencl", fail_each_allocation, NULL, NULL, (void *)&opencl},
        {"cuda", fail_each_allocation, NULL, NULL, (void *)&cuda},
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
