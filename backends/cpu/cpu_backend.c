/* The CPU backend's vtable: one "device" (the host), buffers in host memory,
 * and the planner that picks tile sizes and key splits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/sysinfo.h>
#endif

#include "cpu.h"

/* Default tiles: a 16 x 256 float query tile and two 64 x 256 key/value tiles
 * stay within a 256 KiB L2 at the largest head dimension. */
enum { CPU_TILE_Q = 16, CPU_TILE_KV = 64, CPU_TILE_MAX = 1024 };
/* With AVX-512 the lane kernel takes 8 groups of 16 rows per tile, in
 * pairs, so each packed K/V tile serves 128 rows (16: 0.12-0.14 TFLOP/s on
 * 2 cores, the packing half the time; 64: 0.15-0.16; 128: 0.17-0.18, and
 * with the pairs 0.18-0.20, f32 d64/d128 seq 1024). */
enum { CPU_TILE_Q_LANES = 128 };
/* The AMX kernel (bf16) packs each K/V tile for all the tile's rows, in
 * 32-row steps: 128 rows spread the packing thinner (64: 0.33, 128: 0.41
 * TFLOP/s on the 2-core Xeon, bf16 d128 seq 1024), and 128 keys give each
 * row's softmax and each O tile's load and store more work. */
enum { CPU_TILE_Q_AMX = 128, CPU_TILE_KV_AMX = 128 };

static int cpu_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static void cpu_probe(const fattn_settings *settings, fattn_probe *out) {
    (void)settings;
    out->device_count = 1;
    out->gpu_count = 0;
    out->auto_score = 100; /* always there, the last choice */
    out->reason[0] = '\0';
}

/* "model name" from /proc/cpuinfo where there is one. */
static fattn_status cpu_device_name(const fattn_settings *settings, int device, char *buf,
                                    size_t len, fattn_msg *msg) {
    (void)settings;
    (void)device;
    (void)msg;
    char line[512], model[256] = "CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                colon += 1 + (colon[1] == ' ');
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(model, sizeof model, "%s", colon);
                break;
            }
        }
        fclose(f);
    }
    snprintf(buf, len, "%s (%d threads)", model, cpu_cores());
    return FATTN_OK;
}

/* FATTN_CPU_ISA (v; NULL or "auto": the machine's best): a level this CPU
 * lacks is an error, so a test that forces one never runs another. The
 * x86-64 levels are ordered (each runs where a higher one does); NEON is
 * AArch64's; portable runs everywhere. */
static fattn_status cpu_isa_setting(const char *v, int *isa, fattn_msg *msg) {
    static const char *const names[] = {"portable", "avx2", "avx512", "amx", "neon"};
    const cpu_isa best = cpu_isa_of_machine();
    *isa = (int)best;
    if (!v || !strcmp(v, "auto")) return FATTN_OK;
    for (int i = 0; i < 5; i++) {
        if (strcmp(v, names[i])) continue;
        const int runs = i == CPU_ISA_PORTABLE || i == (int)best ||
                         (CPU_X86_AT_LEAST(i, CPU_ISA_AVX2) && CPU_X86_AT_LEAST(best, i));
        if (!runs)
            return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                              "FATTN_CPU_ISA='%s': this CPU runs at most '%s' (unset it or "
                              "pass auto)",
                              v, names[best]);
        *isa = i;
        return FATTN_OK;
    }
    return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                      "FATTN_CPU_ISA='%.64s' is not auto, amx, avx512, avx2, neon or portable", v);
}

static fattn_status cpu_open(const fattn_open_args *args, void **state, fattn_msg *msg) {
    if (args->native_context || args->native_device || args->native_queue || args->native_current)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "the CPU backend takes no native context, device or queue");
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the CPU backend state");
    const int threads = args->settings ? args->settings->cpu_threads : 0;
    s->threads = threads > 0 ? threads : cpu_cores();
    fattn_status st = cpu_isa_setting(args->settings ? args->settings->cpu_isa : NULL, &s->isa, msg);
    if (st != FATTN_OK) {
        free(s);
        return st;
    }
    s->pool = cpu_pool_create(); /* its threads start with the first call */
    if (!s->pool) {
        free(s);
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate the CPU thread pool");
    }
    *state = s;
    return FATTN_OK;
}

