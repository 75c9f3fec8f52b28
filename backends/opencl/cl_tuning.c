/* Tile sizes per device class, fitted to the device's local memory and
 * work-group limits read at run time. Nothing here assumes a warp width:
 * a row's TPR work-items synchronise through local memory and barriers. */
#include <stdio.h>
#include <string.h>

#include "cl_common.h"

typedef struct tuning_row {
    int vendor_class;
    int bq, bkv, tpr;
} tuning_row;

/* Starting points, not yet tuned by measurement on each class: 128 work-items
 * (a multiple of 32 and 64 wavefronts), a 32-key tile that keeps a 128-dim
 * tile set under 48 KiB of local memory. */
static const tuning_row table[] = {
    {CL_CLASS_NVIDIA, 16, 32, 8},
    {CL_CLASS_AMD, 16, 32, 8},
    {CL_CLASS_INTEL, 16, 32, 8},
    {CL_CLASS_CPU, 16, 32, 8},
    {CL_CLASS_OTHER, 16, 32, 8},
};

void cl_read_limits(cl_device_id dev, cl_device_type type, cl_limits *out) {
    cl_ulong local = 0;
    size_t wg = 0;
    cl_uint cu = 0;
    char vendor[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
    out->local_mem = (size_t)local;
    out->max_wg = wg;
    out->compute_units = (int)cu;
    if (type & CL_DEVICE_TYPE_CPU) out->vendor_class = CL_CLASS_CPU;
    else if (strstr(vendor, "NVIDIA")) out->vendor_class = CL_CLASS_NVIDIA;
    else if (strstr(vendor, "AMD") || strstr(vendor, "Advanced Micro")) out->vendor_class = CL_CLASS_AMD;
    else if (strstr(vendor, "Intel")) out->vendor_class = CL_CLASS_INTEL;
    else out->vendor_class = CL_CLASS_OTHER;
}

size_t cl_local_bytes(const cl_tiles *t) {
    const size_t f = sizeof(float);
    return f * ((size_t)t->bq * t->dpad                 /* Q */
                + (size_t)t->bkv * (t->dpad + 1)        /* K, padded */
                + (size_t)t->bkv * t->dpad              /* V */
                + (size_t)t->bq * t->bkv                /* P */
                + 2 * (size_t)t->bq * t->tpr);          /* row max and sum partials */
}

static int fits(const cl_limits *lim, const cl_tiles *t) {
    return cl_local_bytes(t) <= lim->local_mem && (size_t)(t->bq * t->tpr) <= lim->max_wg;
}

fattn_status cl_choose_tiles(const cl_limits *lim, int D, int tile_q, int tile_kv, cl_tiles *out,
                             fattn_msg *msg) {
    const tuning_row *row = &table[0];
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].vendor_class == lim->vendor_class) row = &table[i];
    cl_tiles t = {32, row->bq, row->bkv, row->tpr};
    while (t.dpad < D) t.dpad *= 2;   /* 32, 64, 128, 256: few programs to build */
    if (tile_q) t.bq = tile_q;
    if (tile_kv) {
        if (tile_kv % t.tpr)
            return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                              "tile_kv = %d: the OpenCL kernel needs a multiple of %d", tile_kv, t.tpr);
        t.bkv = tile_kv;
    }
    /* Shrink what the caller left to us until the tiles fit the device. */
    while (!fits(lim, &t) && !tile_kv && t.bkv > t.tpr) t.bkv /= 2;
    while (!fits(lim, &t) && !tile_q && t.bq > 1) t.bq /= 2;
    if (!fits(lim, &t))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tiles %d x %d for head dim %d need %zu bytes of local memory and %d "
                          "work-items; the device has %zu bytes and %zu",
                          t.bq, t.bkv, D, cl_local_bytes(&t), t.bq * t.tpr, lim->local_mem, lim->max_wg);
    *out = t;
    return FATTN_OK;
}
