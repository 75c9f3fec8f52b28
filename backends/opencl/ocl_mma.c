/* The OpenCL matrix path (kernels_cl/flash_mma.cl): which vendor files a
 * device gets (probe, then choose), the tiles per head-dim bucket, and the
 * variant table's row (accept and run).
 *
 * A primitive is a row of prims[]: the files joined before the kernel (see
 * kernels_cl/mma_common.cl). NVIDIA GPUs get "nv" (tensor cores through
 * inline PTX), AMD GPUs "rdna" (RDNA3's WMMA) or "cdna" (MFMA), Intel GPUs
 * "xe" (XMX's DPAS, at the device's DPAS sub-group size).
 * FATTN_OPENCL_MATRIX=emulate (or emulate-nv, -rdna, -cdna, -xe, -xe8)
 * gives any device a layout's plain-OpenCL emulation (for tests), =off
 * none. A primitive is used only where its
 * probe (kernels_cl/mma_probe.cl, the tile functions on known data) built
 * and computed the right numbers on the device, in each 16-bit dtype. The
 * probe runs in a cl_context of its own (a probe that faults must not take
 * the caller's context with it), once per device, primitive and process. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "half.h"
#include "ocl_common.h"

/* ---- Tiles ---------------------------------------------------------------------- */

/* flash_mma.cl's BM, BN, NW, QREG, STAGES, FOLD; spec: where every
 * operand takes 16-byte copies the kernel is built for it (VEC=7), without
 * the element-wise copies misaligned operands need. Which way ptxas
 * allocates fewer registers (or spills less) differs by shape (measured on
 * NVIDIA only; the other vendors' shapes leave it off). pad: tile rows
 * padded by 16 bytes rather than swizzled (PADL; mma_common.cl says why). */
typedef struct mma_shape {
    int bm, bn, nw, qreg, stages, fold, spec, pad;
} mma_shape;

/* 16-bit units of a tile of `rows` rows of `units` units (PADL's pad). */
static size_t tile_units(const mma_shape *sh, int rows, int units) {
    return (size_t)rows * (size_t)(units + 8 * sh->pad);
}

/* flash_mma.cl's local memory: the tiles (ew 16-bit units an element; f32
 * has V transposed, as the one tile file with TF32 stores it), and the
 * emulation's scratch (xs_words per warp). */
static size_t local_bytes(const mma_shape *sh, int dpad, int dvpad, int ew, int xs_words) {
    const size_t v = ew == 2 ? tile_units(sh, dvpad, sh->bn * ew) : tile_units(sh, sh->bn, dvpad * ew);
    const size_t kv = (size_t)sh->stages * (tile_units(sh, sh->bn, dpad * ew) + v);
    const size_t q = tile_units(sh, sh->bm, dpad * ew);
    const size_t units = sh->qreg ? (q > kv ? q : kv) : q + kv;
    return 2 * units + 4 * (size_t)sh->nw * (size_t)xs_words;
}

/* A bucket's shapes, best first: the first whose tiles fit `limit` bytes of
 * local memory at head dims w, else the last. */
static mma_shape first_fit(size_t limit, int w, int ew, size_t n, const mma_shape *c) {
    for (size_t i = 0; i + 1 < n; i++)
        if (local_bytes(&c[i], w, w, ew, 0) <= limit) return c[i];
    return c[n - 1];
}
#define FIRST_FIT(limit, w, ew, ...)                                                               \
    first_fit(limit, w, ew, sizeof((mma_shape[]){__VA_ARGS__}) / sizeof(mma_shape),                \
              (mma_shape[]){__VA_ARGS__})

/* TF32 (f32 tiles, twice the bytes): 4 warps, V transposed.
 * 32 and 64: 128 rows x 64 keys, Q in registers (staged in the K/V area),
 * K/V double-buffered at 32 and single at 64 (32 KiB each). 128: 64 rows x
 * 16 keys with Q in local memory, K and V^T double-buffered with padded
 * rows (70 KiB), or single and swizzled within 48 KiB. 256: 64 x 16,
 * single-buffered, padded (101.25 KiB), or swizzled (96 KiB: a GPU whose
 * groups have 99 KiB); nothing fits 48, and the scalar kernel runs.
 * H200 (bench/results/2026-11-23-h200-opencl-matrix, calls 58-59): d64's
 * shape is 13-40% faster than 32-key tiles double-buffered, d128's 16-21%
 * faster than 64 x 32 with Q in registers; against the scalar f32 kernel
 * 3.0-3.4x at d32, 3.0-3.2x at d64, 1.8-2.1x at d128. Past 48 KiB
 * (bench/results/2026-11-24-h200-opencl-nw2, call119): d128 double-buffered
 * 5-13% faster than single (32 keys a tile: 14-22% slower); d256 3.0-3.6x
 * the scalar kernel (call120). Padded rows (2026-11-24-h200-opencl-pad,
 * call125): d128 5-8% faster than swizzled; d256 40-44 TFLOP/s, where
 * call120 had 33-37 swizzled. */