static void cpu_close(void *state) {
    cpu_state *s = state;
    cpu_pool_destroy(s->pool);
    free(s);
}

uint64_t cpu_memory_limit(void) {
#ifdef __linux__
    struct sysinfo si;
    if (sysinfo(&si) == 0) return ((uint64_t)si.totalram + (uint64_t)si.totalswap) * si.mem_unit;
#endif
    return UINT64_MAX;
}

static fattn_status cpu_buffer_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    (void)state;
    /* More than the machine's RAM and swap together cannot be backed; some
     * allocators (and ASan) abort rather than return NULL for such sizes. */
    const uint64_t limit = cpu_memory_limit();
    if ((uint64_t)bytes > limit)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY,
                          "cannot allocate %zu bytes of host memory: the machine has %llu bytes of "
                          "RAM and swap",
                          bytes, (unsigned long long)limit);
    /* 64-byte alignment for vector loads; aligned_alloc wants a multiple. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = rounded >= bytes ? aligned_alloc(64, rounded) : NULL;
    if (!p)
        return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory",
                          bytes);
    *mem = p; /* a CPU buffer is its address; the core knows alloc from wrap */
    return FATTN_OK;
}

static fattn_status cpu_buffer_wrap(void *state, void *native, size_t bytes, void **mem,
                                    fattn_msg *msg) {
    (void)state;
    (void)bytes;
    (void)msg;
    *mem = native;
    return FATTN_OK;
}

static void cpu_buffer_free(void *state, void *mem, int owned) {
    (void)state;
    if (owned) free(mem);
}

static fattn_status cpu_buffer_write(void *state, void *mem, size_t offset, const void *src,
                                     size_t bytes, fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy((char *)mem + offset, src, bytes);
    return FATTN_OK;
}

static fattn_status cpu_buffer_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                                    fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy(dst, (const char *)mem + offset, bytes);
    return FATTN_OK;
}

static void *cpu_buffer_native(void *state, void *mem) {
    (void)state;
    return mem;
}

static fattn_status cpu_buffer_region(void *state, void *mem, const void **root, uint64_t *start,
                                      fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = NULL; /* one address space */
    *start = (uint64_t)(uintptr_t)mem;
    return FATTN_OK;
}

/* Key splits for a problem: the caller's count (capped at one per key
 * tile), else enough to give every thread a work item when (sequences x KV
 * heads x row tiles) cannot, never below CPU_SPLIT_MIN_KEYS keys a split.
 * Splits cost a merge pass (a second thread launch) and a workspace; they
 * pay only when threads would otherwise idle (batch-1 decoding with few KV
 * heads on many cores). 8192: on a 2-core EPYC VM (bf16, d128, 8 query
 * heads on 1 KV head, one row tile), 2 splits took 32768 keys from 4.6-5.8
 * to 3.4-5.5 ms but 4096 and 8192 keys from 0.63 to 0.83 ms and 1.0-1.4 to
 * 1.3-1.7 ms (noisy: a shared machine). */
enum { CPU_SPLIT_MIN_KEYS = 8192 };
/* All-heads items (decoding, cpu_avx2_heads.c) read every head's keys, so a
 * split of 1024 keys already streams heads_kv x 1024 rows of K and V. */
enum { CPU_SPLIT_MIN_KEYS_ALL_HEADS = 1024 };
static int64_t choose_splits(const cpu_state *s, const fattn_problem *p, int64_t tq, int64_t tkv,
                             cpu_tiled_kind kind) {
    const int64_t key_tiles = (p->seq_kv + tkv - 1) / tkv;
    int64_t n;
    if (p->tune.kv_splits > 0) {
        n = p->tune.kv_splits;
    } else {
        const int64_t rows = p->seq_q * (p->heads_q / p->heads_kv);
        const int64_t items = kind == CPU_TILED_ALL_HEADS
                                  ? p->batch
                                  : p->batch * p->heads_kv * ((rows + tq - 1) / tq);
        const int64_t threads = cpu_threads(s, p);
        const int64_t floor =
            kind == CPU_TILED_ALL_HEADS ? CPU_SPLIT_MIN_KEYS_ALL_HEADS : CPU_SPLIT_MIN_KEYS;
        if (items >= threads) return 1;
        /* All-heads splits are cheap: four a thread even out a core that
         * another process takes for a while. */
        const int64_t want = kind == CPU_TILED_ALL_HEADS ? 4 * threads : threads;
        n = (want + items - 1) / items;
        if (n > p->seq_kv / floor) n = p->seq_kv / floor;
    }
    if (n > key_tiles) n = key_tiles;
    return n > 1 ? n : 1;
}

