/* libFuzzer target for validation and the forward call on the CPU backend.
 * The input bytes become an attention description (sizes, dtype, flags,
 * scale, causal alignment, the struct's own size: mostly valid, sometimes
 * zero, negative, huge or garbage; sometimes mask, varlen and paged-KV
 * sub-descriptions and a workspace), the context's tile parameters, and
 * five tensors over host memory wrapped as fattn buffers: one arena with
 * guard zones, carved into regions that may overlap, at odd offsets, with odd
 * strides. Then fattn_forward runs, and sometimes the naive path, the
 * accounting calls, the host call, the buffer copies and fattn_combine
 * (random parts and outputs in the arena). Sometimes the input builds a
 * whole variable-length or paged problem instead (decode_ragged: packed Q,
 * packed, dense-padded or paged K/V, seqused_kv, index tables in a block of
 * their own with guards, good or with one entry or size spoiled), and sets
 * the context's key split count (FATTN_PARAM_KV_SPLITS) or a workspace of
 * fattn_workspace_size's bytes.
 *
 * Every sized struct the library is given (the description, the
 * sub-descriptions and their tensors) lives in heap memory of exactly the
 * size it claims (at least a size_t), with a zero or non-zero tail when it
 * claims more than its type: under ASan, a read past what the size covers is
 * a report.
 *
 * A violation traps: a crash or sanitizer report, a status outside the
 * table, a failure with an empty message, a success with a message, any byte
 * changed outside O's and LSE's elements (inputs, padding, guards; on a
 * failure no byte at all), a success that let outputs overlap each other or
 * the inputs, and, for finite inputs, an output outside the values of V or
 * an LSE that is NaN, or -inf where the row sees a key; a success with a
 * description of size 0 or with a non-zero tail, with a mask of a bad size
 * or value (window < -1, a negative or non-finite softcap), a tensor of size 0, a
 * workspace of another context, or a varlen or paged description in the
 * host call; a varlen or paged call accepted with totals, sizes or index
 * tables that break the rules of src/seam/backend.h (fattn_ragged) and
 * src/tables.c, or on the naive path, or one that writes O or LSE rows no
 * sequence owns or writes a table; FATTN_ERR_INDEX_TABLE for tables that
 * keep the rules; a tile or split parameter refused when valid or taken
 * when out of range; fattn_combine writing outside O and LSE, or O and LSE
 * inside the parts' span.
 *
 * scripts/fuzz.sh builds and runs it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fattn.h"
#include "half.h"

/* Memory per input stays under 8 MiB: arena + snapshot + two byte maps of
 * at most 2 MiB each, besides what the call itself allocates. */
enum {
    MAX_ARENA = 2 << 20,
    GUARD = 4096,
    REGIONS = 4,
    FLOP_LIMIT = 1 << 24,  /* a forward of at most this many FLOPs: ~10 ms here */
    NAIVE_LIMIT = 8 << 20, /* bytes of S and P the naive path may allocate */
    POISON = 0xff,         /* a NaN in every dtype */
    GUARD_BYTE = 0xa5,
};

static fattn_context *ctx, *other_ctx;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_forward: violation: ");                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

/* ---- Input decoding -------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static uint64_t u64(reader *r) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)u8(r) << (8 * i);
    return x;
}

/* A size: small half the time, else a tile edge, 0, negative, or huge. */
static int64_t size_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 15) {
    case 0: return 0;
    case 1: return -1 - (int64_t)(x & 63);
    case 2: return 1 + (int64_t)x;
    case 3: return 62 + (x & 7); /* 62..69: tile edges */
    case 4: return INT64_MAX - (x & 15);
    case 5: return ((int64_t)1 << (31 + (x & 31))) - (x >> 5); /* 2^31 .. 2^62 */
    case 6: return (int64_t)u64(r);
    case 7: return 120 + (x & 15);
    default: return 1 + (x & 7);
    }
}

/* Head dimension: 1..256 mostly, with the edges outside. */
static int64_t dim_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 7) {
    case 0: return size_val(r);
    case 1: return 256 + (x & 3) - 1; /* 255..258 */
    case 2: return 1 + x;             /* 1..256 */
    default: return 1 + (x & 63);
    }
}

static float scale_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 15) {
    case 1: return NAN;
    case 2: return INFINITY;
    case 3: return -INFINITY;
    case 4: return -0.125f * (float)(1 + (x & 7));
    case 5: {
        uint32_t bits = (uint32_t)u64(r);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case 6: return 1e-30f;
    case 7: return 0.05f * (float)(1 + x);
    default: return 0.0f; /* 1/sqrt(head_dim) */
    }
}

static int tile_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 15) {
    case 1: return 1 + (x & 15);
    case 2: return 1 + x * 4; /* up to 1021 */
    case 3: return -1 - x;
    case 4: return 1025 + x;
    case 5: return (int)(uint32_t)u64(r);
    default: return 0;
    }
}

static fattn_dtype dtype_val(reader *r) {
    const uint8_t x = u8(r);
    if (x < 240) return (fattn_dtype)(x % 3);
    return (fattn_dtype)(int)(int32_t)(uint32_t)u64(r); /* garbage */
}

/* A tile parameter for fattn_context_set_param: mostly an int, sometimes
 * past what an int holds. */
static int64_t tile_param_val(reader *r) {
    const uint8_t sel = u8(r);
    if ((sel & 7) == 7) return (int64_t)u64(r);
    return tile_val(r);
}

/* ---- Sized structs ---------------------------------------------------------------- */

/* Where a field of a sized struct lies. */
typedef struct field {
    size_t off, len;
} field;
#define FIELD(type, name)                                                                          \
    { offsetof(type, name), sizeof(((type *)0)->name) }
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const field desc_fields[] = {
    FIELD(fattn_attention_desc, batch),    FIELD(fattn_attention_desc, heads_q),
    FIELD(fattn_attention_desc, heads_kv), FIELD(fattn_attention_desc, seq_q),
    FIELD(fattn_attention_desc, seq_kv),   FIELD(fattn_attention_desc, head_dim),
    FIELD(fattn_attention_desc, dtype),    FIELD(fattn_attention_desc, scale),
    FIELD(fattn_attention_desc, causal),   FIELD(fattn_attention_desc, flags),
    FIELD(fattn_attention_desc, mask),     FIELD(fattn_attention_desc, varlen),
    FIELD(fattn_attention_desc, paged_kv), FIELD(fattn_attention_desc, workspace),
};
static const field mask_fields[] = {
    FIELD(fattn_mask_desc, window_left), FIELD(fattn_mask_desc, window_right),
    FIELD(fattn_mask_desc, softcap),     FIELD(fattn_mask_desc, alibi_slopes),
    FIELD(fattn_mask_desc, sinks),       FIELD(fattn_mask_desc, bias),
};
static const field varlen_fields[] = {
    FIELD(fattn_varlen_desc, cu_seqlens_q), FIELD(fattn_varlen_desc, cu_seqlens_kv),
    FIELD(fattn_varlen_desc, seqused_kv),   FIELD(fattn_varlen_desc, total_q),
    FIELD(fattn_varlen_desc, total_kv),
};
static const field paged_fields[] = {
    FIELD(fattn_paged_kv_desc, block_table),
    FIELD(fattn_paged_kv_desc, pages_per_seq),
    FIELD(fattn_paged_kv_desc, page_size),
    FIELD(fattn_paged_kv_desc, num_pages),
};
static const field tensor_fields[] = {
    FIELD(fattn_tensor, buffer),      FIELD(fattn_tensor, dtype),
    FIELD(fattn_tensor, offset),      FIELD(fattn_tensor, stride_batch),
    FIELD(fattn_tensor, stride_head), FIELD(fattn_tensor, stride_seq),
    FIELD(fattn_tensor, stride_dim),
};

/* A size a caller may put in a struct: mostly its own; sometimes 0, a
 * smaller one (where a field starts, as an older caller's, or any byte
 * count), or a larger one (a newer caller's) whose extra bytes are zero or
 * hold one non-zero byte. */
typedef struct sized {
    size_t size;
    size_t tail_pos; /* the non-zero extra byte, when tail != 0 */
    uint8_t tail;
} sized;

static sized sized_val(reader *r, size_t own, const field *f, int n) {
    sized z = {own, 0, 0};
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 7) {
    case 1: z.size = 0; break;
    case 2: z.size = f[x % n].off; break;
    case 3: z.size = x % own; break;
    case 4: z.size = own + 8 * (1 + (size_t)(x % 8)); break;
    case 5:
        z.size = own + 1 + (size_t)(x % 64);
        z.tail_pos = own + u8(r) % (z.size - own);
        z.tail = u8(r) | 1;
        break;
    default: break;
    }
    return z;
}

/* What the library must refuse whatever else the struct holds. */
static int sized_refused(sized z) { return z.size == 0 || z.tail != 0; }

/* The struct as the library reads it: the fields that size covers whole
 * from src, INIT's values (init) for the others. */
static void covered(void *dst, const void *src, const void *init, size_t own, size_t size,
                    const field *f, int n) {
    memcpy(dst, init, own);
    for (int i = 0; i < n; i++)
        if (f[i].off + f[i].len <= size)
            memcpy((char *)dst + f[i].off, (const char *)src + f[i].off, f[i].len);
    memcpy(dst, &size, sizeof size);
}

/* Heap copies handed to the library, freed after each input. */
enum { MAX_SIZED = 32 };
static void *sized_live[MAX_SIZED];
static int sized_count;

/* src (a struct of `own` bytes) in heap memory of exactly z.size bytes (at
 * least a size_t, where the size itself lies), with z's size and tail. */
static void *sized_copy(const void *src, size_t own, sized z) {
    const size_t n = z.size > sizeof(size_t) ? z.size : sizeof(size_t);
    unsigned char *p = calloc(1, n);
    if (!p || sized_count == MAX_SIZED) abort();
    memcpy(p, src, n < own ? n : own);
    memcpy(p, &z.size, sizeof z.size);
    if (z.tail) p[z.tail_pos] = z.tail;
    sized_live[sized_count++] = p;
    return p;
}

static void sized_free_all(void) {
    for (int i = 0; i < sized_count; i++) free(sized_live[i]);
    sized_count = 0;
}

/* ---- Regions of the arena -------------------------------------------------------- */

typedef struct region {
    size_t start, len; /* bytes within the arena */
    fattn_buffer *buf; /* wrapper of ctx (or other_ctx), NULL if none */
    int foreign;       /* wraps through other_ctx */
} region;

typedef struct world {
    unsigned char *block; /* GUARD + arena + GUARD */
    unsigned char *arena;
    size_t arena_len;
    unsigned char *snap, *out_map, *in_map;
    region reg[REGIONS + 1]; /* the last: a foreign wrapper */
    /* Index tables built whole (decode_ragged): int32 elements with guard
     * elements either side, wrapped as a buffer of ctx; never written. */
    int32_t *tab_block, *tab, *tab_snap;
    int64_t tab_n;
    fattn_buffer *tab_buf;
} world;