static mma_shape shape_tf32(int w, size_t limit) {
    if (w <= 32) return (mma_shape){128, 64, 4, 1, 2, 1, 0, 0};
    if (w <= 64) return (mma_shape){128, 64, 4, 1, 1, 1, 0, 0};
    if (w <= 128)
        return FIRST_FIT(limit, 128, 2, {64, 16, 4, 0, 2, 1, 1, 1}, {64, 16, 4, 0, 1, 1, 1, 0});
    return FIRST_FIT(limit, 256, 2, {64, 16, 4, 0, 1, 1, 1, 1}, {64, 16, 4, 0, 1, 1, 1, 0},
                     {0, 0, 0, 0, 0, 0, 0, 0});
}

/* By the wider of the Q/K and V buckets. The registers bound them (O is
 * MT x DVPAD / 2 floats per work-item, S MT x BN / 2), and local memory:
 * the device's 48 KiB, or on NVIDIA up to the block maximum its compiler
 * takes for static arrays (the local probe; 226 KiB on the H200). Past 48
 * KiB the rows are padded (PADL): with the lane's fragment offset pinned
 * per sweep of loads, every fragment load is one register plus an
 * immediate, where the swizzle's offsets, hoisted out of the key loop,
 * held a register each (bench/results/2026-11-24-h200-opencl-pad, calls
 * 124-125: 64 keys a tile at d128 became the fastest shape; each shape
 * below against the best swizzled one, f16, seq 4096 and 16384).
 *  32: 128 rows with 8 warps (1 m16 tile per warp) x 64 keys, Q in
 *       registers, K and V double-buffered (16 KiB): with 4 warps (2 tiles
 *       each) the kernel takes 177 registers since the per-vendor split,
 *       2 groups per SM, and is 17% slower than at 168 registers and 3
 *       groups before it; 8 warps take 126 (call55: 7% slower than before
 *       the split, the best of the shapes swept).
 *  64: 128 rows (2 m16 tiles per warp) x 128 keys, Q in local memory, K
 *       and V double-buffered, padded (90 KiB), with VEC: 8-9% faster
 *       than 96 keys swizzled (the shape before; padded, 96 keys are 2-5%
 *       slower than 128). Within 48 KiB: 64 keys, swizzled, with VEC (calls
 *       118-120 of bench/results/2026-11-24-h200-opencl-nw2).
 *  128: 128 x 64, Q in local memory, K and V single-buffered, padded (68
 *       KiB), with VEC: 26-27% faster than 128 x 32 swizzled (the shape
 *       before, which stays the one within 48 KiB: 32 KiB for Q, 8 each
 *       for K and V); double-buffered it is 6-10% slower, 32 keys 10-11%.
 *  256: 64 rows (1 m16 tile per warp) x 64 keys, Q in local memory, K and
 *       V single-buffered, padded (99 KiB), with VEC: 30-35% faster than
 *       32 keys double-buffered swizzled (the shape before, still taken
 *       where a group has 96-98 KiB). Within 48 KiB: 32 keys, Q in
 *       registers, single-buffered, swizzled, with VEC.
 * Each folds the scale into the exponent (FOLD): at 128 that also ended
 * ptxas's spills in the shape before (255 registers and 132 bytes of
 * spill loads, 254 and none after), and it was 2-3% faster at 64 and 128
 * (H200, f16, seq 4096 and 16384, call49 of
 * bench/results/2026-11-23-h200-opencl-matrix). 2-warp groups of 64 rows
 * (4 groups per SM) were 20-35% slower (call115). */
static mma_shape shape_nv(int w, int ew, size_t limit) {
    if (ew == 2) return shape_tf32(w, limit);
    if (w <= 32) return (mma_shape){128, 64, 8, 1, 2, 1, 0, 0};
    if (w <= 64)
        return FIRST_FIT(limit, 64, 1, {128, 128, 4, 0, 2, 1, 1, 1}, {128, 64, 4, 0, 2, 1, 1, 0});
    if (w <= 128)
        return FIRST_FIT(limit, 128, 1, {128, 64, 4, 0, 1, 1, 1, 1}, {128, 32, 4, 0, 1, 1, 0, 0});
    return FIRST_FIT(limit, 256, 1, {64, 64, 4, 0, 1, 1, 1, 1}, {64, 32, 4, 0, 2, 1, 1, 0},
                     {64, 32, 4, 1, 1, 1, 1, 0});
}

/* Intel XMX (8-row tiles, one column per lane): 8 sub-groups of one row
 * tile each, 32-key tiles, Q in registers, K and V double-buffered below
 * 256 (at most 32 KiB; Intel's GPUs have 64 KiB or more). Not measured: no
 * Intel GPU has run it. O takes 8 (d / MX_WARP) floats per work-item, so
 * at 256 it spills. */
