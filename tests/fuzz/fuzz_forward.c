/* libFuzzer target for validation and the forward call on the CPU backend.
 * The input bytes become an attention description (sizes, dtype, flags,
 * scale, causal alignment, the struct's own size: mostly valid, sometimes
 * zero, negative, huge or garbage; sometimes mask, varlen and paged-KV
 * sub-descriptions and a workspace), the context's tile parameters, and
 * five tensors over host memory wrapped as fattn buffers: one arena with
 * guard zones, carved into regions that may overlap, at odd offsets, with odd
 * strides. Then fattn_forward runs, and sometimes the naive path, the
 * accounting calls, the host call and the buffer copies.
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
 * description of size 0 or with a non-zero tail, with a sub-description
 * that asks for a feature not implemented yet, a tensor of size 0, a
 * workspace of another context, or a varlen or paged description in the
 * host call; a tile parameter refused when valid or taken when negative.
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
static void check_status(fattn_status st, const fattn_context *c, const char *call) {
    CHECK(status_known(st), "%s returned %d, not a fattn_status", call, (int)st);
    const char *msg = fattn_error_message(c);
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
    int workspace_foreign, workspace_owned;
    int mask_refused, varlen_refused, paged_refused;
} extras;

typedef struct call {
    fattn_attention_desc d;           /* as the library reads pass (see covered) */
    const fattn_attention_desc *pass; /* what the library is given, in sized memory */
    int desc_refused;                 /* pass's size must be refused */
    extras x;
    fattn_tensor t[5]; /* q, k, v, o, lse */
    int has_lse;
    int finite_inputs; /* the arena holds only finite values in [-4, 4] */
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

/* Number of keys query row i sees: key j iff j <= i + off, off = seq_kv -
 * seq_q (bottom-right) or 0 (top-left). */
static int64_t keys_seen(const fattn_attention_desc *d, int64_t i) {
    if (d->causal == FATTN_CAUSAL_NONE) return d->seq_kv;
    const int64_t off = d->causal == FATTN_CAUSAL_TOP_LEFT ? 0 : d->seq_kv - d->seq_q;
    int64_t lim = i + off + 1;
    return lim < 0 ? 0 : lim > d->seq_kv ? d->seq_kv : lim;
}

/* After a successful forward: outputs inside their buffers, not overlapping
 * each other or the inputs, nothing else written; for finite inputs, values
 * that a softmax-weighted mean of V can take. */