static size_t es_of(fattn_dtype t) { return t == FATTN_F32 ? 4 : 2; }

static void put_value(unsigned char *at, fattn_dtype t, float x) {
    if (t == FATTN_F32) {
        memcpy(at, &x, 4);
    } else {
        uint16_t h = t == FATTN_F16 ? fattn_f32_to_f16(x) : fattn_f32_to_bf16(x);
        memcpy(at, &h, 2);
    }
}

static float get_value(const unsigned char *at, fattn_dtype t) {
    if (t == FATTN_F32) {
        float x;
        memcpy(&x, at, 4);
        return x;
    }
    uint16_t h;
    memcpy(&h, at, 2);
    return t == FATTN_F16 ? fattn_f16_to_f32(h) : fattn_bf16_to_f32(h);
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Values in [-4, 4], never 0, element-aligned from the arena's start; with
 * `specials`, some infinities and NaNs. The first 16 KiB repeat, for speed. */
static void fill_arena(world *w, fattn_dtype t, uint64_t seed, int specials) {
    const size_t es = es_of(t), period = 16384;
    for (size_t i = 0; i + es <= w->arena_len && i < period; i += es) {
        float x = (float)((double)(next_rand(&seed) >> 11) * (8.0 / 9007199254740992.0) - 4.0);
        if (x == 0.0f) x = 0.5f;
        if (specials && (next_rand(&seed) & 63) == 0) {
            static const float sp[4] = {INFINITY, -INFINITY, NAN, -NAN};
            x = sp[next_rand(&seed) & 3];
        }
        put_value(w->arena + i, t, x);
    }
    for (size_t i = period; i < w->arena_len; i += period)
        memcpy(w->arena + i, w->arena, w->arena_len - i < period ? w->arena_len - i : period);
    for (size_t i = w->arena_len - w->arena_len % es; i < w->arena_len; i++) w->arena[i] = 0x3c;
}

/* ---- Checking calls -------------------------------------------------------------- */

static int status_known(fattn_status st) {
    switch (st) {
#define KNOWN_(name, value, text) case FATTN_##name:
        FATTN_STATUS_MAP(KNOWN_)
#undef KNOWN_
        return 1;
    default: return 0;
    }
}

/* Every call's status is in the table; failures say why, successes say nothing. */
static int trace; /* FUZZ_FORWARD_TRACE=1: every call's status on stderr (for writing seeds) */

static void check_status(fattn_status st, const fattn_context *c, const char *call) {
    CHECK(status_known(st), "%s returned %d, not a fattn_status", call, (int)st);
    const char *msg = fattn_error_message(c);
    if (trace) fprintf(stderr, "  %s: %s %s\n", call, fattn_status_string(st), msg ? msg : "");
    CHECK(msg != NULL, "%s: fattn_error_message is NULL", call);
    if (st != FATTN_OK)
        CHECK(msg[0] != '\0', "%s failed with %s and an empty message", call,
              fattn_status_string(st));
    else
        CHECK(msg[0] == '\0', "%s succeeded but left the message \"%.200s\"", call, msg);
}

/* A tensor's elements as rows of `row` contiguous elements, in arena bytes.
 * Marks each byte in map; returns 0 if a row leaves [lo, hi) or, with
 * `exclusive`, meets a byte already marked. Arithmetic in 128 bits: the
 * strides may be anything the library let through. */
static int mark_rows(unsigned char *map, size_t lo, size_t hi, const fattn_tensor *t, size_t es,
                     int64_t B, int64_t H, int64_t S, int64_t row, int exclusive) {
    if (B <= 0 || H <= 0 || S <= 0 || row <= 0) return 1; /* no elements */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                const __int128 e = (__int128)t->offset + (__int128)b * t->stride_batch +
                                   (__int128)h * t->stride_head + (__int128)s * t->stride_seq;
                const __int128 first = (__int128)lo + e * (__int128)es;
                const __int128 end = first + (__int128)row * (__int128)es;
                if (e < 0 || first < (__int128)lo || end > (__int128)hi) return 0;
                for (size_t i = (size_t)first; i < (size_t)end; i++) {
                    if (exclusive && map[i]) return 0;
                    map[i] = 1;
                }
            }
    return 1;
}

/* The region a tensor's buffer wraps, or NULL. */
static const region *region_of(const world *w, const fattn_buffer *buf) {
    if (!buf) return NULL;
    for (int i = 0; i <= REGIONS; i++)
        if (w->reg[i].buf == buf) return &w->reg[i];
    return NULL;
}

/* Rows a tensor has, or -1 when that does not fit in 64 bits. */
static int64_t rows_of(int64_t B, int64_t H, int64_t S) {
    int64_t n;
    if (B < 0 || H < 0 || S < 0 || __builtin_mul_overflow(B, H, &n) ||
        __builtin_mul_overflow(n, S, &n))
        return -1;
    return n;
}

/* Poisons the elements of an output tensor where they can be found within
 * its region, so an element left unwritten shows as NaN. */
static void poison_output(world *w, const fattn_tensor *t, size_t es, int64_t B, int64_t H,
                          int64_t S, int64_t row) {
    const region *r = region_of(w, t->buffer);
    const int64_t rows = rows_of(B, H, S);
    if (!r || rows <= 0 || row < 1 || (uint64_t)rows > r->len / es / (uint64_t)row) return;
    memset(w->out_map, 0, w->arena_len);
    if (!mark_rows(w->out_map, r->start, r->start + r->len, t, es, B, H, S, row, 0)) return;
    for (size_t i = r->start; i < r->start + r->len; i++)
        if (w->out_map[i]) w->arena[i] = POISON;
}

/* What the sub-descriptions passed: each, whether the library must refuse
 * the call for it (a size it must refuse, or a feature this release does
 * not have), and a workspace buffer made here. */
typedef struct extras {
    const fattn_mask_desc *mask;
    const fattn_varlen_desc *varlen;
    const fattn_paged_kv_desc *paged;
    fattn_buffer *workspace;
    int workspace_foreign, workspace_owned, workspace_exact;
    int mask_refused, varlen_refused, paged_refused;
    int mask_asks; /* the mask asks for a variant (window, softcap, ALiBi, sinks, bias) */
    /* What the library reads of the varlen and paged descriptions and of
     * their tables (see covered), and whether a table's own size must be
     * refused. */
    fattn_varlen_desc ve;
    fattn_paged_kv_desc pe;
    fattn_tensor tab[4]; /* cu_seqlens_q, cu_seqlens_kv, seqused_kv, block_table */
    int tab_refused;
} extras;

enum { T_CU_Q, T_CU_KV, T_USED, T_TABLE };

/* The outer shapes of Q/O/lse ([qb, heads_q, qs]) and K/V ([kb, heads_kv,
 * ks]) as the library reads the description: dense, packed or paged. */
typedef struct shape {
    int rag; /* variable-length or paged: sequences come from the tables */
    int64_t qb, qs, kb, ks;
} shape;

typedef struct call {
    fattn_attention_desc d;           /* as the library reads pass (see covered) */
    const fattn_attention_desc *pass; /* what the library is given, in sized memory */
    int desc_refused;                 /* pass's size must be refused */
    extras x;
    fattn_tensor t[5]; /* q, k, v, o, lse */
    int has_lse;
    int finite_inputs; /* the arena holds only finite values in [-4, 4] */
    shape sh;
    int64_t kv_splits; /* the context's FATTN_PARAM_KV_SPLITS for this input */
} call;

enum { TQ, TK, TV, TO, TL };

/* The guard zones, and every arena byte that the call may not write. */
static void check_memory(const world *w, const unsigned char *allowed, const char *what) {
    for (size_t i = 0; i < GUARD; i++) {
        CHECK(w->block[i] == GUARD_BYTE, "%s wrote %zu bytes before the arena", what, GUARD - i);
        CHECK(w->arena[w->arena_len + i] == GUARD_BYTE, "%s wrote %zu bytes past the arena", what,
              i + 1);
    }
    if (memcmp(w->arena, w->snap, w->arena_len) == 0) return;
    for (size_t i = 0; i < w->arena_len; i++)
        CHECK(w->arena[i] == w->snap[i] || (allowed && allowed[i]),
              "%s changed arena byte %zu (0x%02x -> 0x%02x), outside O and LSE", what, i,
              w->snap[i], w->arena[i]);
}

/* The outer shapes as the library reads c's description. */
static shape shape_of(const call *c) {
    const fattn_attention_desc *d = &c->d;
    const fattn_varlen_desc *v = d->varlen ? &c->x.ve : NULL;
    shape s = {0, d->batch, d->seq_q, d->batch, d->seq_kv};
    s.rag = d->paged_kv || (v && (v->cu_seqlens_q || v->cu_seqlens_kv || v->seqused_kv));
    if (v && v->cu_seqlens_q) s.qb = 1, s.qs = v->total_q;
    if (d->paged_kv)
        s.kb = c->x.pe.num_pages, s.ks = c->x.pe.page_size;
    else if (v && v->cu_seqlens_kv)
        s.kb = 1, s.ks = v->total_kv;
    return s;
}

/* Which tables the library reads: cu_seqlens_q, cu_seqlens_kv, seqused_kv,
 * block_table. */
static void tables_given(const call *c, int has[4]) {
    const fattn_varlen_desc *v = c->d.varlen ? &c->x.ve : NULL;
    has[T_CU_Q] = v && v->cu_seqlens_q;
    has[T_CU_KV] = v && v->cu_seqlens_kv;
    has[T_USED] = v && v->seqused_kv;
    has[T_TABLE] = c->d.paged_kv && c->x.pe.block_table;
}

/* Element (row, i) of an index table as the call saw it (the arena's
 * snapshot, or the table block); 0 when it lies outside its buffer. */
static int table_get(const world *w, const fattn_tensor *t, int64_t row, int64_t i, int64_t *out) {
    const unsigned char *base;
    size_t len;
    const region *g = region_of(w, t->buffer);
    if (g) {
        base = w->snap + g->start, len = g->len;
    } else if (t->buffer && t->buffer == w->tab_buf) {
        base = (const unsigned char *)w->tab_snap, len = (size_t)w->tab_n * 4;
    } else {
        return 0;
    }
    const __int128 e =
        (__int128)t->offset + (__int128)row * t->stride_batch + (__int128)i * t->stride_seq;
    if (e < 0 || (e + 1) * 4 > (__int128)len) return 0;
    int32_t x;
    memcpy(&x, base + (size_t)e * 4, 4);
    *out = x;
    return 1;
}

/* The index tables by the rules of src/seam/backend.h (fattn_ragged) and
 * src/tables.c, in their order: 1 good, 0 bad (FATTN_ERR_INDEX_TABLE), -1
 * an entry outside its buffer. Only for descriptions layout_refusal passes. */