static mma_shape shape_xe(int w, int ew, size_t limit) {
    (void)limit;
    if (ew == 2) return (mma_shape){0, 0, 0, 0, 0, 0, 0, 0};
    return (mma_shape){64, 32, 8, 1, w <= 128 ? 2 : 1, 1, 0, 0};
}

/* AMD CDNA (wave64): 4 waves (256 work-items, the usual limit), Q in
 * registers, K and V double-buffered below 256 (64 KiB of local memory).
 * Not measured: no AMD GPU has run it. */
static mma_shape shape_cdna(int w, int ew, size_t limit) {
    (void)limit;
    if (ew == 2) return (mma_shape){0, 0, 0, 0, 0, 0, 0, 0};
    if (w <= 64) return (mma_shape){128, 64, 4, 1, 2, 1, 0, 0};
    if (w <= 128) return (mma_shape){128, 32, 4, 1, 2, 1, 0, 0};
    return (mma_shape){64, 32, 4, 1, 1, 1, 0, 0};
}

/* FATTN_OPENCL_MATRIX_TUNE's overrides (for sweeps) over the table's shape;
 * 0 when the result is not a shape the kernel takes. */
static int tuned_shape(const char *tune, int tq, mma_shape *sh) {
    if (!tune || !*tune) return 1;
    sh->bm = (int)fattn_tune_value(tune, "bm", sh->bm);
    sh->bn = (int)fattn_tune_value(tune, "bn", sh->bn);
    sh->nw = (int)fattn_tune_value(tune, "nw", sh->nw);
    sh->qreg = (int)fattn_tune_value(tune, "qreg", sh->qreg);
    sh->stages = (int)fattn_tune_value(tune, "stages", sh->stages);
    sh->fold = (int)fattn_tune_value(tune, "fold", sh->fold);
    sh->spec = (int)fattn_tune_value(tune, "spec", sh->spec);
    sh->pad = (int)fattn_tune_value(tune, "pad", sh->pad);
    const int mt = sh->nw > 0 ? sh->bm / (tq * sh->nw) : 0;
    return sh->nw >= 1 && sh->nw <= 8 && mt >= 1 && mt <= 4 && mt * tq * sh->nw == sh->bm &&
           sh->bn >= 16 && sh->bn <= 128 && sh->bn % 16 == 0 && (sh->qreg & ~1) == 0 &&
           (sh->stages == 1 || sh->stages == 2) && (sh->fold & ~1) == 0 &&
           (sh->spec & ~1) == 0 && (sh->pad & ~1) == 0;
}

static int bucket(int64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256; }

/* ---- Probe ---------------------------------------------------------------------- */

typedef struct mma_prim {
    const char *key;     /* FATTN_OPENCL_MATRIX=emulate-<key>: the emulations (else NULL) */
    const char *files;   /* joined before flash_mma.cl or mma_probe.cl */
    const char *options; /* build options the files need */
    int warp;            /* MX_WARP: work-items per warp (sub-group, wave) */
    int tq;              /* MX_TQ: query rows per row tile */
    int xs_words;        /* MX_XS_WORDS: local scratch per warp */
    int tf32;            /* the tile file takes f32 as TF32 (DTYPE 0) */
    /* Tiles by head-dim bucket and element width, within `limit` bytes of local memory. */
    mma_shape (*shape)(int w, int ew, size_t limit);
    const char *name;    /* for the device description */
} mma_prim;

#define NV_FILES(instr) "mma_common.cl+" instr "+mma_nv_tile.cl"
#define RDNA_FILES(instr) "mma_common.cl+mma_plain.cl+" instr "+mma_rdna_tile.cl"
#define XE_FILES(instr) "mma_common.cl+mma_plain.cl+" instr "+mma_xe_tile.cl"
#define CDNA_FILES(instr) "mma_common.cl+mma_plain.cl+" instr "+mma_cdna_tile.cl"
enum { PRIM_NV, PRIM_NV_EMU, PRIM_RDNA, PRIM_RDNA_EMU, PRIM_XE16, PRIM_XE8, PRIM_XE16_EMU,
       PRIM_XE8_EMU, PRIM_CDNA, PRIM_CDNA_EMU, PRIM_COUNT };