/* The key splits of plan tp (its kind set): whole key tiles per split, so
 * that a split's tiles are the unsplit ones; one split when the workspace
 * would be too large. */
static void split_plan(const cpu_state *s, const fattn_problem *p, int64_t tq, int64_t tkv,
                       cpu_tiled_plan *tp) {
    tp->splits = choose_splits(s, p, tq, tkv, tp->kind);
    tp->chunk = tp->splits > 1 ? ((p->seq_kv + tp->splits - 1) / tp->splits + tkv - 1) / tkv * tkv
                               : p->seq_kv;
    if (tp->splits > 1) tp->splits = (p->seq_kv + tp->chunk - 1) / tp->chunk;
    const uint64_t ws = cpu_split_workspace(p, tp->splits);
    if (ws == UINT64_MAX || ws > cpu_memory_limit() / 4) tp->splits = 1, tp->chunk = p->seq_kv;
}

static fattn_status accept_tiled(void *state, const fattn_problem *p, fattn_plan *plan,
                                 fattn_msg *msg) {
    const cpu_state *s = state;
    if (p->tune.tile_q > CPU_TILE_MAX || p->tune.tile_kv > CPU_TILE_MAX)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tile_q = %d, tile_kv = %d: the CPU backend takes tiles up to %d",
                          p->tune.tile_q, p->tune.tile_kv, CPU_TILE_MAX);
    plan->tiling.tile_q = p->tune.tile_q                ? p->tune.tile_q
                          : cpu_isa_has_lanes(s->isa) ? CPU_TILE_Q_LANES
                                                     : CPU_TILE_Q;
    plan->tiling.tile_kv = p->tune.tile_kv ? p->tune.tile_kv : CPU_TILE_KV;
    plan->tiling.concurrent_groups = cpu_threads(s, p); /* one tile set per thread */
    cpu_tiled_plan *tp = FATTN_PLAN_AREA(plan, cpu_tiled_plan);
    tp->kind = cpu_tiled_kind_of(p, plan->tiling.tile_q, plan->tiling.tile_kv, s->isa);
    /* Per-head bf16 tiles go to the AMX kernel, with its own defaults. */
    if (tp->kind == CPU_TILED_PER_HEAD && s->isa == CPU_ISA_AMX &&
        cpu_amx_fits(p, p->tune.tile_q ? p->tune.tile_q : CPU_TILE_Q_AMX)) {
        if (!p->tune.tile_q) plan->tiling.tile_q = CPU_TILE_Q_AMX;
        if (!p->tune.tile_kv) plan->tiling.tile_kv = CPU_TILE_KV_AMX;
    }
    const int64_t tkv = plan->tiling.tile_kv;
    split_plan(s, p, plan->tiling.tile_q, tkv, tp);
    plan->tiling.workspace_bytes = cpu_split_workspace(p, tp->splits);
    /* Without operands (fattn_workspace_size) the layout is unknown, and
     * with it the kind: the answer covers both, so a workspace of that size
     * serves whichever the forward takes. */
    if (!p->has_operands && tp->kind == CPU_TILED_PER_HEAD) {
        cpu_tiled_plan other = *tp;
        other.kind = CPU_TILED_ALL_HEADS;
        split_plan(s, p, plan->tiling.tile_q, tkv, &other);
        const uint64_t ws = cpu_split_workspace(p, other.splits);
        if (ws > plan->tiling.workspace_bytes) plan->tiling.workspace_bytes = ws;
    }
    return FATTN_OK;
}

/* Row-at-a-time work (the naive S and P, the combine): nothing to plan;
 * the naive memory check needs nothing from the plan. */
static fattn_status accept_rows(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg) {
    (void)state;
    (void)plan;
    return fattn_dense_only(p, "the naive baseline", msg);
}

/* The CPU backend's kernel variants: the planner takes the first row of
 * the problem's op that accepts it. */