static int tables_good(const world *w, const call *c) {
    const fattn_attention_desc *d = &c->d;
    const extras *x = &c->x;
    int has[4];
    tables_given(c, has);
    for (int64_t b = 0; b < d->batch; b++) {
        int64_t lo, hi, cap = d->seq_kv, len;
        if (has[T_CU_Q]) {
            if (!table_get(w, &x->tab[T_CU_Q], 0, b, &lo) ||
                !table_get(w, &x->tab[T_CU_Q], 0, b + 1, &hi))
                return -1;
            if (lo < 0 || hi < lo || hi > x->ve.total_q || hi - lo > d->seq_q) return 0;
        }
        if (has[T_CU_KV]) {
            if (!table_get(w, &x->tab[T_CU_KV], 0, b, &lo) ||
                !table_get(w, &x->tab[T_CU_KV], 0, b + 1, &hi))
                return -1;
            if (lo < 0 || hi < lo || hi > x->ve.total_kv || hi - lo > d->seq_kv) return 0;
            cap = hi - lo;
        }
        len = cap;
        if (has[T_USED]) {
            if (!table_get(w, &x->tab[T_USED], 0, b, &len)) return -1;
            if (len < 0 || len > cap) return 0;
        }
        if (!d->paged_kv) continue;
        for (int64_t pg = 0; pg * x->pe.page_size < len; pg++) {
            int64_t page;
            if (!table_get(w, &x->tab[T_TABLE], b, pg, &page)) return -1;
            if (page < 0 || page >= x->pe.num_pages) return 0;
        }
    }
    return 1;
}

/* Sequence b of a call whose tables are good: Q/O batch index and first
 * row, query rows, keys. */
typedef struct seqv {
    int64_t qbatch, row0, len_q, len_kv;
} seqv;

static seqv seq_of(const world *w, const call *c, int64_t b) {
    const fattn_attention_desc *d = &c->d;
    seqv s = {b, 0, d->seq_q, d->seq_kv};
    int has[4];
    int64_t lo = 0, hi = 0;
    tables_given(c, has);
    if (has[T_CU_Q] && table_get(w, &c->x.tab[T_CU_Q], 0, b, &lo) &&
        table_get(w, &c->x.tab[T_CU_Q], 0, b + 1, &hi))
        s.qbatch = 0, s.row0 = lo, s.len_q = hi - lo;
    if (has[T_CU_KV] && table_get(w, &c->x.tab[T_CU_KV], 0, b, &lo) &&
        table_get(w, &c->x.tab[T_CU_KV], 0, b + 1, &hi))
        s.len_kv = hi - lo;
    if (has[T_USED]) table_get(w, &c->x.tab[T_USED], 0, b, &s.len_kv);
    return s;
}

/* Number of keys row i of a sequence sees: key j iff j <= i + off, off =
 * len_kv - len_q (bottom-right, per sequence) or 0 (top-left). */
static int64_t keys_seen(const fattn_attention_desc *d, const seqv *s, int64_t i) {
    if (d->causal == FATTN_CAUSAL_NONE) return s->len_kv;
    const int64_t off = d->causal == FATTN_CAUSAL_TOP_LEFT ? 0 : s->len_kv - s->len_q;
    int64_t lim = i + off + 1;
    return lim < 0 ? 0 : lim > s->len_kv ? s->len_kv : lim;
}

/* After a successful forward: outputs inside their buffers, not overlapping
 * each other or the inputs, nothing else written (with sequences from
 * tables, only their rows); tables of this context, int32, inside their
 * buffers and good; for finite inputs, values that a softmax-weighted mean
 * of V can take. */
static void check_forward_ok(world *w, const call *c, const char *what) {
    const fattn_attention_desc *d = &c->d;
    const size_t es = es_of(d->dtype);
    const shape sh = shape_of(c);
    const int64_t Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
    const region *ro = region_of(w, c->t[TO].buffer),
                 *rl = c->has_lse ? region_of(w, c->t[TL].buffer) : NULL;
    CHECK(ro && !ro->foreign, "%s accepted an O that is not a buffer of this context", what);
    const int64_t kv_rows = rows_of(sh.kb, Hk, sh.ks);
    for (int i = TQ; i <= TV; i++) {
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(!r || !r->foreign || (i != TQ && kv_rows == 0),
              "%s accepted a buffer of another context", what);
    }
    if (sh.rag) {
        int has[4];
        tables_given(c, has);
        for (int i = 0; i < 4; i++) {
            if (!has[i]) continue;
            const region *r = region_of(w, c->x.tab[i].buffer);
            CHECK(c->x.tab[i].dtype == FATTN_I32, "%s accepted index table %d of dtype %d", what, i,
                  (int)c->x.tab[i].dtype);
            CHECK(!r || !r->foreign, "%s accepted index table %d of another context", what, i);
        }
        const int good = tables_good(w, c);
        CHECK(good >= 0, "%s accepted an index table entry outside its buffer", what);
        CHECK(good == 1, "%s accepted bad index tables (FATTN_ERR_INDEX_TABLE expected)", what);
    }
    const int64_t orows = rows_of(sh.qb, Hq, sh.qs);
    CHECK(orows >= 0 && (uint64_t)orows <= ro->len / es / (uint64_t)D,
          "%s accepted an O with more elements than its buffer has room for", what);
    memset(w->out_map, 0, w->arena_len);
    memset(w->in_map, 0, w->arena_len);
    CHECK(mark_rows(w->out_map, ro->start, ro->start + ro->len, &c->t[TO], es, sh.qb, Hq, sh.qs, D,
                    1),
          "%s accepted an O whose elements overlap or leave its buffer", what);
    if (rl) {
        CHECK(!rl->foreign, "%s accepted an LSE of another context", what);
        CHECK((uint64_t)orows <= rl->len / 4, "%s accepted an LSE larger than its buffer", what);
        CHECK(mark_rows(w->out_map, rl->start, rl->start + rl->len, &c->t[TL], 4, sh.qb, Hq, sh.qs,
                        1, 1),
              "%s accepted an LSE that overlaps O or itself or leaves its buffer", what);
    }
    const int64_t bs[3] = {sh.qb, sh.kb, sh.kb}, seqs[3] = {sh.qs, sh.ks, sh.ks},
                  heads[3] = {Hq, Hk, Hk};
    for (int i = TQ; i <= TV; i++) {
        if (rows_of(bs[i], heads[i], seqs[i]) == 0) continue;
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(r, "%s accepted %c without a buffer", what, "qkv"[i]);
        CHECK(mark_rows(w->in_map, r->start, r->start + r->len, &c->t[i], es, bs[i], heads[i],
                        seqs[i], D, 0),
              "%s accepted %c with elements outside its buffer", what, "qkv"[i]);
    }
    for (size_t i = 0; i < w->arena_len; i++)
        CHECK(!(w->out_map[i] && w->in_map[i]),
              "%s accepted outputs that overlap inputs (byte %zu)", what, i);
    if (sh.rag) {
        /* Only the sequences' rows may change: packed rows past the last
         * sequence are not written. */
        memset(w->out_map, 0, w->arena_len);
        for (int64_t b = 0; b < d->batch; b++) {
            const seqv s = seq_of(w, c, b);
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < s.len_q; i++) {
                    fattn_tensor one = c->t[TO];
                    one.offset += s.qbatch * one.stride_batch + h * one.stride_head +
                                  (s.row0 + i) * one.stride_seq;
                    mark_rows(w->out_map, ro->start, ro->start + ro->len, &one, es, 1, 1, 1, D, 0);
                    if (!rl) continue;
                    one = c->t[TL];
                    one.offset += s.qbatch * one.stride_batch + h * one.stride_head +
                                  (s.row0 + i) * one.stride_seq;
                    mark_rows(w->out_map, rl->start, rl->start + rl->len, &one, 4, 1, 1, 1, 1, 0);
                }
        }
    }
    check_memory(w, w->out_map, what);

    /* The values below hold for plain attention: a window or a -inf bias
     * hides keys, sinks pull O towards 0 and set LSE, and the slopes, sinks
     * and bias are arena bytes of any dtype. test_variants checks the
     * variants' values against its reference. */
    if (!c->finite_inputs || (d->mask && c->x.mask_asks)) return;
    /* |score| <= 16 * 256 * 64: no overflow, so every row is defined. */
    for (int64_t b = 0; b < d->batch; b++) {
        const seqv s = seq_of(w, c, b);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < s.len_q; i++) {
                const int64_t seen = keys_seen(d, &s, i), row = s.row0 + i;
                const fattn_tensor *to = &c->t[TO];
                const int64_t e = to->offset + s.qbatch * to->stride_batch + h * to->stride_head +
                                  row * to->stride_seq;
                for (int64_t x = 0; x < D; x++) {
                    const float o =
                        get_value(w->arena + ro->start + (size_t)(e + x) * es, d->dtype);
                    if (seen == 0)
                        CHECK(o == 0.0f, "%s: seq %lld row %lld sees no key but O = %g", what,
                              (long long)b, (long long)i, (double)o);
                    else
                        CHECK(fabsf(o) <= 4.01f,
                              "%s: O = %g at seq %lld row %lld is not a mean of V's values in "
                              "[-4, 4]",
                              what, (double)o, (long long)b, (long long)i);
                }
                if (!rl) continue;
                const fattn_tensor *tl = &c->t[TL];
                const int64_t le = tl->offset + s.qbatch * tl->stride_batch + h * tl->stride_head +
                                   row * tl->stride_seq;
                const float l = get_value(w->arena + rl->start + (size_t)le * 4, FATTN_F32);
                if (seen == 0)
                    CHECK(l == -INFINITY, "%s: seq %lld row %lld sees no key but LSE = %g", what,
                          (long long)b, (long long)i, (double)l);
                else
                    CHECK(isfinite(l), "%s: seq %lld row %lld sees %lld keys but LSE = %g", what,
                          (long long)b, (long long)i, (long long)seen, (double)l);
            }
    }
}

/* ---- The calls ---------------------------------------------------------------------- */

/* Strides for a tensor of H heads, S rows of D: a layout, padded rows, zero,
 * overlapping, negative or raw. */