static const mma_prim prims[PRIM_COUNT] = {
    {NULL, NV_FILES("mma_nv.cl"), "", 32, 16, 0, 1, shape_nv, "mma.sync through inline PTX"},
    {"nv", NV_FILES("mma_plain.cl+mma_nv_emu.cl"), "", 32, 16, 32 + 128 + 64, 1, shape_nv,
     "emulated mma.sync layout (plain OpenCL C)"},
    {NULL, RDNA_FILES("mma_rdna.cl"), "", 32, 16, 0, 0, shape_nv, "RDNA3 WMMA"},
    {"rdna", RDNA_FILES("mma_rdna_emu.cl"), "", 32, 16, 32 + 256, 0, shape_nv,
     "emulated RDNA3 WMMA layout (plain OpenCL C)"},
    {NULL, XE_FILES("mma_xe.cl"), " -DXE_SG=16", 16, 8, 0, 0, shape_xe,
     "Intel XMX (DPAS, 16-wide sub-groups)"},
    {NULL, XE_FILES("mma_xe.cl"), " -DXE_SG=8", 8, 8, 0, 0, shape_xe,
     "Intel XMX (DPAS, 8-wide sub-groups)"},
    {"xe", XE_FILES("mma_xe_emu.cl"), " -DXE_SG=16", 16, 8, 16 * 17, 0, shape_xe,
     "emulated Intel XMX layout, 16 lanes (plain OpenCL C)"},
    {"xe8", XE_FILES("mma_xe_emu.cl"), " -DXE_SG=8", 8, 8, 8 * 17, 0, shape_xe,
     "emulated Intel XMX layout, 8 lanes (plain OpenCL C)"},
    {NULL, CDNA_FILES("mma_cdna.cl"), "", 64, 16, 0, 0, shape_cdna, "CDNA MFMA"},
    {"cdna", CDNA_FILES("mma_cdna_emu.cl"), "", 64, 16, 64 + 256, 0, shape_cdna,
     "emulated CDNA MFMA layout (plain OpenCL C)"},
};

/* Exact in f16, bf16 and TF32 (|S| <= 128), and every sum exact in float32. */
static float probe_in(int which, int r, int c) {
    return (float)((r * (3 + which) + c * (5 + 2 * which) + which) % 5 - 2);
}

static uint16_t to16(float x, int bf16) {
    return bf16 ? fattn_f32_to_bf16(x) : fattn_f32_to_f16(x);
}

/* The first wrong number of the probe's output, or 0 (see mma_probe.cl). */
static int probe_check(const float *out, char *why, size_t len) {
    for (int i = 0; i < 16; i++) {
        double mx = -1e30, sum = 0.0;
        for (int j = 0; j < 16; j++) {
            double sv = 0.0;
            for (int d = 0; d < 32; d++) sv += probe_in(0, i, d) * probe_in(1, j, d);
            mx = sv > mx ? sv : mx;
            sum += sv;
            if (out[i * 16 + j] != (float)sv) {
                snprintf(why, len, "the probe's S[%d][%d] is %g, not %g", i, j,
                         (double)out[i * 16 + j], sv);
                return 1;
            }
        }
        for (int d = 0; d < 32; d++) {
            double ov = 0.0;
            for (int j = 0; j < 8; j++) {
                double sv = 0.0;
                for (int e = 0; e < 32; e++) sv += probe_in(0, i, e) * probe_in(1, j, e);
                ov += sv * probe_in(2, j, d);
            }
            if (out[256 + i * 32 + d] != (float)ov) {
                snprintf(why, len, "the probe's O[%d][%d] is %g, not %g", i, d,
                         (double)out[256 + i * 32 + d], ov);
                return 1;
            }
        }
        if (out[768 + i] != (float)mx || out[784 + i] != (float)sum) {
            snprintf(why, len, "the probe's row %d reductions are %g and %g, not %g and %g", i,
                     (double)out[768 + i], (double)out[784 + i], mx, sum);
            return 1;
        }
    }
    if (out[800] != 2.0f) {
        snprintf(why, len, "the probe's exp2(-inf) + exp2(1) is %g", (double)out[800]);
        return 1;
    }
    return 0;
}

/* A probe's own context, queue and program cache (in memory only), so that
 * a probe that faults does not take the caller's context with it. */
typedef struct probe_env {
    cl_context ctx;
    cl_command_queue q;
    ocl_program_cache cache;
} probe_env;

static cl_int probe_open(probe_env *e, cl_device_id dev, const fattn_settings *settings) {
    cl_int err;
    memset(e, 0, sizeof *e);
    e->cache.disk_fd = -1;
    e->cache.kernel_dir = settings->kernel_dir;
    e->cache.extra_options = settings->opencl_options;
    e->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err == CL_SUCCESS) e->q = clCreateCommandQueue(e->ctx, dev, 0, &err);
    return err;
}

static void probe_close(probe_env *e) {
    ocl_cache_release(&e->cache);
    if (e->q) clReleaseCommandQueue(e->q);
    if (e->ctx) clReleaseContext(e->ctx);
}

/* Whether a group on dev may declare `bytes` of static local memory (see
 * kernels_cl/local_probe.cl): 1 when the probe built, ran and read back
 * every word; else 0 with why. */
