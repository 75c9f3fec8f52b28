/* Tile sizes per device class, fitted to the device's local memory and
 * work-group limits read at run time. Nothing here assumes a warp width: the
 * work-items sharing a row synchronise through local memory and barriers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_common.h"

typedef struct tuning_row {
    int vendor_class; /* OCL_CLASS_*; OCL_CLASS_OTHER rows are the fallback */
    int dpad;
    int bq, bkv, tq, tk;
} tuning_row;

/* Rows per device class and head-dim bucket. Each keeps the tiles under
 * 48 KiB of local memory (NVIDIA's limit) with micro-tiles of 2-4 rows x 2-8
 * keys. Measured rows name their device; the others are starting points.
 * FATTN_OPENCL_TILES overrides any of them (see ocl_choose_tiles). */
static const tuning_row table[] = {
    {OCL_CLASS_OTHER, 32, 64, 64, 16, 8},  /* 4 rows x 8 keys, 4 dims: 36 KiB */
    {OCL_CLASS_OTHER, 64, 64, 32, 16, 8},  /* 4 x 4, 8 dims: 35.5 KiB */
    {OCL_CLASS_OTHER, 128, 64, 16, 16, 8}, /* 4 x 2, 16 dims: 47.25 KiB */
    {OCL_CLASS_OTHER, 256, 16, 16, 8, 8},  /* 2 x 2, 32 dims: 34 KiB */
    /* H200, NVIDIA OpenCL, f32 seq 8192, two rounds of bench/tune_opencl.sh:
     * d64: 64x48 tiles beat 64x32 by 6% (36.5 vs 38.8 ms; causal 19.2 vs 20.2).
     * d128: 40 rows x 32 keys on an 8x16 grid (5 rows x 2 keys, 8 dims each;
     * 45.7 KiB) beat 64x16 by 9-17% (43.2 vs 47.1 ms; causal 21.3 vs 25.1). */
    {OCL_CLASS_NVIDIA, 64, 64, 48, 16, 8},
    {OCL_CLASS_NVIDIA, 128, 40, 32, 8, 16},
    /* PoCL on a 2-core EPYC, f32 seq 1024: 8 x 8 micro-tiles (vectorised across
     * work-items) run 2x (d64: 154 vs 308 ms) and 1.5x (d128: 145 vs 219 ms)
     * faster than the GPU rows; local memory is ordinary cache there. */
    {OCL_CLASS_CPU, 64, 64, 64, 8, 8},
    {OCL_CLASS_CPU, 128, 64, 32, 8, 8},
};

/* Most rows or keys per work-item before registers run out. */
#define OCL_MAX_PER_ITEM 16
/* Largest number FATTN_OPENCL_TILES may give: far past any device, and
 * small enough that no product of two overflows, even in int. */
#define OCL_TILE_MAX 4096

fattn_status ocl_read_limits(cl_device_id dev, cl_device_type type, ocl_limits *out,
                             fattn_msg *msg) {
    cl_ulong local = 0, alloc = 0, global = 0;
    size_t wg = 0, multiple = 0;
    cl_uint cu = 0;
    char vendor[256] = "";
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL));
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL));
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL));
    OCL_TRY(msg, clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL));
    /* OpenCL 3.0 only (0x1067, CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE):
     * older drivers reject the query, and then nothing is preferred. */
    if (clGetDeviceInfo(dev, 0x1067, sizeof multiple, &multiple, NULL) != CL_SUCCESS ||
        multiple == 0)
        multiple = 1;
    out->local_mem = (size_t)local;
    out->max_wg = wg;
    out->preferred_multiple = multiple;
    out->compute_units = (int)cu;
    out->max_alloc = (uint64_t)alloc;
    out->global_mem = (uint64_t)global;
    out->softmax_wg = 1;
    while (out->softmax_wg < 256 && (size_t)out->softmax_wg * 2 <= wg) out->softmax_wg *= 2;
    if (type & CL_DEVICE_TYPE_CPU)
        out->vendor_class = OCL_CLASS_CPU;
    else if (strstr(vendor, "NVIDIA"))
        out->vendor_class = OCL_CLASS_NVIDIA;
    else if (strstr(vendor, "AMD") || strstr(vendor, "Advanced Micro"))
        out->vendor_class = OCL_CLASS_AMD;
    else if (strstr(vendor, "Intel"))
        out->vendor_class = OCL_CLASS_INTEL;
    else
        out->vendor_class = OCL_CLASS_OTHER;
    out->cu_local_mem = out->group_local_max = out->local_mem;
    /* cl_nv_device_attribute_query's compute capability (0x4000, 0x4001):
     * shared memory per SM for groups and the most one block may opt into
     * (the CUDA guide's table: 9.0 and 10.0 228 and 227 KiB, 8.0 and 8.7 164
     * and 163, 8.6, 8.9 and 12.x 100 and 99, 7.0 96 and 96, 7.5 64 and 64). */
    cl_uint cc[2] = {0, 0};
    if (out->vendor_class == OCL_CLASS_NVIDIA &&
        clGetDeviceInfo(dev, 0x4000, sizeof cc[0], &cc[0], NULL) == CL_SUCCESS &&
        clGetDeviceInfo(dev, 0x4001, sizeof cc[1], &cc[1], NULL) == CL_SUCCESS) {
        const unsigned v = cc[0] * 10 + cc[1];
        const size_t kib = v == 90 || v == 100 ? 228 : v == 80 || v == 87 ? 164
                           : v == 70 ? 96 : v == 75 ? 64 : v >= 86 ? 100 : 0;
        const size_t group_kib = kib == 96 || kib == 64 ? kib : kib ? kib - 1 : 0;
        if (kib * 1024 > out->cu_local_mem) out->cu_local_mem = kib * 1024;
        if (group_kib * 1024 > out->group_local_max) out->group_local_max = group_kib * 1024;
    }
    return FATTN_OK;
}