static void decode_tensor(reader *r, fattn_tensor *t, const world *w, fattn_dtype dtype, int64_t H,
                          int64_t S, int64_t D, int is_lse) {
    memset(t, 0, sizeof *t);
    const uint8_t pick = u8(r), mode = u8(r);
    /* Its size: its own, or rarely 0 (refused) or short of stride_dim (which
     * then takes its default, 1). */
    t->size = (pick & 0xf0) != 0xf0 ? sizeof *t
              : (pick & 8)          ? 0
                                    : offsetof(fattn_tensor, stride_dim);
    t->buffer = pick % 8 < REGIONS ? w->reg[pick % 8 % REGIONS].buf
                : pick % 8 == 4    ? w->reg[REGIONS].buf /* another context's */
                : pick % 8 == 5    ? NULL
                                   : w->reg[0].buf;
    t->dtype = is_lse ? FATTN_F32 : dtype;
    if (mode >= 0xf0) t->dtype = dtype_val(r);
    const uint64_t h = (uint64_t)H, s = (uint64_t)S, dd = (uint64_t)D;
    const uint64_t pad = 1 + (mode >> 6);
    switch (mode & 7) {
    case 0:
    case 1: /* BSHD */
        t->stride_head = (int64_t)dd;
        t->stride_seq = (int64_t)(h * dd);
        t->stride_batch = (int64_t)(h * s * dd);
        break;
    case 2: /* BHSD */
        t->stride_seq = (int64_t)dd;
        t->stride_head = (int64_t)(s * dd);
        t->stride_batch = (int64_t)(h * s * dd);
        break;
    case 3: /* padded rows */
        t->stride_seq = (int64_t)(dd + pad);
        t->stride_head = (int64_t)(s * (dd + pad));
        t->stride_batch = (int64_t)(h * s * (dd + pad));
        break;
    case 4: /* broadcast */ t->stride_seq = (mode & 8) ? (int64_t)dd : 0; break;
    case 5: /* rows overlap */
        t->stride_seq = (int64_t)(dd / 2);
        t->stride_head = (int64_t)(dd * s / 2 + 1);
        t->stride_batch = (int64_t)(h * s * dd);
        break;
    case 6:
        t->stride_batch = size_val(r);
        t->stride_head = size_val(r);
        t->stride_seq = size_val(r);
        break;
    default:
        t->stride_seq = (int64_t)(0 - dd);
        t->stride_head = (int64_t)dd;
        break;
    }
    if (is_lse && (mode & 7) <= 2) { /* [batch, heads, seq] of one element */
        t->stride_seq = 1;
        t->stride_head = (int64_t)s;
        t->stride_batch = (int64_t)(h * s);
    }
    t->stride_dim = (mode & 0x30) == 0x30 ? (int64_t)(int8_t)u8(r) : 1;
    const uint8_t off = u8(r);
    t->offset = off < 200 ? off % 16 : off < 250 ? 1 + off : size_val(r);
}

/* Places the regions: packed one after another for the sizes the description
 * asks (most calls can then succeed), one of them maybe misaligned, or
 * anywhere, overlapping. */
static void decode_regions(reader *r, world *w, const size_t want[5]) {
    const uint8_t mode = u8(r);
    size_t at = 0;
    for (int i = 0; i < REGIONS; i++) {
        size_t start, len;
        if (mode & 1) {
            start = (size_t)(u64(r) % w->arena_len);
            if (u8(r) & 1) start &= ~(size_t)63;
            len = (size_t)(u64(r) % (w->arena_len - start + 1));
        } else {
            start = at < w->arena_len ? at : w->arena_len - 1;
            if ((mode & 2) && i == (mode >> 2) % REGIONS && start + 3 < w->arena_len)
                start += 1 + (mode >> 4) % 3; /* misaligned for the dtype */
            /* Region 3 holds O and LSE side by side, unless LSE gets its own. */
            size_t need = i == 3 ? want[3] + want[4] + 64 : want[i];
            len = need < w->arena_len - start ? need : w->arena_len - start;
            at = (start + len + 63) & ~(size_t)63;
        }
        w->reg[i].start = start;
        w->reg[i].len = len;
    }
    w->reg[REGIONS].start = 0;
    w->reg[REGIONS].len = w->arena_len;
}

static void wrap_regions(world *w) {
    for (int i = 0; i <= REGIONS; i++) {
        region *g = &w->reg[i];
        fattn_context *c = i == REGIONS ? other_ctx : ctx;
        g->foreign = i == REGIONS;
        g->buf = NULL;
        fattn_status st = fattn_buffer_wrap(c, w->arena + g->start, g->len, &g->buf);
        check_status(st, c, "fattn_buffer_wrap");
        CHECK((st == FATTN_OK) == (g->buf != NULL),
              "fattn_buffer_wrap: status and buffer disagree");
        if (st == FATTN_OK)
            CHECK(fattn_buffer_size(g->buf) == g->len, "fattn_buffer_size is not the wrapped size");
    }
}

static void free_regions(world *w) {
    for (int i = 0; i <= REGIONS; i++) {
        fattn_buffer_free(w->reg[i].buf);
        w->reg[i].buf = NULL;
    }
}

/* ---- Sub-descriptions ---------------------------------------------------------------- */

/* A tensor a sub-description points to: NULL, or one over the regions,
 * fuzzed like an operand, in sized memory. */
static const fattn_tensor *sub_tensor_eff(reader *r, const world *w, fattn_dtype dtype, int64_t H,
                                          int64_t S, int64_t D, fattn_tensor *eff, int *refused) {
    const uint8_t sel = u8(r);
    if (!(sel & 1)) return NULL;
    fattn_tensor t;
    decode_tensor(r, &t, w, (sel & 2) ? dtype_val(r) : dtype, H, S, D, 0);
    const sized z = (sel & 4) ? sized_val(r, sizeof t, tensor_fields, COUNT(tensor_fields))
                              : (sized){sizeof t, 0, 0};
    if (eff) {
        const fattn_tensor init = FATTN_TENSOR_INIT;
        covered(eff, &t, &init, sizeof t, z.size, tensor_fields, COUNT(tensor_fields));
    }
    if (refused && sized_refused(z)) *refused = 1;
    return sized_copy(&t, sizeof t, z);
}

static const fattn_tensor *sub_tensor(reader *r, const world *w, fattn_dtype dtype, int64_t H,
                                      int64_t S, int64_t D) {
    return sub_tensor_eff(r, w, dtype, H, S, D, NULL, NULL);
}

static int64_t window_val(reader *r) {
    const uint8_t sel = u8(r);
    return (sel & 1) ? size_val(r) : (int64_t)(sel >> 1) % 8 - 2; /* -2..5, or anything */
}

static void decode_mask(reader *r, const world *w, const fattn_attention_desc *d, extras *x) {
    fattn_mask_desc m = FATTN_MASK_DESC_INIT;
    const uint8_t sel = u8(r);
    if (sel & 1) m.window_left = window_val(r);
    if (sel & 2) m.window_right = window_val(r);
    if (sel & 4) m.softcap = scale_val(r);
    if (sel & 8) m.alibi_slopes = sub_tensor(r, w, FATTN_F32, d->heads_q, 1, 1);
    if (sel & 16) m.sinks = sub_tensor(r, w, FATTN_F32, d->heads_q, 1, 1);
    if (sel & 32) m.bias = sub_tensor(r, w, d->dtype, d->heads_q, d->seq_q, d->seq_kv);
    const sized z = (sel & 64) ? sized_val(r, sizeof m, mask_fields, COUNT(mask_fields))
                               : (sized){sizeof m, 0, 0};
    x->mask = sized_copy(&m, sizeof m, z);
    const fattn_mask_desc init = FATTN_MASK_DESC_INIT;
    fattn_mask_desc e;
    covered(&e, &m, &init, sizeof m, z.size, mask_fields, COUNT(mask_fields));
    /* A mask equal to INIT asks for nothing. The CPU runs every variant, so
     * only a bad size or value must be refused (a window below -1, a
     * negative or non-finite cap); the tensors' own checks are the
     * library's. */
    x->mask_refused = sized_refused(z) || e.window_left < -1 || e.window_right < -1 ||
                      !isfinite(e.softcap) || e.softcap < 0.0f;
    x->mask_asks = e.window_left != -1 || e.window_right != -1 || e.softcap != 0.0f ||
                   e.alibi_slopes || e.sinks || e.bias;
}

static void decode_varlen(reader *r, const world *w, const fattn_attention_desc *d, extras *x) {
    fattn_varlen_desc v = FATTN_VARLEN_DESC_INIT;
    const uint8_t sel = u8(r);
    const int64_t B = d->batch > 0 && d->batch < 64 ? d->batch : 1;
    /* Index vectors as [1, 1, n] int32 rows (sometimes shaped otherwise). */
    const int64_t H = (sel & 128) ? 1 : B + 1, S = (sel & 128) ? B + 1 : 1, D = 1;
    if (sel & 1)
        v.cu_seqlens_q = sub_tensor_eff(r, w, FATTN_I32, H, S, D, &x->tab[T_CU_Q], &x->tab_refused);
    if (sel & 2)
        v.cu_seqlens_kv =
            sub_tensor_eff(r, w, FATTN_I32, H, S, D, &x->tab[T_CU_KV], &x->tab_refused);
    if (sel & 4)
        v.seqused_kv =
            sub_tensor_eff(r, w, FATTN_I32, H, S - (S > 1), D, &x->tab[T_USED], &x->tab_refused);
    if (sel & 8) v.total_q = size_val(r);
    if (sel & 16) v.total_kv = size_val(r);
    const sized z = (sel & 64) ? sized_val(r, sizeof v, varlen_fields, COUNT(varlen_fields))
                               : (sized){sizeof v, 0, 0};
    x->varlen = sized_copy(&v, sizeof v, z);
    const fattn_varlen_desc init = FATTN_VARLEN_DESC_INIT;
    covered(&x->ve, &v, &init, sizeof v, z.size, varlen_fields, COUNT(varlen_fields));
    /* Tables, totals and their rules are forward_refusal's; here the size. */
    x->varlen_refused = sized_refused(z);
}

static void decode_paged(reader *r, const world *w, const fattn_attention_desc *d, extras *x) {
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    const uint8_t sel = u8(r);
    const int64_t B = d->batch > 0 && d->batch < 64 ? d->batch : 1;
    if (sel & 1) {
        const int64_t pages = 1 + (u8(r) & 7);
        pg.block_table =
            sub_tensor_eff(r, w, FATTN_I32, 1, B, pages, &x->tab[T_TABLE], &x->tab_refused);
        pg.pages_per_seq = pages;
    }
    if (sel & 2) pg.pages_per_seq = size_val(r);
    if (sel & 4) pg.page_size = size_val(r);
    if (sel & 8) pg.num_pages = size_val(r);
    const sized z = (sel & 64) ? sized_val(r, sizeof pg, paged_fields, COUNT(paged_fields))
                               : (sized){sizeof pg, 0, 0};
    x->paged = sized_copy(&pg, sizeof pg, z);
    const fattn_paged_kv_desc init = FATTN_PAGED_KV_DESC_INIT;
    covered(&x->pe, &pg, &init, sizeof pg, z.size, paged_fields, COUNT(paged_fields));
    x->paged_refused = sized_refused(z);
}

/* NULL, a buffer of ctx made for it (never in the arena: the checks do
 * not expect writes there), or another context's. */
