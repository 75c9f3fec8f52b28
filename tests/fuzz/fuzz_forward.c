/* libFuzzer target for validation and the forward call on the CPU backend.
 * The input bytes become an attention description (sizes, dtype, flags,
 * scale, tiles: mostly small, sometimes zero, negative, huge or garbage) and
 * five tensors over host memory wrapped as fattn buffers: one arena with
 * guard zones, carved into regions that may overlap, at odd offsets, with odd
 * strides. Then fattn_forward runs, and sometimes the naive path, the
 * accounting calls, the host call and the buffer copies.
 *
 * A violation traps: a crash or sanitizer report, a status outside the
 * table, a failure with an empty message, a success with a message, any byte
 * changed outside O's and LSE's elements (inputs, padding, guards; on a
 * failure no byte at all), a success that let outputs overlap each other or
 * the inputs, and, for finite inputs, an output outside the values of V or
 * an LSE that is NaN, or -inf where the row sees a key.
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
    FLOP_LIMIT = 1 << 24,         /* a forward of at most this many FLOPs: ~10 ms here */
    NAIVE_LIMIT = 8 << 20,        /* bytes of S and P the naive path may allocate */
    POISON = 0xff,                /* a NaN in every dtype */
    GUARD_BYTE = 0xa5,
};

static fattn_context *ctx, *other_ctx;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (!(cond)) {                                         \
            fprintf(stderr, "fuzz_forward: violation: ");      \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, "\n");                             \
            __builtin_trap();                                  \
        }                                                      \
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
    case 3: return 62 + (x & 7);                             /* 62..69: tile edges */
    case 4: return INT64_MAX - (x & 15);
    case 5: return ((int64_t)1 << (31 + (x & 31))) - (x >> 5);   /* 2^31 .. 2^62 */
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
    case 1: return 256 + (x & 3) - 1;   /* 255..258 */
    case 2: return 1 + x;               /* 1..256 */
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
    default: return 0.0f;   /* 1/sqrt(head_dim) */
    }
}

static int tile_val(reader *r) {
    const uint8_t sel = u8(r), x = u8(r);
    switch (sel & 15) {
    case 1: return 1 + (x & 15);
    case 2: return 1 + x * 4;   /* up to 1021 */
    case 3: return -1 - x;
    case 4: return 1025 + x;
    case 5: return (int)(uint32_t)u64(r);
    default: return 0;
    }
}

static fattn_dtype dtype_val(reader *r) {
    const uint8_t x = u8(r);
    if (x < 240) return (fattn_dtype)(x % 3);
    return (fattn_dtype)(int)(int32_t)(uint32_t)u64(r);   /* garbage */
}

/* ---- Regions of the arena -------------------------------------------------------- */

typedef struct region {
    size_t start, len;     /* bytes within the arena */
    fattn_buffer *buf;     /* wrapper of ctx (or other_ctx), NULL if none */
    int foreign;           /* wraps through other_ctx */
} region;

typedef struct world {
    unsigned char *block;  /* GUARD + arena + GUARD */
    unsigned char *arena;
    size_t arena_len;
    unsigned char *snap, *out_map, *in_map;
    region reg[REGIONS + 1];   /* the last: a foreign wrapper */
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
    default:
        return 0;
    }
}

/* Every call's status is in the table; failures say why, successes say nothing. */
static void check_status(fattn_status st, const fattn_context *c, const char *call) {
    CHECK(status_known(st), "%s returned %d, not a fattn_status", call, (int)st);
    const char *msg = fattn_error_message(c);
    CHECK(msg != NULL, "%s: fattn_error_message is NULL", call);
    if (st != FATTN_OK)
        CHECK(msg[0] != '\0', "%s failed with %s and an empty message", call, fattn_status_string(st));
    else
        CHECK(msg[0] == '\0', "%s succeeded but left the message \"%.200s\"", call, msg);
}

/* A tensor's elements as rows of `row` contiguous elements, in arena bytes.
 * Marks each byte in map; returns 0 if a row leaves [lo, hi) or, with
 * `exclusive`, meets a byte already marked. Arithmetic in 128 bits: the
 * strides may be anything the library let through. */