static int run_local_probe(cl_device_id dev, size_t bytes, const fattn_settings *settings,
                           char *why, size_t len) {
    enum { NT = 128 };
    cl_uint out[NT];
    for (int i = 0; i < NT; i++) out[i] = 0xffffffffu; /* what no work-item writes shows */
    probe_env e;
    cl_int err = probe_open(&e, dev, settings);
    cl_mem mo = NULL;
    cl_kernel k = NULL;
    int ok = 0;
    char options[96];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DNT=%d -DWORDS=%zu", NT, bytes / 4);
    fattn_msg msg = {0};
    if (err == CL_SUCCESS && ocl_get_kernel(&e.cache, e.ctx, dev, "local_probe.cl", "local_probe",
                                            options, &k, &msg) != FATTN_OK) {
        snprintf(why, len, "%zu bytes of local memory did not build: %.80s", bytes, msg.text);
        goto done;
    }
    if (err == CL_SUCCESS)
        mo = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof out, out, &err);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof mo, &mo);
    const size_t nt = NT;
    if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(e.q, k, 1, NULL, &nt, &nt, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(e.q, mo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        snprintf(why, len, "%zu bytes of local memory did not run: %s (%d)", bytes,
                 ocl_error_name(err), (int)err);
        goto done;
    }
    ok = 1;
    for (int i = 0; i < NT && ok; i++)
        if (out[i] != 0) {
            snprintf(why, len, "%zu bytes of local memory: work-item %d read %u wrong words",
                     bytes, i, out[i]);
            ok = 0;
        }
done:
    if (mo) clReleaseMemObject(mo);
    probe_close(&e);
    return ok;
}

/* Runs the probe of primitive `prim` in dtype (0 f32 as TF32, 1 f16, 2
 * bf16) on dev in a context of its own; 1 when every number is right, else
 * 0 with why. */
static int run_probe(cl_device_id dev, int prim, int dtype, const fattn_settings *settings,
                     char *why, size_t len) {
    const int bf16 = dtype == 2;
    uint16_t in16[3 * 512];
    float in32[3 * 512];
    for (int w = 0; w < 3; w++)
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 32; c++) {
                in32[w * 512 + r * 32 + c] = probe_in(w, r, c);
                in16[w * 512 + r * 32 + c] = to16(probe_in(w, r, c), bf16);
            }
    const void *in = dtype == 0 ? (const void *)in32 : (const void *)in16;
    const size_t in_bytes = dtype == 0 ? sizeof in32 : sizeof in16;
    float out[801];
    for (int i = 0; i < 801; i++) out[i] = NAN; /* what no lane writes shows */

    probe_env e;
    cl_int err = probe_open(&e, dev, settings);
    if (err != CL_SUCCESS) {
        snprintf(why, len, "a context and queue for the probe: %s", ocl_error_name(err));
        probe_close(&e);
        return 0;
    }
    cl_mem mi = NULL, mo = NULL;
    cl_kernel k = NULL;
    int ok = 0;
    char file[160], options[128];
    snprintf(file, sizeof file, "%s+mma_probe.cl", prims[prim].files);
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=32 -DBM=16 -DBN=16 -DNW=1 -DQREG=1%s", dtype,
             prims[prim].options);
    fattn_msg msg = {0};
    if (err == CL_SUCCESS &&
        ocl_get_kernel(&e.cache, e.ctx, dev, file, "mma_probe", options, &k, &msg) != FATTN_OK) {
        snprintf(why, len, "the probe did not build: %.200s", msg.text);
        goto done;
    }
    if (err == CL_SUCCESS)
        mi = clCreateBuffer(e.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, in_bytes, (void *)in,
                            &err);
    if (err == CL_SUCCESS)
        mo = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof out, out, &err);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof mi, &mi);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof mo, &mo);
    const size_t one = (size_t)prims[prim].warp;
    if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(e.q, k, 1, NULL, &one, &one, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(e.q, mo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        snprintf(why, len, "the probe did not run: %s (%d)", ocl_error_name(err), (int)err);
        goto done;
    }
    ok = !probe_check(out, why, len);
done:
    if (mi) clReleaseMemObject(mi);
    if (mo) clReleaseMemObject(mo);
    probe_close(&e);
    return ok;
}

/* Probe results per device, primitive file and process. */
#define PROBE_SLOTS 16
static struct probe_slot {
    cl_device_id dev;
    int prim;
    int ok[3]; /* by fattn_dtype: f32 (TF32), f16, bf16 */
    char why[256];
    size_t local; /* local memory the matrix kernel may declare */
    char local_why[160]; /* why not the device's block maximum, where it is not */
} probes[PROBE_SLOTS];
static int probe_count;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* AMD's OpenCL names a device by its ISA ("gfx90a:sramecc+:xnack-"): gfx9
 * gets the CDNA row (MFMA; gfx90a and later have the bf16 form the tiles
 * use, so gfx908 passes the probe in f16 only, and Vega's gfx900/906 in
 * neither), the rest the RDNA row (WMMA: gfx11), whose probe fails
 * elsewhere. */