static void decode_workspace(reader *r, const world *w, extras *x) {
    const uint8_t sel = u8(r);
    if ((sel & 3) == 1) {
        const fattn_status st = fattn_buffer_alloc(ctx, 1 + (size_t)u8(r) * 16, &x->workspace);
        check_status(st, ctx, "fattn_buffer_alloc (workspace)");
        if (st != FATTN_OK) x->workspace = NULL;
        x->workspace_owned = x->workspace != NULL;
    } else if ((sel & 3) == 2) {
        x->workspace = w->reg[REGIONS].buf;
        x->workspace_foreign = x->workspace != NULL;
    } else if ((sel & 3) == 3) {
        x->workspace_exact = 1; /* fattn_workspace_size's bytes: exact_workspace */
    }
}

/* A workspace of exactly what fattn_workspace_size asks for this
 * description (the split paths with the caller's scratch), when it asks. */
static void exact_workspace(const fattn_attention_desc *src, extras *x) {
    uint64_t bytes = 0;
    const fattn_status st = fattn_workspace_size(ctx, src, &bytes);
    check_status(st, ctx, "fattn_workspace_size");
    if (st != FATTN_OK || bytes == 0 || bytes > (64u << 20)) return;
    const fattn_status a = fattn_buffer_alloc(ctx, (size_t)bytes, &x->workspace);
    check_status(a, ctx, "fattn_buffer_alloc (workspace)");
    if (a != FATTN_OK) x->workspace = NULL;
    x->workspace_owned = x->workspace != NULL;
}

/* ---- Whole variable-length and paged problems ------------------------------------- */

enum { TAB_GUARD = 16, TAB_MAX = 1024, MAX_SEQS = 6 };
#define TAB_GUARD_VALUE ((int32_t)0x5a5a5a5a)