static const fattn_variant cpu_variants[] = {
    {"tiled", FATTN_OP_FORWARD, accept_tiled, cpu_forward_tiled},
    {"naive", FATTN_OP_FORWARD_NAIVE, accept_rows, cpu_forward_naive},
    {"combine", FATTN_OP_COMBINE, accept_rows, cpu_combine},
};
enum { CPU_VARIANTS = sizeof cpu_variants / sizeof cpu_variants[0] };

static fattn_status cpu_plan(void *state, const fattn_problem *p, fattn_plan *plan,
                             fattn_msg *msg) {
    return fattn_plan_from_table(cpu_variants, CPU_VARIANTS, state, p, plan, msg);
}

static fattn_status cpu_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                            fattn_msg *msg) {
    return fattn_run_from_table(cpu_variants, CPU_VARIANTS, state, p, plan, msg);
}

/* desc->append on the host: the core's fattn_check_tables vetted every
 * sequence's new keys (seqused_kv plus seq_new within the cache, their
 * pages in range) before this runs, so each new row is copied where its
 * key lies, as bytes (bit for bit in every dtype). */
static fattn_status cpu_append(void *state, const fattn_problem *p, fattn_msg *msg) {
    (void)state, (void)msg;
    const fattn_ragged *g = &p->rag;
    /* K rows have head_dim elements, V rows head_dim_v. */
    const size_t row[2] = {(size_t)(p->head_dim * fattn_esize(p->dtype)),
                           (size_t)(p->head_dim_v * fattn_esize(p->dtype))};
    const fattn_operand *dst[2] = {&p->k, &p->v}, *src[2] = {&p->k_new, &p->v_new};
    for (int64_t b = 0; b < p->batch; b++) {
        const int64_t len = fattn_table_at(&g->seqused_kv, g->seqused_kv.mem, 0, b);
        for (int64_t t = 0; t < p->seq_new; t++) {
            const int64_t j = len + t;
            /* Paged: slot j % page_size of the page the block table names. */
            const int64_t kb = g->page_size ? fattn_table_at(&g->block_table, g->block_table.mem, b,
                                                             j / g->page_size)
                                            : b;
            const int64_t kj = g->page_size ? j % g->page_size : j;
            for (int64_t h = 0; h < p->heads_kv; h++)
                for (int x = 0; x < 2; x++)
                    memcpy((void *)cpu_elem(dst[x], p->dtype, kb, h, kj),
                           cpu_elem(src[x], p->dtype, b, h, t), row[x]);
        }
    }
    return FATTN_OK;
}

/* Host RAM: MemTotal and MemTotal - MemAvailable from /proc/meminfo. */
static fattn_status cpu_device_memory(void *state, uint64_t *used, uint64_t *total,
                                      fattn_msg *msg) {
    (void)state;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "cannot open /proc/meminfo");
    char line[256];
    unsigned long long kb, mem_total = 0, mem_avail = 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            mem_total = kb, found |= 1;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            mem_avail = kb, found |= 2;
    }
    fclose(f);
    if (found != 3 || mem_avail > mem_total)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "/proc/meminfo has no MemTotal and MemAvailable");
    *total = (uint64_t)mem_total * 1024;
    *used = (uint64_t)(mem_total - mem_avail) * 1024;
    return FATTN_OK;
}

static const fattn_backend_vtable cpu_vtable = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_CPU,
    .name = "cpu",
    .native_is_host = 1,
    .probe = cpu_probe,
    .device_name = cpu_device_name,
    .open = cpu_open,
    .close = cpu_close,
    .set_stream = NULL,  /* no queues: only a NULL stream is accepted */
    .synchronize = NULL, /* every call completes before it returns */
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_wrap = cpu_buffer_wrap,
    .buffer_free = cpu_buffer_free,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_native = cpu_buffer_native,
    .buffer_region = cpu_buffer_region,
    .plan = cpu_plan,
    .run = cpu_run,
    .device_memory = cpu_device_memory,
    .append = cpu_append,
};

/* Declared by the registry, the one caller. */
const fattn_backend_vtable *fattn_cpu_backend(void);
const fattn_backend_vtable *fattn_cpu_backend(void) { return &cpu_vtable; }