static int amd_prim(cl_device_id dev) {
    char name[256] = "";
    if (clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL) != CL_SUCCESS) return -1;
    return !strncmp(name, "gfx9", 4) ? PRIM_CDNA : PRIM_RDNA;
}

/* DPAS takes the device's smallest sub-group size (8 on Xe-HPG, 16 on
 * Xe-HPC and Xe2): the row for it, or -1 (no cl_intel_subgroups query, or
 * another size). */
static int xe_prim(cl_device_id dev) {
    size_t sizes[8], bytes = 0;
    if (clGetDeviceInfo(dev, 0x4108 /* CL_DEVICE_SUB_GROUP_SIZES_INTEL */, sizeof sizes, sizes,
                        &bytes) != CL_SUCCESS || bytes < sizeof sizes[0])
        return -1;
    size_t least = sizes[0];
    for (size_t i = 1; i < bytes / sizeof sizes[0] && i < 8; i++)
        if (sizes[i] < least) least = sizes[i];
    return least == 16 ? PRIM_XE16 : least == 8 ? PRIM_XE8 : -1;
}

void ocl_mma_setup(ocl_state *s) {
    const char *mode = s->settings.opencl_matrix ? s->settings.opencl_matrix : "auto";
    s->mma_prim = -1;
    s->mma_local = s->limits.local_mem;
    s->mma_local_why[0] = '\0';
    if (!strcmp(mode, "off")) {
        snprintf(s->mma_why, sizeof s->mma_why, "the matrix path is off (FATTN_OPENCL_MATRIX=off)");
        return;
    }
    int prim = -1;
    const int gpu = (s->dev.type & CL_DEVICE_TYPE_GPU) != 0;
    if (!strcmp(mode, "emulate"))
        prim = PRIM_NV_EMU;
    else if (!strncmp(mode, "emulate-", 8)) {
        for (int i = 0; i < PRIM_COUNT; i++)
            if (prims[i].key && !strcmp(mode + 8, prims[i].key)) prim = i;
    } else if (gpu && s->limits.vendor_class == OCL_CLASS_NVIDIA)
        prim = PRIM_NV;
    else if (gpu && s->limits.vendor_class == OCL_CLASS_AMD)
        prim = amd_prim(s->dev.device);
    else if (gpu && s->limits.vendor_class == OCL_CLASS_INTEL)
        prim = xe_prim(s->dev.device);
    if (prim < 0) {
        snprintf(s->mma_why, sizeof s->mma_why,
                 "no matrix-unit path for this device (NVIDIA, AMD and Intel GPUs have one; "
                 "FATTN_OPENCL_MATRIX=emulate runs an emulation anywhere)");
        return;
    }
    pthread_mutex_lock(&probe_lock);
    struct probe_slot *slot = NULL;
    for (int i = 0; i < probe_count; i++)
        if (probes[i].dev == s->dev.device && probes[i].prim == prim) slot = &probes[i];
    struct probe_slot fresh = {s->dev.device, prim, {0, 0, 0}, "", s->limits.local_mem, ""};
    if (!slot) {
        static const char *const names[3] = {"TF32", "f16", "bf16"};
        for (int dt = prims[prim].tf32 ? 0 : 1; dt < 3; dt++) {
            char why[256] = "";
            fresh.ok[dt] = run_probe(s->dev.device, prim, dt, &s->settings, why, sizeof why);
            if (!fresh.ok[dt] && !fresh.why[0])
                snprintf(fresh.why, sizeof fresh.why, "%s (%s): %s", prims[prim].name,
                         names[dt], why);
        }
        /* Past the reported size on NVIDIA only where the probe proves it,
         * less 1 KiB for what the compiler adds to a kernel's arrays. */
        const size_t big = s->limits.group_local_max - 1024;
        if (prim == PRIM_NV && s->limits.group_local_max > s->limits.local_mem + 1024) {
            if (run_local_probe(s->dev.device, big, &s->settings, fresh.local_why,
                                sizeof fresh.local_why))
                fresh.local = big;
        }
        /* A full table keeps its entries; this device is probed again next time. */
        if (probe_count < PROBE_SLOTS) probes[probe_count++] = fresh;
        slot = &fresh;
    }
    s->mma_prim = prim;
    s->mma_local = slot->local;
    snprintf(s->mma_local_why, sizeof s->mma_local_why, "%s", slot->local_why);
    memcpy(s->mma_ok, slot->ok, sizeof s->mma_ok);
    snprintf(s->mma_why, sizeof s->mma_why, "%s", slot->why);
    pthread_mutex_unlock(&probe_lock);
}