/* Mirrors the kernel's local arrays and its default pads (QPAD, KPAD, PPAD). */
size_t ocl_local_bytes(const ocl_tiles *t) {
    const size_t f = sizeof(float);
    const size_t qpad = t->tk < 8 ? 4 : 0, kpad = 4, ppad = 4;
    /* A K or V row: the wider of the two (KV4 with head_dim_v). */
    const size_t kv = (size_t)(t->dpad > t->dvpad ? t->dpad : t->dvpad);
    return f * ((size_t)t->bq * (t->dpad + qpad)  /* Q */
                + (size_t)t->bkv * (kv + kpad)    /* K, then V */
                + (size_t)t->bq * (t->bkv + ppad) /* P */
                + (size_t)t->bq * t->tk);         /* row max and sum partials */
}

static int pow2_divisor(int n, int cap) {
    int p = 1;
    while (p < cap && n % (2 * p) == 0) p *= 2;
    return p;
}

/* The smaller of the Q/K and V dim buckets: TK must divide both over 4. */
static int min_pad(const ocl_tiles *t) { return t->dpad < t->dvpad ? t->dpad : t->dvpad; }

/* Work-item grid for the tiles: the table's shape, narrowed to divide them. */
static void shape(ocl_tiles *t, int tq, int tk) {
    t->tq = pow2_divisor(t->bq, tq);
    t->tk = pow2_divisor(t->bkv, tk < min_pad(t) / 4 ? tk : min_pad(t) / 4);
}

/* Work-items per group. */
static size_t items(const ocl_tiles *t) { return (size_t)t->tq * (size_t)t->tk; }

static int fits_device(const ocl_limits *lim, const ocl_tiles *t) {
    return ocl_local_bytes(t) <= lim->local_mem && items(t) <= lim->max_wg;
}

static int fits(const ocl_limits *lim, const ocl_tiles *t) {
    return fits_device(lim, t) && t->bq / t->tq <= OCL_MAX_PER_ITEM &&
           t->bkv / t->tk <= OCL_MAX_PER_ITEM;
}

/* One number of FATTN_OPENCL_TILES: decimal digits only (strtol alone would
 * take a sign and leading spaces), 1 .. OCL_TILE_MAX. Returns the position
 * after it, or NULL. */
static const char *tile_number(const char *v, int *out) {
    if (*v < '0' || *v > '9') return NULL;
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    if (errno != 0 || n < 1 || n > OCL_TILE_MAX) return NULL;
    *out = (int)n;
    return end;
}

/* One "DPAD:BQxBKV/TQxTK" item; returns the position after it, or NULL. */
static const char *tile_item(const char *v, tuning_row *r) {
    int *const fields[5] = {&r->dpad, &r->bq, &r->bkv, &r->tq, &r->tk};
    static const char seps[5] = {':', 'x', '/', 'x', '\0'};
    for (int i = 0; i < 5; i++) {
        if (!(v = tile_number(v, fields[i]))) return NULL;
        if (seps[i] && *v++ != seps[i]) return NULL;
    }
    return v;
}

/* The entry for bucket dpad, if any, in `value` (FATTN_OPENCL_TILES, from
 * settings->opencl_tiles; NULL or "" = unset): "DPAD:BQxBKV/TQxTK" items
 * separated by commas, DPAD one of 32, 64, 128, 256, no whitespace
 * anywhere. The whole value is checked, whichever bucket is asked for.
 * Returns -1 when it is malformed (*bad, *bad_len: the item at fault), 1 if
 * dpad has an entry (the last one wins), else 0. */
static int env_row(const char *value, int dpad, tuning_row *out, const char **bad, int *bad_len) {
    const char *v = value && *value ? value : NULL;
    int found = 0;
    while (v) { /* an empty item (",," or a trailing comma) is malformed too */
        tuning_row r = {OCL_CLASS_OTHER, 0, 0, 0, 0, 0};
        const char *end = tile_item(v, &r);
        if (!end || (*end != ',' && *end != '\0') ||
            (r.dpad != 32 && r.dpad != 64 && r.dpad != 128 && r.dpad != 256) || r.bkv < 4 ||
            r.bkv % 4 || r.bq % r.tq || r.bkv % r.tk || (r.dpad / 4) % r.tk) {
            *bad = v;
            *bad_len = (int)strcspn(v, ",");
            return -1;
        }
        if (r.dpad == dpad) {
            *out = r;
            found = 1;
        }
        v = *end ? end + 1 : NULL;
    }
    return found;
}