/* A sequence length: empty, short, or (keys) a few hundred. */
static int64_t rag_len(reader *r, int keys) {
    const uint8_t x = u8(r);
    switch (x >> 6) {
    case 0: return x & 1;
    case 1: return x & 15;
    case 2: return keys ? 64 + (int64_t)(x & 63) * 8 : 1 + (x & 7);
    default: return 1 + (x & 3);
    }
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* An index tensor over the table block: n elements from element `at`, with
 * rows `rows` apart (stride 1 within a row unless `spread`). */
static const fattn_tensor *tab_tensor(world *w, extras *x, int which, int64_t at, int64_t rows,
                                      int64_t count, int64_t row_stride, int spread) {
    fattn_tensor t = FATTN_TENSOR_INIT;
    if (fattn_tensor_init_index(w->tab_buf, rows, count, at, &t) != FATTN_OK) abort();
    t.stride_batch = row_stride;
    if (spread) t.stride_seq = 2;
    x->tab[which] = t;
    return sized_copy(&t, sizeof t, (sized){sizeof t, 0, 0});
}

/* A whole variable-length and/or paged problem: lengths per sequence,
 * offsets, used lengths and a block table in the table block, good or with
 * one thing spoiled; sets the description's sizes and the outer shapes.
 * Returns 0 (nothing set) when it does not fit. */
static int decode_ragged(reader *r, world *w, fattn_attention_desc *d, extras *x, shape *sh) {
    const uint8_t m = u8(r), f = u8(r), g = u8(r);
    const int64_t B = 1 + m % MAX_SEQS;
    const int packed_q = (m >> 3) & 1, kv = (m >> 4) % 3, used = (m >> 6) & 1;
    if (d->heads_kv < 1 || d->heads_kv > 8) d->heads_kv = 1 + (g & 3);
    if (d->heads_q < 1 || d->heads_q > 32 || d->heads_q % d->heads_kv)
        d->heads_q = d->heads_kv * (1 + ((g >> 2) & 7));
    if (d->head_dim < 1 || d->head_dim > 64) d->head_dim = 1 + (g >> 3);
    d->batch = B;
    int64_t lq[MAX_SEQS], lkv[MAX_SEQS], span[MAX_SEQS], seq_q = 1 + (u8(r) & 7), seq_kv = 0;
    int64_t maxq = 0, maxkv = 0, maxspan = 0;
    for (int64_t b = 0; b < B; b++) {
        lq[b] = packed_q ? rag_len(r, 0) : seq_q;
        lkv[b] = rag_len(r, 1);
        span[b] = lkv[b] + (used ? (u8(r) & 3) : 0); /* the cache holds more than is used */
        maxq = max64(maxq, lq[b]), maxkv = max64(maxkv, lkv[b]), maxspan = max64(maxspan, span[b]);
    }
    if (packed_q) seq_q = max64(maxq, 1);
    /* Dense and paged caches hold seq_kv keys a sequence (all used without
     * seqused_kv); packed ones their span. */
    seq_kv = maxspan;
    if (kv != 1 && !used)
        for (int64_t b = 0; b < B; b++) lkv[b] = span[b] = seq_kv;
    if (kv != 1 && used)
        for (int64_t b = 0; b < B; b++) span[b] = seq_kv;
    const int64_t ps = (f & 8) ? 1 + (u8(r) & 31) : 16;
    const int64_t pps = kv == 2 ? (seq_kv + ps - 1) / ps + (f & 1) : 0;
    const int64_t row_stride = pps + ((f >> 1) & 1) * 2;
    int64_t used_pages = 0;
    for (int64_t b = 0; kv == 2 && b < B; b++) used_pages += (lkv[b] + ps - 1) / ps;
    const int64_t num_pages = max64(1, used_pages + (u8(r) & 3));
    /* Table block: cu_q, cu_kv, used (spread: stride 2), then the table. */
    const int spread = (f >> 2) & 1;
    const int64_t vec = (B + 1) * (spread ? 2 : 1), at_cu_q = 1 + (g & 1), at_cu_kv = at_cu_q + vec,
                  at_used = at_cu_kv + vec, at_table = at_used + vec;
    const int64_t n = at_table + (kv == 2 ? (B - 1) * row_stride + max64(pps, 1) : 0) + 1;
    if (n > TAB_MAX || pps > TAB_MAX) return 0;
    w->tab_n = n;
    w->tab_block = malloc((size_t)(n + 2 * TAB_GUARD) * 4);
    w->tab_snap = malloc((size_t)n * 4);
    if (!w->tab_block || !w->tab_snap) abort();
    for (int64_t i = 0; i < n + 2 * TAB_GUARD; i++) w->tab_block[i] = TAB_GUARD_VALUE;
    w->tab = w->tab_block + TAB_GUARD;
    const int32_t garbage[4] = {-1, (int32_t)num_pages, INT32_MAX, INT32_MIN};
    for (int64_t i = 0; i < n; i++) w->tab[i] = garbage[i & 3];
    const int64_t es = spread ? 2 : 1;
    int32_t *cu_q = w->tab + at_cu_q, *cu_kv = w->tab + at_cu_kv, *usedv = w->tab + at_used,
            *table = w->tab + at_table;
    cu_q[0] = cu_kv[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        cu_q[(b + 1) * es] = (int32_t)(cu_q[b * es] + lq[b]);
        cu_kv[(b + 1) * es] = (int32_t)(cu_kv[b * es] + span[b]);
        usedv[b * es] = (int32_t)lkv[b];
        for (int64_t p = 0; kv == 2 && p * ps < lkv[b]; p++)
            table[b * row_stride + p] = (int32_t)(u8(r) % num_pages); /* pages may repeat */
    }
    int64_t total_q = cu_q[B * es] + (u8(r) & 3), total_kv = cu_kv[B * es] + (u8(r) & 3);
    /* One thing spoiled, a time in two. */
    const int64_t k = u8(r) % B;
    switch (f >> 4) {
    case 0:
        if (packed_q && B > 1) cu_q[(k + 1) * es] = cu_q[k * es] - 1;
        break;
    case 1:
        if (kv == 1) cu_kv[B * es] = (int32_t)total_kv + 1;
        break;
    case 2: seq_q--; break;
    case 3: seq_kv--; break;
    case 4:
        if (used) usedv[k * es] = (int32_t)(span[k] + 1);
        break;
    case 5:
        if (kv == 2 && lkv[k]) table[k * row_stride + (lkv[k] - 1) / ps] = -1;
        break;
    case 6:
        if (kv == 2 && lkv[k]) table[k * row_stride] = (int32_t)num_pages;
        break;
    case 7: total_q = seq_q - 1; break;
    default: break;
    }
    memcpy(w->tab_snap, w->tab, (size_t)n * 4);
    const fattn_status st = fattn_buffer_wrap(ctx, w->tab, (size_t)n * 4, &w->tab_buf);
    check_status(st, ctx, "fattn_buffer_wrap (tables)");
    CHECK(st == FATTN_OK, "fattn_buffer_wrap of the table block failed");

    fattn_varlen_desc v = FATTN_VARLEN_DESC_INIT;
    if (packed_q) {
        v.cu_seqlens_q = tab_tensor(w, x, T_CU_Q, at_cu_q, 1, B + 1, B + 1, spread);
        v.total_q = total_q;
    }
    if (kv == 1) {
        v.cu_seqlens_kv = tab_tensor(w, x, T_CU_KV, at_cu_kv, 1, B + 1, B + 1, spread);
        v.total_kv = total_kv;
    }
    if (used) v.seqused_kv = tab_tensor(w, x, T_USED, at_used, 1, B, B, spread);
    if (v.cu_seqlens_q || v.cu_seqlens_kv || v.seqused_kv || (g & 0x80)) {
        x->varlen = sized_copy(&v, sizeof v, (sized){sizeof v, 0, 0});
        x->ve = v;
    }
    if (kv == 2) {
        fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
        pg.block_table = tab_tensor(w, x, T_TABLE, at_table, B, max64(pps, 1), row_stride, 0);
        pg.pages_per_seq = max64(pps, 1);
        pg.page_size = ps;
        pg.num_pages = num_pages;
        x->paged = sized_copy(&pg, sizeof pg, (sized){sizeof pg, 0, 0});
        x->pe = pg;
    }
    d->seq_q = seq_q;
    d->seq_kv = seq_kv;
    sh->rag = 1;
    sh->qb = packed_q ? 1 : B, sh->qs = packed_q ? total_q : seq_q;
    sh->kb = kv == 2 ? num_pages : kv == 1 ? 1 : B;
    sh->ks = kv == 2 ? ps : kv == 1 ? total_kv : seq_kv;
    return 1;
}

/* The table block: guards intact and no element changed. */
static void check_tables_untouched(const world *w, const char *what) {
    if (!w->tab_block) return;
    for (int64_t i = 0; i < TAB_GUARD; i++)
        CHECK(w->tab_block[i] == TAB_GUARD_VALUE &&
                  w->tab_block[TAB_GUARD + w->tab_n + i] == TAB_GUARD_VALUE,
              "%s wrote around the index tables", what);
    CHECK(memcmp(w->tab, w->tab_snap, (size_t)w->tab_n * 4) == 0, "%s wrote an index table", what);
}

/* Dense bytes of a [B, H, S, D] tensor of element size es, saturating. */
static size_t dense_bytes(int64_t B, int64_t H, int64_t S, int64_t D, size_t es) {
    if (B <= 0 || H <= 0 || S <= 0 || D <= 0) return 0;
    const double n = (double)B * (double)H * (double)S * (double)D * (double)es;
    return n > (double)MAX_ARENA ? MAX_ARENA : (size_t)n;
}

/* The rules for the varlen and paged descriptions' sizes and totals (what
 * src/validate.c checks before the tables), or NULL. */
static const char *layout_refusal(const call *c) {
    const fattn_attention_desc *d = &c->d;
    const fattn_varlen_desc *v = &c->x.ve;
    const fattn_paged_kv_desc *pg = &c->x.pe;
    if (d->varlen) {
        if (v->total_q < 0 || v->total_kv < 0) return "a negative varlen total";
        if (!v->cu_seqlens_q && v->total_q != 0) return "total_q without cu_seqlens_q";
        if (!v->cu_seqlens_kv && v->total_kv != 0) return "total_kv without cu_seqlens_kv";
        if (v->cu_seqlens_q && v->total_q < d->seq_q) return "total_q below seq_q";
        if (v->cu_seqlens_kv && v->total_kv < d->seq_kv) return "total_kv below seq_kv";
    }
    if (d->paged_kv) {
        int64_t cap;
        if (pg->page_size < 1 || pg->num_pages < 1 || pg->pages_per_seq < 1)
            return "a page size, page count or pages per sequence below 1";
        if (__builtin_mul_overflow(pg->page_size, pg->pages_per_seq, &cap) || d->seq_kv > cap)
            return "seq_kv over what a sequence's pages hold";
        if (!pg->block_table) return "a paged cache without a block table";
        if (d->varlen && v->cu_seqlens_kv) return "cu_seqlens_kv with a paged cache";
    }
    return NULL;
}

/* Whether the library must refuse the forward call for what c passes
 * besides the sizes and tensors' geometry (check_forward_ok has those, and
 * the tables' contents); why, for the message. */
static const char *forward_refusal(const call *c, int naive) {
    if (c->desc_refused) return "a description of size 0 or with non-zero extra bytes";
    if (c->d.mask && c->x.mask_refused) return "a mask of a bad size or value";
    if (c->d.varlen && c->x.varlen_refused) return "a varlen description of a size to refuse";
    if (c->d.paged_kv && c->x.paged_refused) return "a paged-KV description of a size to refuse";
    const char *layout = layout_refusal(c);
    if (layout) return layout;
    const shape sh = shape_of(c);
    if (sh.rag && c->x.tab_refused) return "an index tensor of size 0 or with non-zero extra bytes";
    if (sh.rag && naive) return "a varlen or paged problem on the naive path (dense only)";
    if (c->d.workspace && c->x.workspace_foreign) return "a workspace of another context";
    for (int i = TQ; i <= TL; i++)
        if ((i != TL || c->has_lse) && c->t[i].size == 0) return "a tensor of size 0";
    return NULL;
}

static void run_accounting(reader *r, const call *c) {
    const fattn_attention_desc *d = &c->d, *pass = c->pass;
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    fattn_tiling tiling = FATTN_TILING_INIT;
    tiling.tile_q = tile_val(r);
    tiling.tile_kv = tile_val(r);
    tiling.concurrent_groups = size_val(r);
    tiling.workspace_bytes = (u8(r) & 1) ? u64(r) : 0;
    const uint8_t which = u8(r);
    if (which & 4) tiling.size = (which & 8) ? 0 : sizeof tiling - 8;
    if (which & 16) rep.size = (which & 32) ? 0 : offsetof(fattn_memory_report, reduction);
    fattn_status st = fattn_memory_estimate(pass, (which & 1) ? &tiling : NULL, &rep);
    check_status(st, NULL, "fattn_memory_estimate");
    CHECK(st != FATTN_OK || !c->desc_refused,
          "fattn_memory_estimate accepted a description of size %zu", pass->size);
    CHECK(st != FATTN_OK || rep.size != 0, "fattn_memory_estimate accepted a report of size 0");
    CHECK(st != FATTN_OK || !(which & 1) || tiling.size != 0,
          "fattn_memory_estimate accepted a tiling of size 0");
    const double flops = fattn_flops(pass);
    if (st == FATTN_OK) {
        const uint64_t naive = 8ull * (uint64_t)d->batch * (uint64_t)d->heads_q *
                               (uint64_t)d->seq_q * (uint64_t)d->seq_kv;
        CHECK(rep.naive_bytes == naive, "naive_bytes %llu is not 8*B*Hq*Sq*Sk = %llu",
              (unsigned long long)rep.naive_bytes, (unsigned long long)naive);
        if (rep.size >= offsetof(fattn_memory_report, flops) + sizeof rep.flops)
            CHECK(rep.flops == flops && flops >= 0.0, "report FLOPs %g and fattn_flops %g differ",
                  rep.flops, flops);
        else
            CHECK(rep.flops == 0.0, "fattn_memory_estimate wrote FLOPs past the report's size %zu",
                  rep.size);
        CHECK(flops <= 4.0 * (double)d->batch * (double)d->heads_q * (double)d->head_dim *
                           (double)d->seq_q * (double)d->seq_kv * (1 + 1e-12),
              "FLOPs exceed 4*B*Hq*D*Sq*Sk");
    }
    if (which & 2) {
        rep = (fattn_memory_report)FATTN_MEMORY_REPORT_INIT;
        st = fattn_context_memory_report(ctx, pass, &rep);
        check_status(st, ctx, "fattn_context_memory_report");
        CHECK(st != FATTN_OK || !c->desc_refused,
              "fattn_context_memory_report accepted a description of size %zu", pass->size);
    }
    if (which & 64) {
        uint64_t bytes = 1;
        st = fattn_workspace_size(ctx, pass, &bytes);
        check_status(st, ctx, "fattn_workspace_size");
        CHECK(st != FATTN_OK || !c->desc_refused,
              "fattn_workspace_size accepted a description of size %zu", pass->size);
        /* One thread, so the CPU splits keys only when told to. */
        CHECK(st != FATTN_OK || bytes == 0 || c->kv_splits > 1,
              "fattn_workspace_size says %llu bytes with kv_splits %lld; no plan needs any",
              (unsigned long long)bytes, (long long)c->kv_splits);
    }
}

/* fattn_attention_host over dense arrays placed in the arena. */
static void run_host(reader *r, world *w, const call *c) {
    const fattn_attention_desc *d = &c->d;
    const size_t es = fattn_dtype_size(d->dtype);
    if (!es) return;
    const size_t nq = dense_bytes(d->batch, d->heads_q, d->seq_q, d->head_dim, es);
    const size_t nk = dense_bytes(d->batch, d->heads_kv, d->seq_kv, d->head_dim, es);
    const size_t nl = dense_bytes(d->batch, d->heads_q, d->seq_q, 1, 4);
    const size_t len[5] = {nq, nk, nk, nq, nl};
    size_t at[5], pos = 0;
    const uint8_t mode = u8(r);
    for (int i = 0; i < 5; i++) {
        at[i] = pos;
        pos = (pos + len[i] + 63) & ~(size_t)63;
    }
    if (pos > w->arena_len) return; /* the library would read past our arrays */
    if (mode & 1) at[3] = at[0];    /* O on Q: must be refused */
    const fattn_layout layout = (mode & 2)   ? FATTN_LAYOUT_BHSD
                                : (mode & 4) ? (fattn_layout)7
                                             : FATTN_LAYOUT_BSHD;
    float *lse = (mode & 8) ? NULL : (float *)(void *)(w->arena + at[4]);
    const void *q = (mode & 16) ? NULL : w->arena + at[0];
    memcpy(w->snap, w->arena, w->arena_len);
    fattn_status st = fattn_attention_host(ctx, c->pass, layout, q, w->arena + at[1],
                                           w->arena + at[2], w->arena + at[3], lse);
    check_status(st, ctx, "fattn_attention_host");
    if (st != FATTN_OK) {
        check_memory(w, NULL, "fattn_attention_host (failed)");
        return;
    }
    CHECK(!(mode & 1) || len[0] == 0, "fattn_attention_host accepted O on top of Q");
    CHECK(!d->varlen && !d->paged_kv,
          "fattn_attention_host accepted a varlen or paged-KV description");
    CHECK(!c->desc_refused, "fattn_attention_host accepted a description of size %zu",
          c->pass->size);
    CHECK(!(d->mask && c->x.mask_refused),
          "fattn_attention_host accepted a mask of a bad size or value");
    CHECK(!(d->workspace && c->x.workspace_foreign),
          "fattn_attention_host accepted a workspace of another context");
    memset(w->out_map, 0, w->arena_len);
    memset(w->out_map + at[3], 1, len[3]);
    if (lse) memset(w->out_map + at[4], 1, len[4]);
    check_memory(w, w->out_map, "fattn_attention_host");
}

/* fattn_buffer_write and _read with fuzzed ranges on an allocated buffer. */
static void run_copies(reader *r, world *w) {
    const size_t size = 1 + (size_t)(u64(r) % (w->arena_len < 65536 ? w->arena_len : 65536));
    fattn_buffer *b = NULL;
    fattn_status st = fattn_buffer_alloc(ctx, size, &b);
    check_status(st, ctx, "fattn_buffer_alloc");
    if (st != FATTN_OK) return;
    for (int i = 0; i < 2; i++) {
        const uint8_t sel = u8(r);
        size_t off = (sel & 1) ? (size_t)size_val(r) : (size_t)u8(r);
        size_t n = (sel & 2) ? (size_t)size_val(r) : (size_t)u8(r);
        /* In range for the buffer means in range for the arena too: size <= arena. */
        st = i == 0 ? fattn_buffer_write(b, off, w->arena, n)
                    : fattn_buffer_read(b, off, w->snap, n);
        check_status(st, ctx, i == 0 ? "fattn_buffer_write" : "fattn_buffer_read");
        const int fits = off <= size && n <= size - off;
        CHECK((st == FATTN_OK) == fits, "buffer copy of %zu bytes at %zu in %zu: status %s", n, off,
              size, fattn_status_string(st));
    }
    fattn_buffer_free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("FATTN_CPU_THREADS", "1", 1);
    trace = getenv("FUZZ_FORWARD_TRACE") && *getenv("FUZZ_FORWARD_TRACE") == '1';
    if (fattn_context_create(FATTN_BACKEND_CPU, 0, &ctx) != FATTN_OK ||
        fattn_context_create(FATTN_BACKEND_CPU, 0, &other_ctx) != FATTN_OK) {
        fprintf(stderr, "fuzz_forward: cannot create a CPU context: %s\n",
                fattn_error_message(NULL));
        abort();
    }
    return 0;
}

/* Sets a tile parameter: a negative value is refused (and leaves the
 * parameter as it was), 0..1024 (tiles the CPU backend runs) taken; the
 * range's upper end is the library's. */
static void set_tile(fattn_param param, int64_t value) {
    int64_t before = -1, got = -1;
    CHECK(fattn_context_get_param(ctx, param, &before) == FATTN_OK,
          "fattn_context_get_param failed");
    const fattn_status st = fattn_context_set_param(ctx, param, value);
    check_status(st, ctx, "fattn_context_set_param");
    CHECK(value >= 0 || st != FATTN_OK, "fattn_context_set_param(%d, %lld) took a negative tile",
          (int)param, (long long)value);
    CHECK(value < 0 || value > 1024 || st == FATTN_OK,
          "fattn_context_set_param(%d, %lld) returned %s", (int)param, (long long)value,
          fattn_status_string(st));
    CHECK(fattn_context_get_param(ctx, param, &got) == FATTN_OK, "fattn_context_get_param failed");
    CHECK(got == (st == FATTN_OK ? value : before),
          "tile parameter %d is %lld after setting %lld (%s)", (int)param, (long long)got,
          (long long)value, fattn_status_string(st));
}

/* A key split count: mostly a small one, sometimes past the key tiles,
 * sometimes out of range (refused). */
static int64_t splits_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 7) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 65536 - (x & 1);
    case 3: return (sel & 8) ? -1 - (int64_t)x : 65537 + (int64_t)x;
    case 4: return 2 + x;
    default: return 2 + (x & 7);
    }
}

