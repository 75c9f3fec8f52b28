/* Tile sizes per device class, fitted to the device's local memory and
 * work-group limits read at run time. Nothing here assumes a warp width: the
 * work-items sharing a row synchronise through local memory and barriers. */
#include <stdio.h>
#include <string.h>

#include "cl_common.h"

typedef struct tuning_row {
    int dpad;
    int bq, bkv, tq, tk;
} tuning_row;

/* Starting points per head-dim bucket, not yet tuned by measurement on each
 * device class. Each keeps the tile set under 48 KiB of local memory (the
 * NVIDIA limit) with 64 or 128 work-items, micro-tiles of 2-4 rows x 2-8 keys
 * and at most 64 accumulator floats per work-item, so nothing spills. */
static const tuning_row table[] = {
    {32, 64, 64, 16, 8},    /* 4 rows x 8 keys, 4 dims: 36 KiB */
    {64, 64, 32, 16, 8},    /* 4 x 4, 8 dims: 35.5 KiB; H200 NVIDIA OpenCL f32: 28.2 TFLOP/s */
    {128, 64, 16, 16, 8},   /* 4 x 2, 16 dims: 47.25 KiB; H200 NVIDIA OpenCL f32: 23.2 TFLOP/s */
    {256, 16, 16, 8, 8},    /* 2 x 2, 32 dims: 34 KiB */
};

/* Most rows or keys per work-item before registers run out. */
#define CL_MAX_PER_ITEM 16

void cl_read_limits(cl_device_id dev, cl_device_type type, cl_limits *out) {
    cl_ulong local = 0, alloc = 0;
    size_t wg = 0;
    cl_uint cu = 0;
    char vendor[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
    out->local_mem = (size_t)local;
    out->max_wg = wg;
    out->compute_units = (int)cu;
    out->max_alloc = (uint64_t)alloc;
    out->softmax_wg = 1;
    while (out->softmax_wg < 256 && (size_t)out->softmax_wg * 2 <= wg) out->softmax_wg *= 2;
    if (type & CL_DEVICE_TYPE_CPU) out->vendor_class = CL_CLASS_CPU;
    else if (strstr(vendor, "NVIDIA")) out->vendor_class = CL_CLASS_NVIDIA;
    else if (strstr(vendor, "AMD") || strstr(vendor, "Advanced Micro")) out->vendor_class = CL_CLASS_AMD;
    else if (strstr(vendor, "Intel")) out->vendor_class = CL_CLASS_INTEL;
    else out->vendor_class = CL_CLASS_OTHER;
}

/* Mirrors the kernel's local arrays and its default pads (QPAD, KPAD, PPAD). */
size_t cl_local_bytes(const cl_tiles *t) {
    const size_t f = sizeof(float);
    const size_t qpad = t->tk < 8 ? 4 : 0, kpad = 4, ppad = 4;
    return f * ((size_t)t->bq * (t->dpad + qpad)       /* Q */
                + (size_t)t->bkv * (t->dpad + kpad)    /* K, then V */
                + (size_t)t->bq * (t->bkv + ppad)      /* P */
                + (size_t)t->bq * t->tk);              /* row max and sum partials */
}

static int pow2_divisor(int n, int cap) {
    int p = 1;
    while (p < cap && n % (2 * p) == 0) p *= 2;
    return p;
}

/* Work-item grid for the tiles: the table's shape, narrowed to divide them. */
static void shape(cl_tiles *t, int tq, int tk) {
    t->tq = pow2_divisor(t->bq, tq);
    t->tk = pow2_divisor(t->bkv, tk < t->dpad / 4 ? tk : t->dpad / 4);
}

static int fits_device(const cl_limits *lim, const cl_tiles *t) {
    return cl_local_bytes(t) <= lim->local_mem && (size_t)(t->tq * t->tk) <= lim->max_wg;
}

static int fits(const cl_limits *lim, const cl_tiles *t) {
    return fits_device(lim, t) && t->bq / t->tq <= CL_MAX_PER_ITEM && t->bkv / t->tk <= CL_MAX_PER_ITEM;
}

fattn_status cl_choose_tiles(const cl_limits *lim, int D, int tile_q, int tile_kv, cl_tiles *out,
                             fattn_msg *msg) {
    int dpad = 32;
    while (dpad < D) dpad *= 2;   /* 32, 64, 128, 256: few programs to build */
    const tuning_row *row = &table[0];
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].dpad == dpad) row = &table[i];
    (void)lim->vendor_class;   /* one table for every class until measured otherwise */
    cl_tiles t = {dpad, row->bq, row->bkv, row->tq, row->tk};
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
    while (t.bq / t.tq > CL_MAX_PER_ITEM && t.bq % (2 * t.tq) == 0 && 2 * t.tq * t.tk <= 256) tq = t.tq *= 2;
    while (t.bkv / t.tk > CL_MAX_PER_ITEM && t.bkv % (2 * t.tk) == 0 && 2 * t.tq * t.tk <= 256 &&
           2 * t.tk <= dpad / 4)
        tk = t.tk *= 2;
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
                          "tiles %d x %d for head dim %d need %zu bytes of local memory, %d "
                          "work-items and %d x %d rows x keys per work-item; the device has %zu "
                          "bytes and %zu work-items, and the kernel allows %d x %d",
                          t.bq, t.bkv, D, cl_local_bytes(&t), t.tq * t.tk, t.bq / t.tq, t.bkv / t.tk,
                          lim->local_mem, lim->max_wg, CL_MAX_PER_ITEM, CL_MAX_PER_ITEM);
    *out = t;
    return FATTN_OK;
}