static int mark_rows(unsigned char *map, size_t lo, size_t hi, const fattn_tensor *t, size_t es,
                     int64_t B, int64_t H, int64_t S, int64_t row, int exclusive) {
    if (B <= 0 || H <= 0 || S <= 0 || row <= 0) return 1;   /* no elements */
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
    if (B < 0 || H < 0 || S < 0 || __builtin_mul_overflow(B, H, &n) || __builtin_mul_overflow(n, S, &n))
        return -1;
    return n;
}

/* Poisons the elements of an output tensor where they can be found within
 * its region, so an element left unwritten shows as NaN. */
static void poison_output(world *w, const fattn_tensor *t, size_t es, int64_t B, int64_t H, int64_t S,
                          int64_t row) {
    const region *r = region_of(w, t->buffer);
    const int64_t rows = rows_of(B, H, S);
    if (!r || rows <= 0 || row < 1 || (uint64_t)rows > r->len / es / (uint64_t)row) return;
    memset(w->out_map, 0, w->arena_len);
    if (!mark_rows(w->out_map, r->start, r->start + r->len, t, es, B, H, S, row, 0)) return;
    for (size_t i = r->start; i < r->start + r->len; i++)
        if (w->out_map[i]) w->arena[i] = POISON;
}

typedef struct call {
    fattn_attention_desc d;
    fattn_tensor t[5];     /* q, k, v, o, lse */
    int has_lse;
    int finite_inputs;     /* the arena holds only finite values in [-4, 4] */
} call;

enum { TQ, TK, TV, TO, TL };

/* The guard zones, and every arena byte that the call may not write. */
static void check_memory(const world *w, const unsigned char *allowed, const char *what) {
    for (size_t i = 0; i < GUARD; i++) {
        CHECK(w->block[i] == GUARD_BYTE, "%s wrote %zu bytes before the arena", what, GUARD - i);
        CHECK(w->arena[w->arena_len + i] == GUARD_BYTE, "%s wrote %zu bytes past the arena", what, i + 1);
    }
    if (memcmp(w->arena, w->snap, w->arena_len) == 0) return;
    for (size_t i = 0; i < w->arena_len; i++)
        CHECK(w->arena[i] == w->snap[i] || (allowed && allowed[i]),
              "%s changed arena byte %zu (0x%02x -> 0x%02x), outside O and LSE", what, i, w->snap[i],
              w->arena[i]);
}

/* Number of keys query row i sees. */
static int64_t keys_seen(const fattn_attention_desc *d, int64_t i) {
    if (!d->causal) return d->seq_kv;
    int64_t lim = i + d->seq_kv - d->seq_q + 1;
    return lim < 0 ? 0 : lim > d->seq_kv ? d->seq_kv : lim;
}

/* After a successful forward: outputs inside their buffers, not overlapping
 * each other or the inputs, nothing else written; for finite inputs, values
 * that a softmax-weighted mean of V can take. */