static void check_forward_ok(world *w, const call *c, const char *what) {
    const fattn_attention_desc *d = &c->d;
    const size_t es = es_of(d->dtype);
    const int64_t B = d->batch, Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
    const region *ro = region_of(w, c->t[TO].buffer),
                 *rl = c->has_lse ? region_of(w, c->t[TL].buffer) : NULL;
    CHECK(ro && !ro->foreign, "%s accepted an O that is not a buffer of this context", what);
    for (int i = TQ; i <= TV; i++) {
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(!r || !r->foreign || (i != TQ && d->seq_kv == 0),
              "%s accepted a buffer of another context", what);
    }
    const int64_t orows = rows_of(B, Hq, d->seq_q);
    CHECK(orows >= 0 && (uint64_t)orows <= ro->len / es / (uint64_t)D,
          "%s accepted an O with more elements than its buffer has room for", what);
    memset(w->out_map, 0, w->arena_len);
    memset(w->in_map, 0, w->arena_len);
    CHECK(
        mark_rows(w->out_map, ro->start, ro->start + ro->len, &c->t[TO], es, B, Hq, d->seq_q, D, 1),
        "%s accepted an O whose elements overlap or leave its buffer", what);
    if (rl) {
        CHECK(!rl->foreign, "%s accepted an LSE of another context", what);
        CHECK((uint64_t)orows <= rl->len / 4, "%s accepted an LSE larger than its buffer", what);
        CHECK(mark_rows(w->out_map, rl->start, rl->start + rl->len, &c->t[TL], 4, B, Hq, d->seq_q,
                        1, 1),
              "%s accepted an LSE that overlaps O or itself or leaves its buffer", what);
    }
    const int64_t seqs[3] = {d->seq_q, d->seq_kv, d->seq_kv}, heads[3] = {Hq, Hk, Hk};
    for (int i = TQ; i <= TV; i++) {
        if (seqs[i] == 0) continue;
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(r, "%s accepted %c without a buffer", what, "qkv"[i]);
        CHECK(mark_rows(w->in_map, r->start, r->start + r->len, &c->t[i], es, B, heads[i], seqs[i],
                        D, 0),
              "%s accepted %c with elements outside its buffer", what, "qkv"[i]);
    }
    for (size_t i = 0; i < w->arena_len; i++)
        CHECK(!(w->out_map[i] && w->in_map[i]),
              "%s accepted outputs that overlap inputs (byte %zu)", what, i);
    check_memory(w, w->out_map, what);

    if (!c->finite_inputs) return;
    /* |score| <= 16 * 256 * 64: no overflow, so every row is defined. */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < d->seq_q; i++) {
                const int64_t seen = keys_seen(d, i);
                const fattn_tensor *to = &c->t[TO];
                const int64_t e =
                    to->offset + b * to->stride_batch + h * to->stride_head + i * to->stride_seq;
                for (int64_t x = 0; x < D; x++) {
                    const float o =
                        get_value(w->arena + ro->start + (size_t)(e + x) * es, d->dtype);
                    if (seen == 0)
                        CHECK(o == 0.0f, "%s: row %lld sees no key but O = %g", what, (long long)i,
                              (double)o);
                    else
                        CHECK(fabsf(o) <= 4.01f,
                              "%s: O = %g at row %lld is not a mean of V's values in [-4, 4]", what,
                              (double)o, (long long)i);
                }
                if (!rl) continue;
                const fattn_tensor *tl = &c->t[TL];
                const int64_t le =
                    tl->offset + b * tl->stride_batch + h * tl->stride_head + i * tl->stride_seq;
                const float l = get_value(w->arena + rl->start + (size_t)le * 4, FATTN_F32);
                if (seen == 0)
                    CHECK(l == -INFINITY, "%s: row %lld sees no key but LSE = %g", what,
                          (long long)i, (double)l);
                else
                    CHECK(isfinite(l), "%s: row %lld sees %lld keys but LSE = %g", what,
                          (long long)i, (long long)seen, (double)l);
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
static const fattn_tensor *sub_tensor(reader *r, const world *w, fattn_dtype dtype, int64_t H,
                                      int64_t S, int64_t D) {
    const uint8_t sel = u8(r);
    if (!(sel & 1)) return NULL;
    fattn_tensor t;
    decode_tensor(r, &t, w, (sel & 2) ? dtype_val(r) : dtype, H, S, D, 0);
    const sized z = (sel & 4) ? sized_val(r, sizeof t, tensor_fields, COUNT(tensor_fields))
                              : (sized){sizeof t, 0, 0};
    return sized_copy(&t, sizeof t, z);
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
    /* A mask equal to INIT asks for nothing; anything else is refused in this
     * release (UNSUPPORTED, or an argument error for a bad value). */
    x->mask_refused = sized_refused(z) || e.window_left != -1 || e.window_right != -1 ||
                      e.softcap != 0.0f || e.alibi_slopes || e.sinks || e.bias;
}

static void decode_varlen(reader *r, const world *w, const fattn_attention_desc *d, extras *x) {
    fattn_varlen_desc v = FATTN_VARLEN_DESC_INIT;
    const uint8_t sel = u8(r);
    const int64_t B = d->batch > 0 && d->batch < 64 ? d->batch : 1;
    if (sel & 1) v.cu_seqlens_q = sub_tensor(r, w, FATTN_I32, 1, 1, B + 1);
    if (sel & 2) v.cu_seqlens_kv = sub_tensor(r, w, FATTN_I32, 1, 1, B + 1);
    if (sel & 4) v.seqused_kv = sub_tensor(r, w, FATTN_I32, 1, 1, B);
    if (sel & 8) v.total_q = size_val(r);
    if (sel & 16) v.total_kv = size_val(r);
    const sized z = (sel & 64) ? sized_val(r, sizeof v, varlen_fields, COUNT(varlen_fields))
                               : (sized){sizeof v, 0, 0};
    x->varlen = sized_copy(&v, sizeof v, z);
    const fattn_varlen_desc init = FATTN_VARLEN_DESC_INIT;
    fattn_varlen_desc e;
    covered(&e, &v, &init, sizeof v, z.size, varlen_fields, COUNT(varlen_fields));
    /* The totals alone ask for nothing: they size packed tensors that the
     * offsets describe. */
    x->varlen_refused = sized_refused(z) || e.cu_seqlens_q || e.cu_seqlens_kv || e.seqused_kv;
}

static void decode_paged(reader *r, const world *w, const fattn_attention_desc *d, extras *x) {
    fattn_paged_kv_desc pg = FATTN_PAGED_KV_DESC_INIT;
    const uint8_t sel = u8(r);
    const int64_t B = d->batch > 0 && d->batch < 64 ? d->batch : 1;
    if (sel & 1) pg.block_table = sub_tensor(r, w, FATTN_I32, 1, B, 1 + (u8(r) & 7));
    if (sel & 2) pg.pages_per_seq = size_val(r);
    if (sel & 4) pg.page_size = size_val(r);
    if (sel & 8) pg.num_pages = size_val(r);
    const sized z = (sel & 64) ? sized_val(r, sizeof pg, paged_fields, COUNT(paged_fields))
                               : (sized){sizeof pg, 0, 0};
    x->paged = sized_copy(&pg, sizeof pg, z);
    const fattn_paged_kv_desc init = FATTN_PAGED_KV_DESC_INIT;
    fattn_paged_kv_desc e;
    covered(&e, &pg, &init, sizeof pg, z.size, paged_fields, COUNT(paged_fields));
    x->paged_refused =
        sized_refused(z) || e.block_table || e.pages_per_seq || e.page_size || e.num_pages;
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
    }
}