static int dim_bucket(int D) {
    int pad = 32;
    while (pad < D) pad *= 2; /* 32, 64, 128, 256: few programs to build */
    return pad;
}

fattn_status ocl_choose_tiles(const ocl_limits *lim, const char *forced_tiles, int D, int Dv,
                              int tile_q, int tile_kv, ocl_tiles *out, fattn_msg *msg) {
    /* With head_dim_v the larger bucket picks the row (it sizes the K/V
     * tile); the kernel pads Q and K to dqk and V to dv. */
    const int dqk = dim_bucket(D), dv = dim_bucket(Dv), dpad = dqk > dv ? dqk : dv;
    const tuning_row *row = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].dpad == dpad && (table[i].vendor_class == lim->vendor_class ||
                                      (!row && table[i].vendor_class == OCL_CLASS_OTHER)))
            row = &table[i];
    tuning_row forced = {OCL_CLASS_OTHER, 0, 0, 0, 0, 0};
    const char *bad = "";
    int bad_len = 0;
    const int from_env = env_row(forced_tiles, dpad, &forced, &bad, &bad_len);
    if (from_env < 0)
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_OPENCL_TILES='%s': '%.*s' is not DPAD:BQxBKV/TQxTK (e.g. "
                          "128:32x32/8x8; items separated by commas, no spaces): DPAD 32, 64, 128 "
                          "or 256, each number 1..%d, BKV a multiple of 4, TQ dividing BQ, TK "
                          "dividing BKV and DPAD/4",
                          forced_tiles, bad_len, bad, OCL_TILE_MAX);
    if (from_env) { /* taken as given: it either fits or fails */
        ocl_tiles t = {dqk, forced.bq, forced.bkv, forced.tq, forced.tk, dv};
        if (!fits(lim, &t) || (min_pad(&t) / 4) % t.tk)
            return fattn_fail(
                msg, FATTN_ERR_UNSUPPORTED,
                "FATTN_OPENCL_TILES: %dx%d/%dx%d at head dim %d (V: %d) needs %zu bytes of "
                "local memory (device: %zu), %zu work-items (device: %zu), at most %d rows "
                "and keys per work-item, and TK dividing both dims' buckets over 4",
                t.bq, t.bkv, t.tq, t.tk, dqk, dv, ocl_local_bytes(&t), lim->local_mem, items(&t),
                lim->max_wg, OCL_MAX_PER_ITEM);
        *out = t;
        return FATTN_OK;
    }
    ocl_tiles t = {dqk, row->bq, row->bkv, row->tq, row->tk, dv};
    int tq = row->tq, tk = row->tk;
    if (tile_q) t.bq = tile_q;
    if (tile_kv) {
        if (tile_kv % 4)
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "tile_kv = %d: the OpenCL kernel needs a multiple of 4", tile_kv);
        t.bkv = tile_kv;
    }
    /* Large caller tiles: widen the grid (up to 256 work-items) before the
     * per-work-item micro-tile outgrows its registers. */
    shape(&t, tq, tk);
    while (t.bq / t.tq > OCL_MAX_PER_ITEM && t.bq % (2 * t.tq) == 0 && 2 * items(&t) <= 256)
        tq = t.tq *= 2;
    while (t.bkv / t.tk > OCL_MAX_PER_ITEM && t.bkv % (2 * t.tk) == 0 && 2 * items(&t) <= 256 &&
           2 * t.tk <= min_pad(&t) / 4)
        tk = t.tk *= 2;
    /* Whole hardware groups (warps, wavefronts): widen the grid along rows
     * while the work-item count is not a multiple of what the device prefers. */
    while (items(&t) % lim->preferred_multiple && t.bq % (2 * t.tq) == 0 &&
           2 * items(&t) <= lim->max_wg)
        tq = t.tq *= 2;
    /* Shrink what the caller left to us until the tiles fit the device. */
    while (!fits_device(lim, &t) && !tile_kv && t.bkv > 4) {
        t.bkv /= 2;
        shape(&t, tq, tk);
    }
    while (!fits_device(lim, &t) && !tile_q && t.bq > 1) {
        t.bq /= 2;
        shape(&t, tq, tk);
    }
    if (!fits(lim, &t))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tiles %d x %d for head dim %d need %zu bytes of local memory, %zu "
                          "work-items and %d x %d rows x keys per work-item; the device has %zu "
                          "bytes and %zu work-items, and the kernel allows %d x %d",
                          t.bq, t.bkv, D, ocl_local_bytes(&t), items(&t), t.bq / t.tq, t.bkv / t.tk,
                          lim->local_mem, lim->max_wg, OCL_MAX_PER_ITEM, OCL_MAX_PER_ITEM);
    *out = t;
    return FATTN_OK;
}