static void check_forward_ok(world *w, const call *c, const char *what) {
    const fattn_attention_desc *d = &c->d;
    const size_t es = es_of(d->dtype);
    const int64_t B = d->batch, Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
    const region *ro = region_of(w, c->t[TO].buffer), *rl = c->has_lse ? region_of(w, c->t[TL].buffer) : NULL;
    CHECK(ro && !ro->foreign, "%s accepted an O that is not a buffer of this context", what);
    for (int i = TQ; i <= TV; i++) {
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(!r || !r->foreign || (i != TQ && d->seq_kv == 0), "%s accepted a buffer of another context",
              what);
    }
    const int64_t orows = rows_of(B, Hq, d->seq_q);
    CHECK(orows >= 0 && (uint64_t)orows <= ro->len / es / (uint64_t)D,
          "%s accepted an O with more elements than its buffer has room for", what);
    memset(w->out_map, 0, w->arena_len);
    memset(w->in_map, 0, w->arena_len);
    CHECK(mark_rows(w->out_map, ro->start, ro->start + ro->len, &c->t[TO], es, B, Hq, d->seq_q, D, 1),
          "%s accepted an O whose elements overlap or leave its buffer", what);
    if (rl) {
        CHECK(!rl->foreign, "%s accepted an LSE of another context", what);
        CHECK((uint64_t)orows <= rl->len / 4, "%s accepted an LSE larger than its buffer", what);
        CHECK(mark_rows(w->out_map, rl->start, rl->start + rl->len, &c->t[TL], 4, B, Hq, d->seq_q, 1, 1),
              "%s accepted an LSE that overlaps O or itself or leaves its buffer", what);
    }
    const int64_t seqs[3] = {d->seq_q, d->seq_kv, d->seq_kv}, heads[3] = {Hq, Hk, Hk};
    for (int i = TQ; i <= TV; i++) {
        if (seqs[i] == 0) continue;
        const region *r = region_of(w, c->t[i].buffer);
        CHECK(r, "%s accepted %c without a buffer", what, "qkv"[i]);
        CHECK(mark_rows(w->in_map, r->start, r->start + r->len, &c->t[i], es, B, heads[i], seqs[i], D, 0),
              "%s accepted %c with elements outside its buffer", what, "qkv"[i]);
    }
    for (size_t i = 0; i < w->arena_len; i++)
        CHECK(!(w->out_map[i] && w->in_map[i]), "%s accepted outputs that overlap inputs (byte %zu)", what, i);
    check_memory(w, w->out_map, what);

    if (!c->finite_inputs) return;
    /* |score| <= 16 * 256 * 64: no overflow, so every row is defined. */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < d->seq_q; i++) {
                const int64_t seen = keys_seen(d, i);
                const fattn_tensor *to = &c->t[TO];
                const int64_t e = to->offset + b * to->stride_batch + h * to->stride_head + i * to->stride_seq;
                for (int64_t x = 0; x < D; x++) {
                    const float o = get_value(w->arena + ro->start + (size_t)(e + x) * es, d->dtype);
                    if (seen == 0)
                        CHECK(o == 0.0f, "%s: row %lld sees no key but O = %g", what, (long long)i, (double)o);
                    else
                        CHECK(fabsf(o) <= 4.01f, "%s: O = %g at row %lld is not a mean of V's values in [-4, 4]",
                              what, (double)o, (long long)i);
                }
                if (!rl) continue;
                const fattn_tensor *tl = &c->t[TL];
                const int64_t le = tl->offset + b * tl->stride_batch + h * tl->stride_head + i * tl->stride_seq;
                const float l = get_value(w->arena + rl->start + (size_t)le * 4, FATTN_F32);
                if (seen == 0)
                    CHECK(l == -INFINITY, "%s: row %lld sees no key but LSE = %g", what, (long long)i, (double)l);
                else
                    CHECK(isfinite(l), "%s: row %lld sees %lld keys but LSE = %g", what, (long long)i,
                          (long long)seen, (double)l);
            }
}

/* ---- The calls ---------------------------------------------------------------------- */

/* Strides for a tensor of H heads, S rows of D: a layout, padded rows, zero,
 * overlapping, negative or raw. */