/* Dense bytes of a [B, H, S, D] tensor of element size es, saturating. */
static size_t dense_bytes(int64_t B, int64_t H, int64_t S, int64_t D, size_t es) {
    if (B <= 0 || H <= 0 || S <= 0 || D <= 0) return 0;
    const double n = (double)B * (double)H * (double)S * (double)D * (double)es;
    return n > (double)MAX_ARENA ? MAX_ARENA : (size_t)n;
}

/* Whether the library must refuse the forward call for what c passes
 * besides the sizes and tensors' geometry; why, for the message. */
static const char *forward_refusal(const call *c) {
    if (c->desc_refused) return "a description of size 0 or with non-zero extra bytes";
    if (c->d.mask && c->x.mask_refused) return "a mask that asks for something (or is badly sized)";
    if (c->d.varlen && c->x.varlen_refused) return "a varlen description with offsets or lengths";
    if (c->d.paged_kv && c->x.paged_refused)
        return "a paged-KV description that asks for something";
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
        CHECK(st != FATTN_OK || bytes == 0,
              "fattn_workspace_size says %llu bytes; no plan needs any", (unsigned long long)bytes);
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
          "fattn_attention_host accepted a mask that asks for something");
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
    const int specials = (misc & 0x30) == 0x30;
    const uint64_t seed = u64(r);
    const uint8_t ext = u8(r);

    /* The arena: room for dense operands when the sizes are small. */
    world w;
    memset(&w, 0, sizeof w);
    const fattn_dtype fill_t = fattn_dtype_size(d->dtype) ? d->dtype : FATTN_F32;
    const size_t es = es_of(fill_t);
    const size_t want[5] = {dense_bytes(d->batch, d->heads_q, d->seq_q, d->head_dim, es) + 64,
                            dense_bytes(d->batch, d->heads_kv, d->seq_kv, d->head_dim, es) + 64,
                            dense_bytes(d->batch, d->heads_kv, d->seq_kv, d->head_dim, es) + 64,
                            dense_bytes(d->batch, d->heads_q, d->seq_q, d->head_dim, es) + 64,
                            dense_bytes(d->batch, d->heads_q, d->seq_q, 1, 4) + 64};
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
    decode_tensor(r, &c.t[TQ], &w, d->dtype, d->heads_q, d->seq_q, d->head_dim, 0);
    decode_tensor(r, &c.t[TK], &w, d->dtype, d->heads_kv, d->seq_kv, d->head_dim, 0);
    decode_tensor(r, &c.t[TV], &w, d->dtype, d->heads_kv, d->seq_kv, d->head_dim, 0);
    decode_tensor(r, &c.t[TO], &w, d->dtype, d->heads_q, d->seq_q, d->head_dim, 0);
    decode_tensor(r, &c.t[TL], &w, d->dtype, d->heads_q, d->seq_q, 1, 1);
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
    if (ext & 4) decode_varlen(r, &w, d, &c.x);
    if (ext & 8) decode_paged(r, &w, d, &c.x);
    if (ext & 16) decode_workspace(r, &w, &c.x);
    src.mask = c.x.mask;
    src.varlen = c.x.varlen;
    src.paged_kv = c.x.paged;
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
        if (fattn_dtype_size(c.d.dtype)) {
            poison_output(&w, &c.t[TO], es, c.d.batch, c.d.heads_q, c.d.seq_q, c.d.head_dim);
            if (c.has_lse) poison_output(&w, &c.t[TL], 4, c.d.batch, c.d.heads_q, c.d.seq_q, 1);
        }
        memcpy(w.snap, w.arena, w.arena_len);
        const fattn_tensor *lse = c.has_lse ? &c.t[TL] : NULL;
        const fattn_status st =
            naive ? fattn_forward_naive(ctx, pass, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse)
                  : fattn_forward(ctx, pass, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse);
        check_status(st, ctx, what);
        if (st == FATTN_OK) {
            const char *refusal = forward_refusal(&c);
            CHECK(!refusal, "%s accepted %s", what, refusal);
            check_forward_ok(&w, &c, what);
        } else {
            check_memory(&w, NULL, what);
        }
    }
    if (ops & 16) {
        fill_arena(&w, fill_t, seed, specials);
        if (fattn_flops(pass) <= (double)FLOP_LIMIT) run_host(r, &w, &c);
    }
    if (ops & 32) run_copies(r, &w);

    if (c.x.workspace_owned) fattn_buffer_free(c.x.workspace);
    free_regions(&w);
    sized_free_all();
    free(w.block);
    free(w.snap);
    free(w.out_map);
    free(w.in_map);
    return 0;
}