/* Sets FATTN_PARAM_KV_SPLITS: 0..65536 taken, anything else refused with
 * the parameter unchanged. */
static void set_splits(int64_t value) {
    int64_t before = -1, got = -1;
    CHECK(fattn_context_get_param(ctx, FATTN_PARAM_KV_SPLITS, &before) == FATTN_OK,
          "fattn_context_get_param failed");
    const fattn_status st = fattn_context_set_param(ctx, FATTN_PARAM_KV_SPLITS, value);
    check_status(st, ctx, "fattn_context_set_param(KV_SPLITS)");
    CHECK((st == FATTN_OK) == (value >= 0 && value <= 65536),
          "fattn_context_set_param(KV_SPLITS, %lld) returned %s", (long long)value,
          fattn_status_string(st));
    CHECK(fattn_context_get_param(ctx, FATTN_PARAM_KV_SPLITS, &got) == FATTN_OK,
          "fattn_context_get_param failed");
    CHECK(got == (st == FATTN_OK ? value : before), "kv_splits is %lld after setting %lld (%s)",
          (long long)got, (long long)value, fattn_status_string(st));
}

static const field combine_fields[] = {
    FIELD(fattn_combine_desc, batch),
    FIELD(fattn_combine_desc, heads),
    FIELD(fattn_combine_desc, seq),
    FIELD(fattn_combine_desc, head_dim),
    FIELD(fattn_combine_desc, parts),
    FIELD(fattn_combine_desc, part_dtype),
    FIELD(fattn_combine_desc, dtype),
    FIELD(fattn_combine_desc, o_part_stride),
    FIELD(fattn_combine_desc, lse_part_stride),
};

/* Bytes [lo, hi] of the arena a tensor's view spans (parts: from part 0's
 * first element to the last part's last); 0 when it has none or no region. */
static int span_of(const world *w, const fattn_tensor *t, size_t es, int64_t B, int64_t H,
                   int64_t S, int64_t D, int64_t parts, int64_t stride, __int128 *lo,
                   __int128 *hi) {
    const region *g = region_of(w, t->buffer);
    if (!g || B < 1 || H < 1 || S < 1 || D < 1) return 0;
    const __int128 first = t->offset;
    __int128 last = (__int128)t->offset + (__int128)(B - 1) * t->stride_batch +
                    (__int128)(H - 1) * t->stride_head + (__int128)(S - 1) * t->stride_seq +
                    (__int128)(D - 1) + (__int128)(parts - 1) * stride;
    *lo = (__int128)g->start + first * (__int128)es;
    *hi = (__int128)g->start + last * (__int128)es + (__int128)es - 1;
    return 1;
}

/* fattn_combine over parts and outputs in the arena: a failure writes
 * nothing; a success writes only O's and LSE's elements, which lie in
 * their buffers, outside the parts' span and apart; with finite float32
 * parts in [-4, 4], O is a weighted mean of them and LSE is finite, at
 * least the largest part's and at most that plus log(parts). */