static void decode_tensor(reader *r, fattn_tensor *t, const world *w, const fattn_attention_desc *d,
                          int64_t H, int64_t S, int64_t D, int is_lse) {
    memset(t, 0, sizeof *t);
    const uint8_t pick = u8(r), mode = u8(r);
    t->buffer = pick % 8 < REGIONS ? w->reg[pick % 8 % REGIONS].buf
              : pick % 8 == 4      ? w->reg[REGIONS].buf   /* another context's */
              : pick % 8 == 5      ? NULL
                                   : w->reg[0].buf;
    t->dtype = is_lse ? FATTN_F32 : d->dtype;
    if (mode >= 0xf0) t->dtype = dtype_val(r);
    const uint64_t h = (uint64_t)H, s = (uint64_t)S, dd = (uint64_t)D;
    const uint64_t pad = 1 + (mode >> 6);
    switch (mode & 7) {
    case 0: case 1:   /* BSHD */
        t->stride_head = (int64_t)dd;
        t->stride_seq = (int64_t)(h * dd);
        t->stride_batch = (int64_t)(h * s * dd);
        break;
    case 2:   /* BHSD */
        t->stride_seq = (int64_t)dd;
        t->stride_head = (int64_t)(s * dd);
        t->stride_batch = (int64_t)(h * s * dd);
        break;
    case 3:   /* padded rows */
        t->stride_seq = (int64_t)(dd + pad);
        t->stride_head = (int64_t)(s * (dd + pad));
        t->stride_batch = (int64_t)(h * s * (dd + pad));
        break;
    case 4:   /* broadcast */
        t->stride_seq = (mode & 8) ? (int64_t)dd : 0;
        break;
    case 5:   /* rows overlap */
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
    if (is_lse && (mode & 7) <= 2) {   /* [batch, heads, seq] of one element */
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
                start += 1 + (mode >> 4) % 3;   /* misaligned for the dtype */
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
        CHECK((st == FATTN_OK) == (g->buf != NULL), "fattn_buffer_wrap: status and buffer disagree");
        if (st == FATTN_OK) CHECK(fattn_buffer_size(g->buf) == g->len, "fattn_buffer_size is not the wrapped size");
    }
}

static void free_regions(world *w) {
    for (int i = 0; i <= REGIONS; i++) {
        fattn_buffer_free(w->reg[i].buf);
        w->reg[i].buf = NULL;
    }
}

/* Dense bytes of a [B, H, S, D] tensor of element size es, saturating. */
static size_t dense_bytes(int64_t B, int64_t H, int64_t S, int64_t D, size_t es) {
    if (B <= 0 || H <= 0 || S <= 0 || D <= 0) return 0;
    const double n = (double)B * (double)H * (double)S * (double)D * (double)es;
    return n > (double)MAX_ARENA ? MAX_ARENA : (size_t)n;
}

static void run_accounting(reader *r, const fattn_attention_desc *d) {
    fattn_memory_report rep;
    fattn_tiling tiling;
    tiling.tile_q = tile_val(r);
    tiling.tile_kv = tile_val(r);
    tiling.concurrent_groups = size_val(r);
    tiling.workspace_bytes = (u8(r) & 1) ? u64(r) : 0;
    const uint8_t which = u8(r);
    fattn_status st = fattn_memory_estimate(d, (which & 1) ? &tiling : NULL, &rep);
    check_status(st, NULL, "fattn_memory_estimate");
    const double flops = fattn_flops(d);
    if (st == FATTN_OK) {
        const uint64_t naive = 8ull * (uint64_t)d->batch * (uint64_t)d->heads_q * (uint64_t)d->seq_q *
                               (uint64_t)d->seq_kv;
        CHECK(rep.naive_bytes == naive, "naive_bytes %llu is not 8*B*Hq*Sq*Sk = %llu",
              (unsigned long long)rep.naive_bytes, (unsigned long long)naive);
        CHECK(rep.flops == flops && flops >= 0.0, "report FLOPs %g and fattn_flops %g differ", rep.flops, flops);
        CHECK(rep.flops <= 4.0 * (double)d->batch * (double)d->heads_q * (double)d->head_dim *
                               (double)d->seq_q * (double)d->seq_kv * (1 + 1e-12),
              "FLOPs exceed 4*B*Hq*D*Sq*Sk");
    }
    if (which & 2) {
        st = fattn_context_memory_report(ctx, d, &rep);
        check_status(st, ctx, "fattn_context_memory_report");
    }
}

/* fattn_attention_host over dense arrays placed in the arena. */
static void run_host(reader *r, world *w, const fattn_attention_desc *d) {
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
    if (pos > w->arena_len) return;   /* the library would read past our arrays */
    if (mode & 1) at[3] = at[0];      /* O on Q: must be refused */
    const fattn_layout layout = (mode & 2) ? FATTN_LAYOUT_BHSD : (mode & 4) ? (fattn_layout)7 : FATTN_LAYOUT_BSHD;
    float *lse = (mode & 8) ? NULL : (float *)(void *)(w->arena + at[4]);
    const void *q = (mode & 16) ? NULL : w->arena + at[0];
    memcpy(w->snap, w->arena, w->arena_len);
    fattn_status st = fattn_attention_host(ctx, d, layout, q, w->arena + at[1], w->arena + at[2],
                                           w->arena + at[3], lse);
    check_status(st, ctx, "fattn_attention_host");
    if (st != FATTN_OK) {
        check_memory(w, NULL, "fattn_attention_host (failed)");
        return;
    }
    CHECK(!(mode & 1) || len[0] == 0, "fattn_attention_host accepted O on top of Q");
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
        st = i == 0 ? fattn_buffer_write(b, off, w->arena, n) : fattn_buffer_read(b, off, w->snap, n);
        check_status(st, ctx, i == 0 ? "fattn_buffer_write" : "fattn_buffer_read");
        const int fits = off <= size && n <= size - off;
        CHECK((st == FATTN_OK) == fits, "buffer copy of %zu bytes at %zu in %zu: status %s", n, off, size,
              fattn_status_string(st));
    }
    fattn_buffer_free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("FATTN_CPU_THREADS", "1", 1);
    if (fattn_context_create(&ctx, FATTN_BACKEND_CPU, 0) != FATTN_OK ||
        fattn_context_create(&other_ctx, FATTN_BACKEND_CPU, 0) != FATTN_OK) {
        fprintf(stderr, "fuzz_forward: cannot create a CPU context: %s\n", fattn_error_message(NULL));
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    call c;
    memset(&c, 0, sizeof c);
    fattn_attention_desc *d = &c.d;
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
    d->causal = (misc & 1) ? ((misc & 2) ? (int)(int32_t)(uint32_t)u64(r) : 1) : 0;
    d->flags = (misc & 4) ? (unsigned)u64(r) : (misc & 8) ? FATTN_FLAG_ALLOW_TF32 : 0;
    d->tile_q = tile_val(r);
    d->tile_kv = tile_val(r);
    const int specials = (misc & 0x30) == 0x30;
    const uint64_t seed = u64(r);

    run_accounting(r, d);

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
    decode_tensor(r, &c.t[TQ], &w, d, d->heads_q, d->seq_q, d->head_dim, 0);
    decode_tensor(r, &c.t[TK], &w, d, d->heads_kv, d->seq_kv, d->head_dim, 0);
    decode_tensor(r, &c.t[TV], &w, d, d->heads_kv, d->seq_kv, d->head_dim, 0);
    decode_tensor(r, &c.t[TO], &w, d, d->heads_q, d->seq_q, d->head_dim, 0);
    decode_tensor(r, &c.t[TL], &w, d, d->heads_q, d->seq_q, 1, 1);
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

    /* Finite, element-aligned inputs: then the outputs' values are checked too. */
    const double resolved = d->scale != 0.0f ? fabs((double)d->scale) : 1.0;
    c.finite_inputs = !specials && fattn_dtype_size(d->dtype) && resolved <= 64.0;
    for (int i = TQ; i <= TV; i++) {
        const region *g = region_of(&w, c.t[i].buffer);
        if (g && g->start % es) c.finite_inputs = 0;
    }

    /* A forward runs when its work is small (fattn_flops is 0 for an invalid
     * description, which fails before any work). The naive path allocates
     * S and P: only when the estimate bounds them, or the description is
     * invalid (any estimate failure but an overflow says so). */
    fattn_memory_report rep;
    const fattn_status est = fattn_memory_estimate(d, NULL, &rep);
    const int desc_ok = est == FATTN_OK;
    if (fattn_flops(d) <= (double)FLOP_LIMIT) {
        const int naive = (ops & 12) == 12 && (desc_ok ? rep.naive_bytes <= NAIVE_LIMIT : est != FATTN_ERR_OVERFLOW);
        const char *what = naive ? "fattn_forward_naive" : "fattn_forward";
        if (fattn_dtype_size(d->dtype)) {
            poison_output(&w, &c.t[TO], es, d->batch, d->heads_q, d->seq_q, d->head_dim);
            if (c.has_lse) poison_output(&w, &c.t[TL], 4, d->batch, d->heads_q, d->seq_q, 1);
        }
        memcpy(w.snap, w.arena, w.arena_len);
        const fattn_tensor *lse = c.has_lse ? &c.t[TL] : NULL;
        const fattn_status st = naive ? fattn_forward_naive(ctx, d, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse)
                                      : fattn_forward(ctx, d, &c.t[TQ], &c.t[TK], &c.t[TV], &c.t[TO], lse);
        check_status(st, ctx, what);
        if (st == FATTN_OK) {
            check_forward_ok(&w, &c, what);
        } else {
            check_memory(&w, NULL, what);
        }
    }
    if (ops & 16) {
        fill_arena(&w, fill_t, seed, specials);
        if (fattn_flops(d) <= (double)FLOP_LIMIT) run_host(r, &w, d);
    }
    if (ops & 32) run_copies(r, &w);

    free_regions(&w);
    free(w.block);
    free(w.snap);
    free(w.out_map);
    free(w.in_map);
    return 0;
}