const char *ocl_mma_path(const ocl_state *s) {
    if (s->mma_prim < 0 || (!s->mma_ok[FATTN_F16] && !s->mma_ok[FATTN_BF16])) return "scalar";
    return prims[s->mma_prim].name;
}

int ocl_mma_files_for(const ocl_state *s, fattn_dtype dtype, ocl_mma_files *out, fattn_msg *msg) {
    if (s->mma_prim < 0 || dtype == FATTN_F32 || !s->mma_ok[dtype]) {
        fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "%s",
                   dtype == FATTN_F32 ? "the matrix decode kernel takes f16 and bf16" : s->mma_why);
        return 0;
    }
    const mma_prim *pr = &prims[s->mma_prim];
    *out = (ocl_mma_files){pr->files, pr->options, pr->warp, pr->tq, pr->xs_words};
    return 1;
}

/* Whether an operand's 16-byte chunks (n elements) are 16-byte aligned
 * wherever an index can move (a stride matters only when its count passes
 * 1); cl_mem bases, sub-buffers included, are aligned far beyond 16 bytes. */
static int aligned16(const fattn_operand *op, int64_t n, int64_t nb, int64_t nh, int64_t ns) {
    return op->offset % n == 0 && (nb <= 1 || op->stride_batch % n == 0) &&
           (nh <= 1 || op->stride_head % n == 0) && (ns <= 1 || op->stride_seq % n == 0);
}

/* flash_mma.cl's vec: which of Q (1), K (2), V (4) may be copied in
 * 16-byte pieces. Paged K/V: the batch stride steps pages. Ragged counts
 * are bounded by the dense ones' checks (any index may move). */
static cl_int mma_vec(const fattn_problem *p) {
    const int64_t nkv_b = p->rag.on ? 2 : p->batch, nq_b = p->rag.on ? 2 : p->batch;
    const int64_t hkv = p->heads_kv;
    const int64_t n = p->dtype == FATTN_F32 ? 4 : 8; /* elements in 16 bytes */
    return (aligned16(&p->q, n, nq_b, p->heads_q, p->rag.on ? 2 : p->seq_q) ? 1 : 0) |
           (aligned16(&p->k, n, nkv_b, hkv, p->rag.on ? 2 : p->seq_kv) ? 2 : 0) |
           (aligned16(&p->v, n, nkv_b, hkv, p->rag.on ? 2 : p->seq_kv) ? 4 : 0);
}

/* ---- The variant table's row ---------------------------------------------------- */

typedef struct ocl_mma_plan {
    mma_shape sh;
    int warp;   /* work-items per warp */
    cl_int vec; /* mma_vec, which the kernel was built for */
    cl_kernel k;
} ocl_mma_plan;
FATTN_PLAN_FITS(ocl_mma_plan);