static void run_combine(reader *r, world *w, fattn_dtype fill_t, int specials) {
    fattn_combine_desc cd = FATTN_COMBINE_DESC_INIT;
    const uint8_t sel = u8(r), x = u8(r), y = u8(r);
    cd.batch = (sel & 1) ? size_val(r) : 1 + (x & 1);
    cd.heads = (sel & 2) ? size_val(r) : 1 + ((x >> 1) & 3);
    cd.seq = (sel & 4) ? size_val(r) : 1 + ((x >> 3) & 3);
    cd.head_dim = (sel & 8) ? dim_val(r) : 1 + (y & 31);
    cd.parts = (sel & 16) ? size_val(r) : 1 + ((x >> 5) & 7);
    cd.part_dtype = (y & 0x80) ? dtype_val(r) : fill_t;
    cd.dtype = (y & 0x40) ? dtype_val(r) : fill_t;
    fattn_tensor t[4]; /* o_parts, lse_parts, o, lse */
    decode_tensor(r, &t[0], w, cd.part_dtype, cd.heads, cd.seq, cd.head_dim, 0);
    decode_tensor(r, &t[1], w, cd.part_dtype, cd.heads, cd.seq, 1, 1);
    decode_tensor(r, &t[2], w, cd.dtype, cd.heads, cd.seq, cd.head_dim, 0);
    decode_tensor(r, &t[3], w, cd.dtype, cd.heads, cd.seq, 1, 1);
    const uint8_t strides = u8(r);
    /* One part's extent, wrapping like a caller's arithmetic might. */
    const uint64_t ext_l_u = (uint64_t)cd.batch * (uint64_t)cd.heads * (uint64_t)cd.seq;
    const int64_t ext_o = (int64_t)(ext_l_u * (uint64_t)cd.head_dim), ext_l = (int64_t)ext_l_u;
    cd.o_part_stride = (strides & 3) == 0   ? ext_o
                       : (strides & 3) == 1 ? (int64_t)((uint64_t)ext_o + (strides >> 4))
                       : (strides & 3) == 2 ? 0
                                            : size_val(r);
    cd.lse_part_stride = (strides & 12) == 0   ? ext_l
                         : (strides & 12) == 4 ? (int64_t)((uint64_t)ext_l + (strides >> 4))
                         : (strides & 12) == 8 ? 0
                                               : size_val(r);
    const sized z = (sel & 32) ? sized_val(r, sizeof cd, combine_fields, COUNT(combine_fields))
                               : (sized){sizeof cd, 0, 0};
    const fattn_combine_desc *pass = sized_copy(&cd, sizeof cd, z);
    fattn_combine_desc e;
    const fattn_combine_desc init = FATTN_COMBINE_DESC_INIT;
    covered(&e, &cd, &init, sizeof cd, z.size, combine_fields, COUNT(combine_fields));
    const int has_lse = !(sel & 64);
    /* Apart from the arena's own values, the parts' lse come from a second
     * fill: values in [-4, 4] read as float32 only when the arena is. */
    fill_arena(w, fill_t, 0x5eedull + x, specials);
    memcpy(w->snap, w->arena, w->arena_len);
    const fattn_status st = fattn_combine(ctx, pass, &t[0], &t[1], &t[2], has_lse ? &t[3] : NULL);
    check_status(st, ctx, "fattn_combine");
    if (st != FATTN_OK) {
        check_memory(w, NULL, "fattn_combine (failed)");
        return;
    }
    CHECK(!sized_refused(z), "fattn_combine accepted a description of size %zu", z.size);
    for (int i = 0; i < 4; i++) {
        if (i == 3 && !has_lse) continue;
        CHECK(t[i].size != 0, "fattn_combine accepted a tensor of size 0");
        const region *g = region_of(w, t[i].buffer);
        CHECK(g && !g->foreign, "fattn_combine accepted a tensor not on this context's buffers");
    }
    const size_t pes = es_of(e.part_dtype), oes = es_of(e.dtype);
    const region *ro = region_of(w, t[2].buffer), *rl = has_lse ? region_of(w, t[3].buffer) : NULL;
    memset(w->out_map, 0, w->arena_len);
    CHECK(mark_rows(w->out_map, ro->start, ro->start + ro->len, &t[2], oes, e.batch, e.heads, e.seq,
                    e.head_dim, 1),
          "fattn_combine accepted an O that overlaps itself or leaves its buffer");
    if (rl)
        CHECK(mark_rows(w->out_map, rl->start, rl->start + rl->len, &t[3], 4, e.batch, e.heads,
                        e.seq, 1, 1),
              "fattn_combine accepted an LSE that overlaps O or itself or leaves its buffer");
    __int128 lo[2], hi[2];
    CHECK(span_of(w, &t[0], pes, e.batch, e.heads, e.seq, e.head_dim, e.parts, e.o_part_stride,
                  &lo[0], &hi[0]) &&
              span_of(w, &t[1], 4, e.batch, e.heads, e.seq, 1, e.parts, e.lse_part_stride, &lo[1],
                      &hi[1]),
          "fattn_combine accepted parts without a region");
    for (int p = 0; p < 2; p++) {
        CHECK(lo[p] >= 0 && hi[p] < (__int128)w->arena_len,
              "fattn_combine accepted %s parts that leave the arena", p ? "lse" : "O");
        for (__int128 i = lo[p]; i <= hi[p]; i++)
            CHECK(!w->out_map[(size_t)i], "fattn_combine accepted outputs inside the %s parts",
                  p ? "lse" : "O");
    }
    check_memory(w, w->out_map, "fattn_combine");
    const region *gp = region_of(w, t[0].buffer), *gl = region_of(w, t[1].buffer);
    if (specials || fill_t != FATTN_F32 || e.part_dtype != FATTN_F32 || gp->start % 4 ||
        gl->start % 4)
        return;
    for (int64_t b = 0; b < e.batch; b++)
        for (int64_t h = 0; h < e.heads; h++)
            for (int64_t i = 0; i < e.seq; i++) {
                float mx = -INFINITY;
                for (int64_t p = 0; p < e.parts; p++) {
                    const int64_t le = t[1].offset + b * t[1].stride_batch + h * t[1].stride_head +
                                       i * t[1].stride_seq + p * e.lse_part_stride;
                    const float v = get_value(w->arena + gl->start + (size_t)le * 4, FATTN_F32);
                    mx = v > mx ? v : mx;
                }
                const int64_t oe = t[2].offset + b * t[2].stride_batch + h * t[2].stride_head +
                                   i * t[2].stride_seq;
                for (int64_t k = 0; k < e.head_dim; k++) {
                    const float o =
                        get_value(w->arena + ro->start + (size_t)(oe + k) * oes, e.dtype);
                    CHECK(fabsf(o) <= 4.01f,
                          "fattn_combine: O = %g is not a mean of parts in "
                          "[-4, 4]",
                          (double)o);
                }
                if (!rl) continue;
                const int64_t le = t[3].offset + b * t[3].stride_batch + h * t[3].stride_head +
                                   i * t[3].stride_seq;
                const float l = get_value(w->arena + rl->start + (size_t)le * 4, FATTN_F32);
                CHECK(isfinite(l) && l >= mx - 1e-4f && l <= mx + logf((float)e.parts) + 1e-4f,
                      "fattn_combine: LSE %g for parts whose largest is %g (%lld parts)", (double)l,
                      (double)mx, (long long)e.parts);
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    call c;
    memset(&c, 0, sizeof c);
    /* The description as decoded; c.d is what the library reads of it. */
    fattn_attention_desc src = FATTN_ATTENTION_DESC_INIT, *d = &src;
    const uint8_t ops = u8(r);
    d->batch = size_val(r);
    d->heads_kv = size_val(r);
    /* Mostly a multiple of heads_kv (GQA), wrapping like the caller's might. */
    d->heads_q = (u8(r) & 3) ? (int64_t)((uint64_t)d->heads_kv * (1u + (u8(r) & 3))) : size_val(r);
    d->seq_q = size_val(r);
    d->seq_kv = size_val(r);
    d->head_dim = dim_val(r);
    d->dtype = dtype_val(r);
    d->scale = scale_val(r);
    const uint8_t misc = u8(r);
    /* None, bottom-right, top-left, 3 (no such alignment), or garbage. */
    d->causal = (misc & 1) ? ((misc & 2) ? (fattn_causal)(int32_t)(uint32_t)u64(r)
                                         : (fattn_causal)(1 + (misc >> 6) % 3))
                           : FATTN_CAUSAL_NONE;
    d->flags = (misc & 4) ? (unsigned)u64(r) : (misc & 8) ? FATTN_FLAG_ALLOW_TF32 : 0;
    /* Tiles are the context's: back to the defaults, then the input's. */
    set_tile(FATTN_PARAM_TILE_Q, 0);
    set_tile(FATTN_PARAM_TILE_KV, 0);
    set_tile(FATTN_PARAM_TILE_Q, tile_param_val(r));
    set_tile(FATTN_PARAM_TILE_KV, tile_param_val(r));
    set_splits(0);
    const int specials = (misc & 0x30) == 0x30;
    const uint64_t seed = u64(r);
    const uint8_t ext = u8(r);
    /* ext 64: a key split count (split-KV decoding and its merge). */
    if (ext & 64) set_splits(splits_val(r));
    CHECK(fattn_context_get_param(ctx, FATTN_PARAM_KV_SPLITS, &c.kv_splits) == FATTN_OK,
          "fattn_context_get_param(KV_SPLITS) failed");

    /* The arena: room for dense operands when the sizes are small. */
    world w;
    memset(&w, 0, sizeof w);
    /* ext 32: a whole variable-length or paged problem, its tables good or
     * with one thing spoiled, in place of the sizes' outer shapes. */
    shape sh = {0, d->batch, d->seq_q, d->batch, d->seq_kv};
    const int ragged = (ext & 32) && decode_ragged(r, &w, d, &c.x, &sh);
    const fattn_dtype fill_t = fattn_dtype_size(d->dtype) ? d->dtype : FATTN_F32;
    const size_t es = es_of(fill_t);
    const size_t want[5] = {dense_bytes(sh.qb, d->heads_q, sh.qs, d->head_dim, es) + 64,
                            dense_bytes(sh.kb, d->heads_kv, sh.ks, d->head_dim, es) + 64,
                            dense_bytes(sh.kb, d->heads_kv, sh.ks, d->head_dim, es) + 64,
                            dense_bytes(sh.qb, d->heads_q, sh.qs, d->head_dim, es) + 64,
                            dense_bytes(sh.qb, d->heads_q, sh.qs, 1, 4) + 64};
    /* Operands that cannot fit make every call fail: a small arena will do. */
    size_t total = 0;
    for (int i = 0; i < 5; i++) total += want[i] + 64;
    if (total > MAX_ARENA) total = 4096;
    total += (size_t)u8(r) * 8;
    w.arena_len = total < 256 ? 256 : total > MAX_ARENA ? MAX_ARENA : total;
    w.block = malloc(w.arena_len + 2 * GUARD);
    w.snap = malloc(w.arena_len);
    w.out_map = malloc(w.arena_len);
    w.in_map = malloc(w.arena_len);
    if (!w.block || !w.snap || !w.out_map || !w.in_map) abort();
    w.arena = w.block + GUARD;
    memset(w.block, GUARD_BYTE, GUARD);
    memset(w.arena + w.arena_len, GUARD_BYTE, GUARD);
    fill_arena(&w, fill_t, seed, specials);

    decode_regions(r, &w, want);
    wrap_regions(&w);
    decode_tensor(r, &c.t[TQ], &w, d->dtype, d->heads_q, sh.qs, d->head_dim, 0);
    decode_tensor(r, &c.t[TK], &w, d->dtype, d->heads_kv, sh.ks, d->head_dim, 0);
    decode_tensor(r, &c.t[TV], &w, d->dtype, d->heads_kv, sh.ks, d->head_dim, 0);
    decode_tensor(r, &c.t[TO], &w, d->dtype, d->heads_q, sh.qs, d->head_dim, 0);
    decode_tensor(r, &c.t[TL], &w, d->dtype, d->heads_q, sh.qs, 1, 1);
    c.has_lse = !(ops & 1);
    /* Packed placement: Q, K, V, O in regions 0..3 and LSE after O in 3. */
    if (!(ops & 2)) {
        for (int i = 0; i < 4; i++)
            if (c.t[i].buffer == w.reg[0].buf) c.t[i].buffer = w.reg[i].buf;
        if (c.t[TL].buffer == w.reg[0].buf) {
            c.t[TL].buffer = w.reg[3].buf;
            c.t[TL].offset = (int64_t)((uint64_t)c.t[TL].offset + (want[3] + 63) / 4);
        }
    }

    /* The description's own size and sub-descriptions, then the copy the
     * library gets and what it reads of it. */
    const sized dz = (ext & 1) ? sized_val(r, sizeof src, desc_fields, COUNT(desc_fields))
                               : (sized){sizeof src, 0, 0};
    if (ext & 2) decode_mask(r, &w, d, &c.x);
    if ((ext & 4) && !ragged) decode_varlen(r, &w, d, &c.x);
    if ((ext & 8) && !ragged) decode_paged(r, &w, d, &c.x);
    if (ext & 16) decode_workspace(r, &w, &c.x);
    src.mask = c.x.mask;
    src.varlen = c.x.varlen;
    src.paged_kv = c.x.paged;
    if (c.x.workspace_exact) exact_workspace(&src, &c.x);
    src.workspace = c.x.workspace;
    c.pass = sized_copy(&src, sizeof src, dz);
    c.desc_refused = sized_refused(dz);
    const fattn_attention_desc init = FATTN_ATTENTION_DESC_INIT;
    covered(&c.d, &src, &init, sizeof src, dz.size, desc_fields, COUNT(desc_fields));
    const fattn_attention_desc *pass = c.pass;

    run_accounting(r, &c);

    /* Finite, element-aligned inputs: then the outputs' values are checked too. */
    const double resolved = c.d.scale != 0.0f ? fabs((double)c.d.scale) : 1.0;
    c.finite_inputs = !specials && fattn_dtype_size(c.d.dtype) && resolved <= 64.0;
    for (int i = TQ; i <= TV; i++) {
        const region *g = region_of(&w, c.t[i].buffer);
        if (g && g->start % es) c.finite_inputs = 0;
    }

    /* A forward runs when its work is small (fattn_flops is 0 for an invalid
     * description, which fails before any work). The naive path allocates
     * S and P: only when the estimate bounds them, or the description is
     * invalid (any estimate failure but an overflow says so). */
    fattn_memory_report rep = FATTN_MEMORY_REPORT_INIT;
    const fattn_status est = fattn_memory_estimate(pass, NULL, &rep);
    const int desc_ok = est == FATTN_OK;
    if (fattn_flops(pass) <= (double)FLOP_LIMIT) {
        const int naive = (ops & 12) == 12 &&
                          (desc_ok ? rep.naive_bytes <= NAIVE_LIMIT : est != FATTN_ERR_OVERFLOW);
        const char *what = naive ? "fattn_forward_naive" : "fattn_forward";
        const shape osh = shape_of(&c);
        if (fattn_dtype_size(c.d.dtype)) {
            poison_output(&w, &c.t[TO], es, osh.qb, c.d.heads_q, osh.qs, c.d.head_dim);
            if (c.has_lse) poison_output(&w, &c.t[TL], 4, osh.qb, c.d.heads_q, osh.qs, 1);
        }
        memcpy(w.snap, w.arena, w.arena_len);
        const fattn_tensor *lse = c.has_lse ? &c.t[TL] : NULL;
        const fattn_status st =
            naive ? fattn_forward_naive(ctx, pass, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse)
                  : fattn_forward(ctx, pass, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse);
        check_status(st, ctx, what);
        check_tables_untouched(&w, what);
        if (st == FATTN_OK) {
            const char *refusal = forward_refusal(&c, naive);
            CHECK(!refusal, "%s accepted %s", what, refusal);
            check_forward_ok(&w, &c, what);
        } else {
            check_memory(&w, NULL, what);
        }
        /* The CPU checks host tables before anything runs: INDEX_TABLE only
         * for tables that break a rule. */
        if (st == FATTN_ERR_INDEX_TABLE) {
            CHECK(shape_of(&c).rag && !layout_refusal(&c),
                  "%s returned FATTN_ERR_INDEX_TABLE without tables to blame", what);
            const int good = tables_good(&w, &c);
            CHECK(good == 0, "%s returned FATTN_ERR_INDEX_TABLE for tables that are %s", what,
                  good > 0 ? "good" : "outside their buffers");
        }
    }
    if (ext & 128) run_combine(r, &w, fill_t, specials);
    if (ops & 16) {
        fill_arena(&w, fill_t, seed, specials);
        if (fattn_flops(pass) <= (double)FLOP_LIMIT) run_host(r, &w, &c);
    }
    if (ops & 32) run_copies(r, &w);

    if (c.x.workspace_owned) fattn_buffer_free(c.x.workspace);
    free_regions(&w);
    fattn_buffer_free(w.tab_buf);
    free(w.tab_block);
    free(w.tab_snap);
    sized_free_all();
    free(w.block);
    free(w.snap);
    free(w.out_map);
    free(w.in_map);
    return 0;
}