fattn_status ocl_mma_accept(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg) {
    ocl_state *s = state;
    if (p->dtype == FATTN_F32 && !(p->flags & FATTN_FLAG_ALLOW_TF32))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the matrix path takes f32 only as TF32 (FATTN_FLAG_ALLOW_TF32)");
    if (s->mma_prim < 0 || !s->mma_ok[p->dtype])
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "%s",
                          s->mma_prim >= 0 && p->dtype == FATTN_F32 && !prims[s->mma_prim].tf32
                              ? "this device's matrix path has no TF32"
                              : s->mma_why);
    const int ew = p->dtype == FATTN_F32 ? 2 : 1; /* 16-bit units an element */
    if (p->tune.tile_q || p->tune.tile_kv ||
        (s->settings.opencl_tiles && *s->settings.opencl_tiles))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tile overrides are the scalar kernel's; the matrix path has its own");
    const int64_t int_max = FATTN_INT32_MAX;
    if (p->seq_q > int_max - 1024 || p->seq_kv > int_max || p->batch * p->heads_q > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL kernels index rows and heads with 32-bit integers: seq_q, "
                          "seq_kv and batch * heads_q must stay below 2^31");
    if (p->head_dim > 256 || p->head_dim_v > 256)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "the matrix path takes head dims up to 256");
    const mma_prim *pr = &prims[s->mma_prim];
    const int dpad = bucket(p->head_dim), dvpad = bucket(p->head_dim_v);
    /* A tuning knob that cannot apply is an error, not a quiet fallback to
     * the scalar kernel (a sweep would time the wrong kernel). Its `local`
     * (KiB) caps the local memory the table's shapes may take. */
    const char *tune = s->settings.opencl_matrix_tune;
    const long cap_kib = fattn_tune_value(tune, "local", 0);
    if (cap_kib < 0 || cap_kib > (1L << 20))
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_OPENCL_MATRIX_TUNE's local (%ld) is not a size in KiB "
                          "(1..1048576; 0 or absent: the device's)",
                          cap_kib);
    size_t limit = s->mma_local;
    if (cap_kib > 0 && (size_t)cap_kib * 1024 < limit) limit = (size_t)cap_kib * 1024;
    mma_shape sh = pr->shape(dpad > dvpad ? dpad : dvpad, ew, limit);
    if (!sh.bm)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the matrix path's TF32 tiles at head dim %d need more local memory "
                          "than the %zu bytes this device gives a group",
                          dpad > dvpad ? dpad : dvpad, limit);
    if (!tuned_shape(tune, pr->tq, &sh))
        return fattn_fail(msg, FATTN_ERR_ENVIRONMENT,
                          "FATTN_OPENCL_MATRIX_TUNE \"%s\" is not a shape the matrix kernel "
                          "takes (bm = %d nw m with m 1..4 and nw 1..8, bn 16..128 in steps of "
                          "16, qreg, fold, spec and pad 0 or 1, stages 1 or 2)",
                          tune, pr->tq);
    const size_t bytes = local_bytes(&sh, dpad, dvpad, ew, pr->xs_words);
    if (bytes > limit)
        return fattn_fail(msg, tune && *tune ? FATTN_ERR_ENVIRONMENT : FATTN_ERR_UNSUPPORTED,
                          "the matrix path's tiles need %zu bytes of local memory; a group may have "
                          "%zu%s",
                          bytes, limit,
                          tune && *tune ? " (FATTN_OPENCL_MATRIX_TUNE)" : "");

    const unsigned bits = fattn_variants_used(p);
    char options[320], var[80], file[160];
    ocl_variant_options(p, bits, dvpad, var, sizeof var);
    char dv[32] = "";
    if (dvpad != dpad && !(bits & FATTN_VAR_HEAD_DIM_V))
        snprintf(dv, sizeof dv, " -DDVPAD=%d", dvpad);
    /* VEC (the shape's spec): the kernel's copies built for the operands'
     * alignment. */
    const cl_int vec = mma_vec(p);
    /* Only the all-aligned build is specialised, so a shape has at most two
     * programs (misaligned operands share the generic one); the emulations
     * (keyed rows) build the generic one only: the specialisation is for a
     * vendor compiler's register allocation, and it halves their programs. */
    const char *spec = sh.spec && vec == 7 && !pr->key ? " -DVEC=7" : "";
    snprintf(
        options, sizeof options,
        "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=%d -DBM=%d -DBN=%d -DNW=%d -DQREG=%d -DSTAGES=%d "
        "-DFOLD=%d -DPADL=%d%s%s%s%s%s",
        (int)p->dtype, dpad, sh.bm, sh.bn, sh.nw, sh.qreg, sh.stages, sh.fold, sh.pad, spec, dv,
        ocl_ragged_option(p), var, pr->options);
    snprintf(file, sizeof file, "%s+flash_mma.cl", pr->files);
    cl_kernel k;
    fattn_status st =
        ocl_get_kernel(&s->cache, s->context, s->dev.device, file, "flash_mma", options, &k, msg);
    if (st != FATTN_OK) return st;
    size_t kernel_wg = 0;
    OCL_TRY(msg, clGetKernelWorkGroupInfo(k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_wg, &kernel_wg, NULL));
    if (kernel_wg < (size_t)sh.nw * (size_t)pr->warp)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the matrix kernel needs %d work-items per group; this build allows %zu",
                          sh.nw * pr->warp, kernel_wg);
    ocl_mma_plan *mp = FATTN_PLAN_AREA(plan, ocl_mma_plan);
    mp->sh = sh;
    mp->warp = pr->warp;
    mp->vec = vec;
    mp->k = k;
    plan->tiling.tile_q = sh.bm;
    plan->tiling.tile_kv = sh.bn;
    const size_t per_cu = s->limits.cu_local_mem / bytes;
    plan->tiling.concurrent_groups =
        (int64_t)s->limits.compute_units * (int64_t)(per_cu ? per_cu : 1);
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

fattn_status ocl_mma_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                         fattn_msg *msg) {
    ocl_state *s = state;
    const ocl_mma_plan *mp = FATTN_PLAN_AREA(plan, const ocl_mma_plan);
    cl_kernel k = mp->k;
    cl_uint a = 0;
    fattn_status st = ocl_forward_args(k, &a, p, msg);
    if (st != FATTN_OK) return st;
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof mp->vec, &mp->vec));
    if ((st = ocl_variant_args(k, &a, p, fattn_variants_used(p), msg)) != FATTN_OK) return st;
    if (p->rag.on && (st = ocl_ragged_args(s, k, &a, p, msg)) != FATTN_OK) return st;
    const size_t nt = (size_t)mp->sh.nw * (size_t)mp->warp;
    const size_t global[2] = {(size_t)((p->seq_q + mp->sh.bm - 1) / mp->sh.bm) * nt,
                              (size_t)(p->batch * p->heads_q)};
    const size_t local[2] = {nt, 1};
    if (global[0] == 0 || global[1] == 0) return FATTN_OK;
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}
