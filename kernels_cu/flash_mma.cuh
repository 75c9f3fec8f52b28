/* FlashAttention-2 style forward on tensor cores (f16 / bf16 storage, float32
 * accumulation and softmax), compute capability 8.0+: the kernel template and
 * its launcher, instantiated by flash_mma.cu (plain attention, dense and
 * ragged) and flash_mma_var*.cu (the attention variants), so that the three
 * instance families compile in parallel.
 *
 * A block owns BM query rows of one (batch, head); each of its NW warps owns
 * MT = BM / (16 NW) m16 row tiles, so every K / V fragment read from shared
 * memory feeds MT mma instructions. The block streams BN-key tiles of K and V
 * through a double buffer filled by cp.async (tile j+1 lands while tile j is
 * computed). S = Q K^T and the online softmax stay in registers; P goes
 * straight from the accumulator layout into the A operand of O += P V.
 * Variable-length and paged problems run a second instance of the kernel
 * (kRagged), so the dense one compiles to the code it had. */
#ifndef FATTN_FLASH_MMA_CUH
#define FATTN_FLASH_MMA_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "params.h"
#include "device_util.cuh"
#include "mma_sm80.cuh"
#include "ragged.cuh"
#include "variants.cuh"

/* With no bucket built, the kernel and its helpers would be unused. */
#if FATTN_CUDA_DPAD_32 || FATTN_CUDA_DPAD_64 || FATTN_CUDA_DPAD_128 || FATTN_CUDA_DPAD_256

/* Tile shapes: one trait per head-dim bucket for compute capability 8.0
 * and later, where the kernel's instructions (mma.sync m16n8k16, ldmatrix,
 * cp.async) are the same; another architecture's shapes would be traits of
 * their own. BM query rows per block, BN keys per streamed tile, NW warps;
 * QREG keeps Q's fragments in registers; FOLD lets the launcher fold the
 * scale into the exponent (fold_scale); MINB blocks per SM the registers are
 * capped for (__launch_bounds__). The traits are compile-time data in a
 * named namespace: in the anonymous one, nvcc warns (#177) about each
 * member that a build without some bucket leaves unreferenced. */
namespace fattn_mma_shapes {

template <int BM_, int BN_, int NW_, bool QREG_, bool FOLD_, int MINB_> struct ShapeOf {
    static constexpr int BM = BM_, BN = BN_, NW = NW_, MINB = MINB_;
    static constexpr bool QREG = QREG_, FOLD = FOLD_;
    static_assert(BM % (16 * NW) == 0 && BN % 16 == 0,
                  "each warp owns whole m16 tiles; keys come in k16 steps");
};

/* Picked by H200 timings; all have 4 warps and 2 blocks per SM.
 * 32: 2 m16 tiles per warp, 128-key tiles, Q in registers.
 * 64: 2 m16 tiles per warp, 128-key tiles; the 128-float S leaves no room
 *     for Q in registers.
 * 128: 2 m16 tiles per warp, 64-key tiles; O alone is 128 registers, so Q
 *      is re-read per k-step, and FOLD stays off: its extra live value tips
 *      ptxas into spilling, which costs more than the FMUL it saves.
 * 256: 1 m16 tile per warp (O is again 128 registers), 32-key tiles, Q in
 *      registers. */
/* The bias families' shapes: their bias tile goes through shared memory
 * beside K and V (BiasStage), which at 64-key tiles fits two blocks per
 * SM only at dpad 32 and 64; at 128 the keys per tile halve (S shrinks
 * with them, which the rescoring's registers need too). */
template <int DPAD> struct Sm80Shape;
template <int DPAD> struct Sm80BiasShape;
template <> struct Sm80Shape<32> : ShapeOf<128, 128, 4, true, true, 2> {};
template <> struct Sm80Shape<64> : ShapeOf<128, 128, 4, false, true, 2> {};
template <> struct Sm80Shape<128> : ShapeOf<128, 64, 4, false, false, 2> {};
template <> struct Sm80Shape<256> : ShapeOf<64, 32, 4, true, true, 2> {};
template <> struct Sm80BiasShape<32> : ShapeOf<128, 64, 4, true, true, 2> {};
template <> struct Sm80BiasShape<64> : ShapeOf<128, 64, 4, false, true, 2> {};
template <> struct Sm80BiasShape<128> : ShapeOf<128, 32, 4, false, false, 2> {};
template <> struct Sm80BiasShape<256> : ShapeOf<64, 32, 4, true, true, 2> {};

}   // namespace fattn_mma_shapes

namespace {

using fattn_mma_shapes::Sm80BiasShape;
using fattn_mma_shapes::Sm80Shape;

/* Shared-memory rows are padded by 8 elements (16 bytes): the 8 row addresses
 * of one ldmatrix 8x8 matrix then fall in 8 distinct 4-bank groups. */
constexpr int kPad = 8;

/* The instance families (the kernel's kV). kVarNone: plain attention.
 * kVarMask: the variants that change no score (the window: tiles outside it
 * skipped, its edges masked; sinks; head_dim_v), at the plain kernel's cost
 * per score. kVarCap and kVarAlibi add the softcap or ALiBi alone, as models
 * use them (Gemma 2, BLOOM), with their constants hoisted out of the tile
 * loop. kVarBias adds the bias alone (padding, prefix-LM and document
 * masks). kVarAll takes any mix, the bias included, under block-uniform
 * run-time switches, which cost a branch per score pair. All but kVarNone
 * take head_dim_v. */
enum MmaVar { kVarNone, kVarMask, kVarCap, kVarAlibi, kVarBias, kVarAll };

/* kFixedCap: a capped score (log2 units) lies in [-c2, c2], so in bf16
 * (whose P operand has float32's exponent range) the softmax needs no row
 * max and O no rescale: with a fixed offset mu = c2 - K, K = max(0, 2 c2 -
 * 120), every term 2^(s - mu) lies in [2^-120, 2^K]. Taken where K <= 30
 * (c2 <= 75, a cap up to 51.98: Gemma 2's 50 included): at most 2^30 times
 * the plain kernel's terms, so O's float32 sums overflow only for |V|
 * beyond about 2^67 (2^97 in the plain kernel). f16's P operand would
 * lose such terms (its smallest normal is 2^-14), so f16 keeps the max. */
template <typename T, int kV>
constexpr bool kFixedCap = kV == kVarCap &&std::is_same<T, __nv_bfloat16>::value;

/* The families that read the bias. */
constexpr bool var_reads_bias(int kV) { return kV == kVarBias || kV == kVarAll; }

template <typename T> __device__ __forceinline__ T to_storage(float x) {
    if constexpr (std::is_same<T, __nv_bfloat16>::value)
        return __float2bfloat16_rn(x);
    else
        return __float2half_rn(x);
}

/* A thread's 8-dim column chunk of row 0 of one (batch, head) operand. */
template <typename T, int DPAD, int NT>
__device__ __forceinline__ const T *thread_src(const T *g, int64_t ss) {
    return g + (threadIdx.x / (DPAD / 8)) * ss + (threadIdx.x % (DPAD / 8)) * 8;
}

/* Rows row0 .. row0+ROWS-1 (those < nrows, the rest zero) and dims [0, D)
 * (the rest zero) of one operand into a [ROWS][DPAD + kPad] shared tile.
 * Each thread owns one 8-dim column chunk and walks rows NT / (DPAD / 8)
 * apart; src is its chunk of row row0 (thread_src plus row0 * ss), so one
 * pointer and one stride serve the whole tile. vec: the operand's pointer
 * and strides allow 16-byte cp.async; a chunk that crosses D, or an
 * unaligned operand, goes through registers. */
template <typename T, int ROWS, int DPAD, int NT>
__device__ __forceinline__ void load_tile(T *s, const T *src, int64_t ss, int64_t row0,
                                          int64_t nrows, int D, bool vec) {
    constexpr int CH = DPAD / 8, LD = DPAD + kPad, RS = NT / CH;
    static_assert(NT % CH == 0 && ROWS % RS == 0, "tile chunks must split evenly over the threads");
    const int r0 = threadIdx.x / CH, c = (threadIdx.x % CH) * 8;
    const int64_t valid = nrows - row0 - r0;
    T *dst = s + r0 * LD + c;
    if (vec && c + 8 <= D) {
#pragma unroll
        for (int it = 0; it < ROWS / RS; ++it, src += RS * ss, dst += RS * LD) {
            if (it * RS < valid)
                cp_async16(dst, src);
            else
                *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
        }
    } else if (c >= D) {
#pragma unroll
        for (int it = 0; it < ROWS / RS; ++it, dst += RS * LD)
            *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
    } else {
        /* Through registers, one chunk at a time, each element straight to
         * shared memory: anything that keeps more values live here (whole
         * tile unrolled, or packing into 16-byte stores) raises the kernel's
         * register peak at DPAD 128 into spilling. */
#pragma unroll 1
        for (int it = 0; it < ROWS / RS; ++it, src += RS * ss, dst += RS * LD) {
            const unsigned short *e = reinterpret_cast<const unsigned short *>(src);
            unsigned short *d = reinterpret_cast<unsigned short *>(dst);
#pragma unroll
            for (int k = 0; k < 8; ++k)
                d[k] = it * RS < valid && c + k < D ? e[k] : (unsigned short)0;
        }
    }
}

/* One thread's 8-element chunk (column c) of a row into shared memory: by
 * cp.async when vec (16-byte aligned, wholly inside D), else element by
 * element, zero past D. */
template <typename T>
__device__ __forceinline__ void load_chunk(T *dst, const T *src, int c, int D, bool vec) {
    if (vec) {
        cp_async16(dst, src);
    } else {
        const unsigned short *e = reinterpret_cast<const unsigned short *>(src);
        unsigned short *d = reinterpret_cast<unsigned short *>(dst);
#pragma unroll
        for (int k = 0; k < 8; ++k) d[k] = c + k < D ? e[k] : (unsigned short)0;
    }
}

/* Ragged keys row0 .. row0+ROWS-1 (those < nrows, the rest zero) of K and V
 * into their [ROWS][DPAD + kPad] tiles. kb and vb are the thread's column
 * chunk of the K/V head: at the sequence's key 0 when not paged (rows
 * ss apart), else at element 0, each row at its own address (ragged_key:
 * a slot of a page that ragged_pages_ok has vetted, so any page size
 * works; the table entry is read once for both operands). vec as the
 * kernel's (bits 2 K, 4 V); K has D dims, V Dv. Not unrolled: unrolled, the dpad-128 instance
 * spilled 84 bytes on sm_90 (nvcc 13); two rows per step spilled nothing
 * but left no registers to spare. */
template <typename T, int ROWS, int DPAD, int NT>
__device__ __forceinline__ void load_kv_rows(T *sk, T *sv, const T *kb, const T *vb,
                                             const fattn_cuda_args &a, const Seq &sr, int64_t b,
                                             int row0, int nrows, int D, int Dv, int vec) {
    constexpr int CH = DPAD / 8, LD = DPAD + kPad, RS = NT / CH;
    static_assert(NT % CH == 0 && ROWS % RS == 0, "tile chunks must split evenly over the threads");
    const int r0 = threadIdx.x / CH, c = (threadIdx.x % CH) * 8;
    const int valid = nrows - row0 - r0; /* row0 < nrows: no overflow */
    const bool kvec = (vec & 2) && c + 8 <= D, vvec = (vec & 4) && c + 8 <= Dv;
    sk += r0 * LD + c;
    sv += r0 * LD + c;
#pragma unroll 1
    for (int it = 0; it < ROWS / RS; ++it, sk += RS * LD, sv += RS * LD) {
        if (it * RS < valid && c < max(D, Dv)) {
            const int j = row0 + r0 + it * RS;
            int64_t ko = (int64_t)j * a.k_ss, vo = (int64_t)j * a.v_ss;
            if (a.rag.page_size) {
                ko = ragged_key(a, sr, b, j, a.k_sb, a.k_ss);
                vo = ragged_key(a, sr, b, j, a.v_sb, a.v_ss);
            }
            load_chunk<T>(sk, kb + ko, c, D, kvec);
            load_chunk<T>(sv, vb + vo, c, Dv, vvec);
        } else {
            *reinterpret_cast<uint4 *>(sk) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(sv) = make_uint4(0, 0, 0, 0);
        }
    }
}

/* A row's part of the rescoring: ALiBi's distance (i + woff - j) at the
 * thread's first column of the tile, and the bias element there. */
struct VarRow {
    float dist;
    int64_t bias_at;
};

/* The rescoring instances' per-thread constants, hoisted out of the tile
 * loop, and their arithmetic on a pair of adjacent scores in log2 units
 * (kVarCap and kVarAlibi take raw q.k; kVarAll takes it scaled, as the
 * plain kernel does; kVarBias takes it raw and leaves it in natural units,
 * add_bias). Softcap: c tanh(y / c) of the natural score y is c2
 * tanh(x / c2) of x = y log2 e, c2 = c log2 e, by var_tanh2 (whose
 * argument is 2 log2 e / c2 times x). */
struct Rescore {
    float k1 = 0.f, c2 = 0.f; /* softcap: var_tanh2's factor, the cap in log2 units */
    float slope2 = 0.f;       /* ALiBi's slope in log2 units */
    bool cap = false, alibi = false, bias = false;
    bool bpair = false; /* bias pairs (sd 1, even offsets, aligned) load as one vector */
    bool bsm = false;   /* the bias tile goes through shared memory (load_bias_stage) */
    bool fixed = false; /* kFixedCap: the softmax's fixed offset mu replaces the row max */
    float mu = 0.f;

    /* td: the kernel's storage type, the one dtype whose bias takes the
     * shared-memory stage. */
    template <int kV>
    __device__ __forceinline__ void init(const fattn_cuda_args &a, float slope, fattn_dtype td) {
        const fattn_cuda_var &v = a.var;
        cap = kV == kVarCap || (kV == kVarAll && v.softcap > 0.f);
        alibi = kV == kVarAlibi || (kV == kVarAll && v.alibi);
        bias = kV == kVarBias || (kV == kVarAll && v.bias);
        if (cap) {
            c2 = v.softcap * kLog2e;
            /* kFixedCap: terms in [2^-120, 2^K], K = max(0, 2 c2 - 120) <= 30. */
            const float K = fmaxf(0.f, 2.f * c2 - 120.f);
            fixed = kV == kVarCap && K <= 30.f;
            mu = c2 - K;
            k1 = kV == kVarCap ? 2.f * a.scale_log2 / v.softcap : 2.f / v.softcap;
        }
        slope2 = slope * kLog2e;
        bsm = bias && v.bias_dtype == td && v.bias_sd == 1 &&
              (reinterpret_cast<uintptr_t>(v.bias) & 15) == 0 && v.bias_sb % 8 == 0 &&
              v.bias_sh % 8 == 0 && v.bias_ss % 8 == 0;
        const int es = v.bias_dtype == FATTN_F32 ? 4 : 2;
        bpair = bias && v.bias_sd == 1 &&
                (reinterpret_cast<uintptr_t>(v.bias) & (2 * es - 1)) == 0 && (v.bias_sb & 1) == 0 &&
                (v.bias_sh & 1) == 0 && (v.bias_ss & 1) == 0;
    }

    /* A row of (b, h) at tile kv0: ALiBi's distance dist0 = i + woff - kv0
     * at column 0, and the bias of row ir (i, or the sequence's last row
     * for a row past it). */
    template <int kV>
    __device__ __forceinline__ VarRow row(const fattn_cuda_args &a, int64_t b, int64_t h,
                                          int64_t ir, float dist0, int kv0, int lane) const {
        const int c0 = (lane & 3) * 2;
        VarRow r{0.f, 0};
        if (kV == kVarAlibi || kV == kVarAll) r.dist = dist0 - (float)c0;
        if (var_reads_bias(kV) && bias && !bsm) /* bsm: the stage holds it */
            r.bias_at = var_bias_row(a, b, h, ir) + (int64_t)(kv0 + c0) * a.var.bias_sd;
        return r;
    }

    /* Tile kv0's bias (keys kv0 .. kv0 + n - 1) of the warp's WR rows from
     * row i0 on (rows past seq_q at the last row) into L1, to be read after
     * Q K^T: without it the rescoring's loads wait on L2 one after another
     * (3.7x the plain kernel's time on the H200). A bias read with a stride
     * other than 1 is left to the loads. */
    template <int WR>
    __device__ __forceinline__ void prefetch_bias(const fattn_cuda_args &a, int64_t b, int64_t h,
                                                  int64_t i0, int seq_q, int kv0, int n,
                                                  int lane) const {
        static_assert(32 % WR == 0, "a warp's rows split its lanes evenly");
        if (a.var.bias_sd != 1) return;
        const int es = a.var.bias_dtype == FATTN_F32 ? 4 : 2;
        const int64_t i = min(i0 + lane % WR, (int64_t)seq_q - 1);
        const char *p =
            static_cast<const char *>(a.var.bias) + (var_bias_row(a, b, h, i) + kv0) * (int64_t)es;
        const uintptr_t end = reinterpret_cast<uintptr_t>(p) + (uintptr_t)n * es;
        for (uintptr_t q = (reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)127) + (lane / WR) * 128;
             q < end; q += (32 / WR) * 128)
            asm volatile("prefetch.global.L1 [%0];\n" ::"l"(q));
    }

    /* Scores x0, x1 at columns c and c + 1 past the row's first (v0, v1:
     * whether they are visible; kMasked reads no bias where not; !kBias:
     * the caller adds the bias). */
    template <int kV, bool kMasked, bool kBias = true>
    __device__ __forceinline__ void score2(const fattn_cuda_args &a, const VarRow &r, int c,
                                           bool v0, bool v1, float &x0, float &x1) const {
        if constexpr (kV == kVarCap) {
            x0 = var_tanh2(x0 * k1, c2);
            x1 = var_tanh2(x1 * k1, c2);
        } else if constexpr (kV == kVarAlibi) {
            x0 = fmaf(x0, a.scale_log2, -slope2 * fabsf(r.dist - (float)c));
            x1 = fmaf(x1, a.scale_log2, -slope2 * fabsf(r.dist - (float)(c + 1)));
        } else if constexpr (var_reads_bias(kV)) {
            if (kV == kVarAll && cap) {
                x0 = var_tanh2(x0 * k1, c2);
                x1 = var_tanh2(x1 * k1, c2);
            }
            if (kV == kVarAll && alibi) {
                x0 = fmaf(-slope2, fabsf(r.dist - (float)c), x0);
                x1 = fmaf(-slope2, fabsf(r.dist - (float)(c + 1)), x1);
            }
            if (kBias && bias) {
                float b0 = 0.f, b1 = 0.f;
                if (!kMasked && bpair) {
                    const float2 t = var_bias_pair(a, r.bias_at + c);
                    b0 = t.x, b1 = t.y;
                } else {
                    const int64_t at = r.bias_at + (int64_t)c * a.var.bias_sd;
                    if (v0) b0 = var_bias(a, at);
                    if (v1) b1 = var_bias(a, at + a.var.bias_sd);
                }
                add_bias<kV>(a, b0, b1, x0, x1);
            }
        }
    }

    /* Bias b0, b1 into scores x0, x1: kVarAll's are scaled, in log2 units;
     * kVarBias's arrive raw and leave in natural units (scale x + b, one
     * FFMA where a scale and an add would be two), the softmax taking
     * log2 e as its fold factor. */
    template <int kV>
    __device__ __forceinline__ void add_bias(const fattn_cuda_args &a, float b0, float b1,
                                             float &x0, float &x1) const {
        if constexpr (kV == kVarBias) {
            x0 = fmaf(x0, a.var.scale, b0);
            x1 = fmaf(x1, a.var.scale, b1);
        } else {
            x0 = fmaf(b0, kLog2e, x0);
            x1 = fmaf(b1, kLog2e, x1);
        }
    }
};

/* The bias families' stage (Rescore::bsm: a 16-bit bias in the problem's
 * dtype, contiguous keys, 16-byte aligned rows): the bias of rows m0 ..
 * m0 + BM - 1 (a row past seq_q reads the last row) at keys kv0 .. kv0 +
 * BN - 1 (those < nkv; the rest zero) into a [BM][BN + kPad] tile by
 * cp.async, with K and V: the rescoring then reads shared memory, where
 * global loads left it waiting on L2 (2.9x the plain kernel's time on the
 * H200). The pad keeps a quad's 8 rows in distinct banks. base and last
 * are the thread's, from bias_stage_base, so a tile costs no row
 * arithmetic beyond a multiply per chunk. */
template <int BM, int BN, int NT>
__device__ __forceinline__ void load_bias_stage(void *stage, const unsigned short *base, int64_t ss,
                                                int last, int kv0, int nkv) {
    constexpr int CH = BN / 8, LDB = BN + kPad, RS = NT / CH;
    static_assert(NT % CH == 0 && BM % RS == 0, "chunks must split evenly over the threads");
    unsigned short *st =
        static_cast<unsigned short *>(stage) + (threadIdx.x / CH) * LDB + (threadIdx.x % CH) * 8;
    const int left = nkv - kv0 - (threadIdx.x % CH) * 8;
    const int bytes = left >= 8 ? 16 : left > 0 ? 2 * left : 0;
#pragma unroll
    for (int it = 0; it < BM / RS; ++it)
        cp_async16_part(st + it * RS * LDB, base + min(it * RS, last) * ss + (left > 0 ? kv0 : 0),
                        bytes);
}

/* The thread's bias row and chunk for load_bias_stage: row m0 + r0 (r0 =
 * threadIdx.x / (BN / 8), rows RS = NT / (BN / 8) apart), chunk
 * threadIdx.x % (BN / 8), at key 0; *last: the offset past r0 of the
 * sequence's last row, which rows beyond it read. */
template <int BN>
__device__ __forceinline__ const unsigned short *
bias_stage_base(const fattn_cuda_args &a, int64_t b, int64_t h, int m0, int seq_q, int *last) {
    constexpr int CH = BN / 8;
    const int r0 = threadIdx.x / CH;
    *last = seq_q - 1 - (m0 + r0); /* may be negative: then every row reads the last */
    return static_cast<const unsigned short *>(a.var.bias) + var_bias_row(a, b, h, seq_q - 1) -
           (int64_t)*last * a.var.bias_ss + (threadIdx.x % CH) * 8;
}

/* vec bits: 1 Q, 2 K, 4 V may use cp.async. QREG keeps the whole Q fragment
 * set in registers (small DPAD x MT); otherwise it is re-read per k-step.
 * fold_sc: the scale (times log2 e) to fold into the exponent, 0 for none.
 * kRagged: the block works on sequence b of a variable-length or paged
 * problem (ragged.cuh): its rows, keys and causal offset; query tiles at or
 * past its length exit, and keys on a bad page give the block no keys.
 * kV (MmaVar): the attention variants (variants.cuh): key tiles outside
 * the block's window are skipped, tiles reaching past a window edge are
 * masked per element, softcap, ALiBi and bias rescore every element (in
 * log2 units, launched with fold_sc 0), the sink joins each row at the
 * end, and V and O are Dv = head_dim_v wide. */
template <typename T, int DPAD, int BM, int BN, int NW, bool QREG, bool FOLD, int MINB,
          bool kRagged, int kV>
__global__ void __launch_bounds__(NW * 32, MINB)
    flash_mma_kernel(const fattn_cuda_args a, const Pairs pairs, const int vec,
                     const float fold_sc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    /* mma.sync m16n8k16 needs compute 8.0, and the planner picks this kernel
     * only there; a build that adds 7.x targets for the CUDA-core kernels
     * gets an empty instance here instead of failing in ptxas. */
    (void)a, (void)pairs, (void)vec, (void)fold_sc;
    __trap();
#else
    constexpr int NT = NW * 32, LD = DPAD + kPad, MT = BM / (16 * NW);
    constexpr int KD = DPAD / 16, NS = BN / 8, ND = DPAD / 8;
    static_assert(MT * 16 * NW == BM && BN % 16 == 0 && DPAD % 16 == 0, "bad tile shape");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sq = reinterpret_cast<T *>(smem_raw);
    T *sk = sq + BM * LD;        /* [2][BN][LD] */
    T *sv = sk + 2 * BN * LD;    /* [2][BN][LD] */
    T *sbias = sv + 2 * BN * LD; /* the bias families: [2][BM][BN + kPad] (load_bias_stage) */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int64_t b, h, hk;
    unsigned bx = blockIdx.x;
    if constexpr (var_reads_bias(kV)) {
        /* A query tile's heads together: a bias broadcast over heads (or
         * batches) is then read from HBM once per tile, not once per head. */
        int64_t bh;
        block_x_pair_pairs_first(pairs, bx, bh);
        block_pair_at(a, pairs, bh, b, h, hk);
    } else {
        block_pair(a, pairs, b, h, hk);
    }
    /* Heavy (late, for causal) query tiles first, so the longest blocks do
     * not start in the last wave. */
    const int m0 = (int)(gridDim.x - 1 - bx) * BM; /* < seq_q */
    const int D = a.head_dim, Dv = kV ? a.head_dim_v : D;
    int seq_q = a.seq_q, seq_kv = a.seq_kv;
    /* causal: row i sees keys <= i + off; off is in [-seq_q, seq_kv - 1]
     * (params.h; a sequence's len_kv - len_q lies in that range of its own
     * lengths), so the int64 sums below hold it without overflow. */
    int off = a.causal_offset;
    /* Q, O and lse: batch index and first row (the sequence's, when ragged). */
    int64_t qb = b, qr = 0;
    Seq sr{};
    if constexpr (kRagged) {
        sr = ragged_seq(a, b);
        if (m0 >= sr.len_q) return; /* the whole block: no barrier is left waiting */
        seq_q = sr.len_q, seq_kv = sr.len_kv, off = sr.causal_offset;
        qb = sr.q_batch, qr = sr.q_row0;
    }

    const T *qg = thread_src<T, DPAD, NT>(
        static_cast<const T *>(a.q) + qb * a.q_sb + h * a.q_sh + qr * a.q_ss, a.q_ss);
    /* The thread's chunk of key 0 of the K/V head; paged: of the head at
     * element 0, each key's address added by load_kv_rows. */
    const T *kg, *vg;
    if constexpr (kRagged) {
        kg = static_cast<const T *>(a.k) + hk * a.k_sh + (threadIdx.x % (DPAD / 8)) * 8;
        vg = static_cast<const T *>(a.v) + hk * a.v_sh + (threadIdx.x % (DPAD / 8)) * 8;
        if (!a.rag.page_size) {
            kg += ragged_key(a, sr, b, 0, a.k_sb, a.k_ss);
            vg += ragged_key(a, sr, b, 0, a.v_sb, a.v_ss);
        }
    } else {
        kg =
            thread_src<T, DPAD, NT>(static_cast<const T *>(a.k) + b * a.k_sb + hk * a.k_sh, a.k_ss);
        vg =
            thread_src<T, DPAD, NT>(static_cast<const T *>(a.v) + b * a.v_sb + hk * a.v_sh, a.v_ss);
    }

    /* Keys past the last one the block's last stored row sees are skipped. */
    int64_t kv_end = seq_kv;
    if (a.causal) kv_end = min(kv_end, min((int64_t)m0 + BM, (int64_t)seq_q) + off);
    /* Variants: the window's offset (the sequence's len_kv - len_q), the
     * first key the block's first row sees (tiles before kv_lo's are
     * skipped), and ALiBi's slope. */
    int64_t woff = 0, kv_lo = 0;
    float slope = 0.f;
    if constexpr (kV != kVarNone) {
        woff = (int64_t)seq_kv - seq_q;
        const int64_t last = min((int64_t)m0 + BM, (int64_t)seq_q) - 1;
        if (a.var.window_right >= 0) kv_end = min(kv_end, last + woff + a.var.window_right + 1);
        if (a.var.window_left >= 0) kv_lo = max((int64_t)0, (int64_t)m0 + woff - a.var.window_left);
        slope = var_slope(a, b, h);
    }
    int ntiles = kv_end > 0 ? (int)((kv_end + BN - 1) / BN) : 0;
    const int j0 = kV ? (int)min(kv_lo / BN, (int64_t)ntiles) : 0;
    /* Ragged: the block's keys end at kv_end (no stored row sees a later
     * one), so later keys are zeros, not loads, and those below it are on
     * vetted pages; a bad page gives the block no keys (O = 0, lse = -inf).
     * Narrowing seq_kv costs no register, which a bound of its own did
     * (spills at dpad 64 and 128). */
    if constexpr (kRagged) {
        seq_kv = (int)max(kv_end, (int64_t)0);
        if (!ragged_pages_ok(a, b, j0 * BN, seq_kv)) ntiles = 0;
    }
    /* Tiles before jmask are wholly visible to every row of the block: all
     * keys < seq_kv and, for causal, <= the first row's limit m0 + off. */
    int jmask = seq_kv / BN;
    if (a.causal) jmask = min(jmask, (int)(max((int64_t)0, (int64_t)m0 + off + 1) / BN));
    /* Variants: the window's right edge for the first row limits them too,
     * and tiles before jfull reach left of the last stored row's window. */
    int jfull = 0;
    if constexpr (kV != kVarNone) {
        if (a.var.window_right >= 0)
            jmask = min(jmask,
                        (int)(max((int64_t)0, (int64_t)m0 + woff + a.var.window_right + 1) / BN));
        if (a.var.window_left >= 0) {
            const int64_t last = min((int64_t)m0 + BM, (int64_t)seq_q) - 1;
            const int64_t lo = last + woff - a.var.window_left; /* first key it sees */
            jfull = (int)min((max((int64_t)0, lo) + BN - 1) / BN, (int64_t)ntiles);
        }
    }

    const int wr0 = warp * MT * 16;

    /* Per-lane ldmatrix offsets (elements). Q (A operand): matrices ordered
     * rows 0-7/8-15 x cols 0-7, then cols 8-15. K (B, non-transposed): keys
     * 0-7 x dims 0-7 / 8-15, then keys 8-15: two n8 tiles of one k16 step.
     * V (B, transposed): keys 0-7 / 8-15 x dims 0-7, then dims 8-15. */
    const int q_off = (wr0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
    const int k_off = ((lane & 7) + (lane >> 4) * 8) * LD + ((lane >> 3) & 1) * 8;
    const int v_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;

    float o[MT][ND][4];
    float mrow[MT][2], lrow[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int dt = 0; dt < ND; ++dt)
            o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
        mrow[mt][0] = mrow[mt][1] = -INFINITY;
        lrow[mt][0] = lrow[mt][1] = 0.f;
    }
    uint32_t qf[QREG ? MT : 1][QREG ? KD : 1][4];
    Rescore rs;
    /* Variants: the thread's first row i0 sees keys [lo_abs, hi_abs] (the
     * window's and causal's bounds, clamped to where they still cut a tile:
     * int, and no woff held through the loop), and ALiBi's distance at key
     * 0 is dist_abs. */
    int lo_abs = 0, hi_abs = 0;
    float dist_abs = 0.f;
    if constexpr (kV != kVarNone) {
        rs.init<kV>(a, slope, std::is_same<T, __nv_bfloat16>::value ? FATTN_BF16 : FATTN_F16);
        const int64_t i0 = (int64_t)m0 + wr0 + (lane >> 2);
        const int64_t top = (int64_t)seq_kv + BN, bot = -(int64_t)BM - 1;
        int64_t hi = top, lo = bot;
        if (a.causal) hi = min(hi, i0 + off);
        if (a.var.window_right >= 0) hi = min(hi, i0 + woff + a.var.window_right);
        if (a.var.window_left >= 0) lo = max(lo, min(top, i0 + woff - a.var.window_left));
        hi_abs = (int)max(bot, hi), lo_abs = (int)lo;
        dist_abs = (float)(i0 + woff);
    }
    /* fold_sc > 0 (the launcher's choice, see fold_scale): take the max of
     * the raw scores and fold the scale into the exponent's FFMA. Otherwise
     * scale first (sc = 1). */
    const bool fold = FOLD && fold_sc > 0.f;
    const float sc = kV == kVarBias ? kLog2e : fold ? fold_sc : 1.f;

    const unsigned short *bbase = nullptr; /* load_bias_stage's, from bias_stage_base */
    int blast = 0;
    if (ntiles > j0) {
        /* Tile j lives in buffer j & 1, so the loop needs no j0. */
        T *kf = sk + (j0 & 1) * BN * LD, *vf = sv + (j0 & 1) * BN * LD;
        load_tile<T, BM, DPAD, NT>(sq, qg + (int64_t)m0 * a.q_ss, a.q_ss, m0, seq_q, D, vec & 1);
        if constexpr (var_reads_bias(kV)) {
            if (rs.bsm) {
                bbase = bias_stage_base<BN>(a, b, h, m0, seq_q, &blast);
                load_bias_stage<BM, BN, NT>(sbias + (j0 & 1) * BM * (BN + kPad), bbase,
                                            a.var.bias_ss, blast, j0 * BN, seq_kv);
            }
        }
        if constexpr (kRagged) {
            load_kv_rows<T, BN, DPAD, NT>(kf, vf, kg, vg, a, sr, b, j0 * BN, seq_kv, D, Dv, vec);
        } else if constexpr (kV != kVarNone) {
            const int64_t kvs = (int64_t)j0 * BN;
            load_tile<T, BN, DPAD, NT>(kf, kg + kvs * a.k_ss, a.k_ss, kvs, seq_kv, D, vec & 2);
            load_tile<T, BN, DPAD, NT>(vf, vg + kvs * a.v_ss, a.v_ss, kvs, seq_kv, Dv, vec & 4);
        } else {
            load_tile<T, BN, DPAD, NT>(sk, kg, a.k_ss, 0, seq_kv, D, vec & 2);
            load_tile<T, BN, DPAD, NT>(sv, vg, a.v_ss, 0, seq_kv, D, vec & 4);
        }
        cp_async_commit();
    }

    for (int j = j0; j < ntiles; ++j) {
        const int buf = j & 1;
        /* Tile j has landed, and every warp is done with tile j-1, whose
         * buffer the prefetch below overwrites. */
        cp_async_wait_all();
        __syncthreads();
        if (j + 1 < ntiles) {
            const int64_t kv1 = (int64_t)(j + 1) * BN;
            T *nk = sk + (buf ^ 1) * BN * LD, *nv = sv + (buf ^ 1) * BN * LD;
            if constexpr (var_reads_bias(kV)) {
                if (rs.bsm)
                    load_bias_stage<BM, BN, NT>(sbias + (buf ^ 1) * BM * (BN + kPad), bbase,
                                                a.var.bias_ss, blast, (int)kv1, seq_kv);
            }
            if constexpr (kRagged) {
                load_kv_rows<T, BN, DPAD, NT>(nk, nv, kg, vg, a, sr, b, (int)kv1, seq_kv, D, Dv,
                                              vec);
            } else {
                load_tile<T, BN, DPAD, NT>(nk, kg + kv1 * a.k_ss, a.k_ss, kv1, seq_kv, D, vec & 2);
                load_tile<T, BN, DPAD, NT>(nv, vg + kv1 * a.v_ss, a.v_ss, kv1, seq_kv, Dv, vec & 4);
            }
        }
        cp_async_commit();
        if constexpr (var_reads_bias(kV)) {
            if (rs.bias && !rs.bsm)
                rs.prefetch_bias<MT * 16>(a, b, h, (int64_t)m0 + wr0, seq_q, j * BN,
                                          min(BN, seq_kv - j * BN), lane);
        }

        if (QREG && j == j0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int kk = 0; kk < KD; ++kk)
                    ldsm_x4(qf[QREG ? mt : 0][QREG ? kk : 0], sq + q_off + mt * 16 * LD + kk * 16);
        }

        const T *kt = sk + buf * BN * LD, *vt = sv + buf * BN * LD;
        const T *bt = sbias + buf * BM * (BN + kPad); /* the bias families' stage of tile j */
        float s[MT][NS][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NS; ++nt)
                s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;

#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            uint32_t qa[MT][4];
            if (!QREG) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldsm_x4(qa[mt], sq + q_off + mt * 16 * LD + kk * 16);
            }
#pragma unroll
            for (int np = 0; np < NS / 2; ++np) {
                uint32_t kb[4];
                ldsm_x4(kb, kt + k_off + np * 16 * LD + kk * 16);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const uint32_t *af = QREG ? qf[QREG ? mt : 0][QREG ? kk : 0] : qa[mt];
                    mma16816<T>(s[mt][2 * np], af, kb[0], kb[1]);
                    mma16816<T>(s[mt][2 * np + 1], af, kb[2], kb[3]);
                }
            }
        }

        const int kv0 = j * BN;
        const bool need_mask = j >= jmask;
        if (!fold && (kV == kVarNone || kV == kVarMask || kV == kVarAll)) {
            /* The rescoring instances scale inside their own arithmetic. */
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NS; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][nt][e] *= a.scale_log2;
        }
        if constexpr (kV != kVarNone) {
            /* Every element of the tile, in the sequence's coordinates: the
             * rescoring where the instance has one, and the mask where the
             * tile reaches past an edge of some row's keys (a tile the
             * window wholly covers skips it, as a plain tile does). */
            const bool mask_el = need_mask || j < jfull;
            if (kV != kVarMask || mask_el) {
                /* Row rr of the thread's (rr = 16 mt + 8 hh) sees tile
                 * columns [lo0 + rr, min(kv_rel, hi0 + rr)]: bounds
                 * relative to kv0 and clamped to int, as the plain mask's
                 * are, so they cost three registers. */
                const int kv_rel = seq_kv - 1 - kv0;
                const int hi0 = max(-BM, min(BN, hi_abs - kv0));
                const int lo0 = max(-BM, min(BN, lo_abs - kv0));
                auto pass = [&](auto masked) {
                    constexpr bool kMasked = decltype(masked)::value;
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int hh = 0; hh < 2; ++hh) {
                            const int rr = mt * 16 + hh * 8;
                            /* A row past the sequence (never stored) reads
                             * its bias at the last row. */
                            const int64_t i = (int64_t)m0 + wr0 + rr + (lane >> 2);
                            const int64_t ir = min(i, (int64_t)seq_q - 1);
                            const VarRow vr = rs.template row<kV>(
                                a, b, h, ir, dist_abs + (float)(rr - kv0), kv0, lane);
#pragma unroll
                            for (int nt = 0; nt < NS; ++nt) {
                                const int col = nt * 8 + (lane & 3) * 2;
                                const bool v0 = !kMasked || (col <= kv_rel && col <= hi0 + rr &&
                                                             col >= lo0 + rr);
                                const bool v1 =
                                    !kMasked || (col + 1 <= kv_rel && col + 1 <= hi0 + rr &&
                                                 col + 1 >= lo0 + rr);
                                float &x0 = s[mt][nt][2 * hh], &x1 = s[mt][nt][2 * hh + 1];
                                if (var_reads_bias(kV) && rs.bsm) {
                                    rs.template score2<kV, kMasked, false>(a, vr, nt * 8, v0, v1,
                                                                           x0, x1);
                                    const float2 t = unpack2<T>(*reinterpret_cast<const uint32_t *>(
                                        bt + (wr0 + rr + (lane >> 2)) * (BN + kPad) + nt * 8 +
                                        (lane & 3) * 2));
                                    rs.template add_bias<kV>(a, t.x, t.y, x0, x1);
                                } else {
                                    rs.template score2<kV, kMasked>(a, vr, nt * 8, v0, v1, x0, x1);
                                }
                                if (kMasked) {
                                    x0 = v0 ? x0 : -INFINITY;
                                    x1 = v1 ? x1 : -INFINITY;
                                }
                            }
                        }
                };
                if (mask_el)
                    pass(std::true_type{});
                else
                    pass(std::false_type{});
            }
        } else if (need_mask) {
            /* Mask only tiles that reach past seq_kv or past the first
             * row's causal limit (the smallest). The limits are rebuilt
             * here, relative to kv0 and clamped to int, rather than held in
             * registers: row (lane >> 2) + 16 mt + 8 hh of the warp sees
             * tile columns <= min(kv_rel, rel + 16 mt + 8 hh). */
            const int kv_rel = seq_kv - 1 - kv0;
            const int64_t rel64 = (int64_t)m0 + wr0 + (lane >> 2) + off - kv0;
            const int rel = a.causal ? (int)max((int64_t)-BM, min((int64_t)BN, rel64)) : BN + BM;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NS; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = nt * 8 + (lane & 3) * 2 + (e & 1);
                        if (col > kv_rel || col > rel + mt * 16 + (e >> 1) * 8)
                            s[mt][nt][e] = -INFINITY;
                    }
        }

        /* Online softmax per row; a row's values live in the 4 lanes of a
         * quad. m is kept in the log2 domain. A row with nothing visible yet
         * keeps m = -inf; subtracting 0 instead keeps exp2 at 0 rather than
         * NaN. l stays a per-lane partial sum until the end (the rescale
         * factor is the same for the quad). fmaxf drops a NaN score from the
         * max, but its exp2 is NaN, and so are l, O and the lse.
         * kVarCap in bf16 (Rescore::fixed) needs neither: see kFixedCap. */
        if (kFixedCap<T, kV> && rs.fixed) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    float sum = 0.f;
#pragma unroll
                    for (int nt = 0; nt < NS; ++nt) {
                        const float p0 = ex2(s[mt][nt][2 * hh] - rs.mu);
                        const float p1 = ex2(s[mt][nt][2 * hh + 1] - rs.mu);
                        s[mt][nt][2 * hh] = p0;
                        s[mt][nt][2 * hh + 1] = p1;
                        sum += p0 + p1;
                    }
                    lrow[mt][hh] += sum;
                }
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < NS; ++nt)
                        mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float mnew = fmaxf(mrow[mt][hh], FOLD ? __fmul_ru(mx, sc) : mx * sc);
                    const float mu = mnew == -INFINITY ? 0.f : mnew;
                    const float alpha = ex2(mrow[mt][hh] - mu);
                    mrow[mt][hh] = mnew;
                    float sum = 0.f;
#pragma unroll
                    for (int nt = 0; nt < NS; ++nt) {
                        const float p0 = ex2(fmaf(s[mt][nt][2 * hh], sc, -mu));
                        const float p1 = ex2(fmaf(s[mt][nt][2 * hh + 1], sc, -mu));
                        s[mt][nt][2 * hh] = p0;
                        s[mt][nt][2 * hh + 1] = p1;
                        sum += p0 + p1;
                    }
                    lrow[mt][hh] = lrow[mt][hh] * alpha + sum;
#pragma unroll
                    for (int dt = 0; dt < ND; ++dt) {
                        o[mt][dt][2 * hh] *= alpha;
                        o[mt][dt][2 * hh + 1] *= alpha;
                    }
                }
        }

        /* O += P V. The C fragments of n8 tiles 2kk and 2kk+1 are exactly the
         * A fragment of k16 step kk, so P never leaves registers. */
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < ND / 2; ++dp) {
                uint32_t vb[4];
                ldsm_x4_t(vb, vt + v_off + kk * 16 * LD + dp * 16);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816<T>(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
                    mma16816<T>(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
                }
            }
        }
    }

    if (kFixedCap<T, kV> && rs.fixed) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) mrow[mt][0] = mrow[mt][1] = rs.mu;
    }
    /* Epilogue: O = acc / l straight from the fragments. l = 0 (no visible
     * key, or every score -inf) gives O = 0 and lse = -inf; a NaN or +inf
     * score made l NaN, and O and lse stay NaN (a NaN l must not pass for 0). */
    T *og = static_cast<T *>(a.o) + qb * a.o_sb + h * a.o_sh + qr * a.o_ss;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = lrow[mt][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int64_t i = (int64_t)m0 + wr0 + mt * 16 + (lane >> 2) + hh * 8;
            if (i >= seq_q) continue;
            float inv = l == 0.f ? 0.f : 1.f / l, lse = -INFINITY;
            if constexpr (kV != kVarNone) { /* the plain instances take the lse at its store */
                if (l != 0.f) lse = (mrow[mt][hh] + log2f(l)) * kLn2;
                var_sink_fold(mrow[mt][hh], l, var_sink_log2(a, h), &inv, &lse);
            }
            T *orow = og + i * a.o_ss;
#pragma unroll
            for (int dt = 0; dt < ND; ++dt) {
                const int d = dt * 8 + (lane & 3) * 2;
                const float v0 = o[mt][dt][2 * hh] * inv, v1 = o[mt][dt][2 * hh + 1] * inv;
                if (d + 1 < Dv && (reinterpret_cast<uintptr_t>(orow + d) & 3) == 0) {
                    *reinterpret_cast<uint32_t *>(orow + d) = pack2<T>(v0, v1);
                } else {
                    if (d < Dv) orow[d] = to_storage<T>(v0);
                    if (d + 1 < Dv) orow[d + 1] = to_storage<T>(v1);
                }
            }
            if (a.lse && (lane & 3) == 0)
                a.lse[qb * a.l_sb + h * a.l_sh + (qr + i) * a.l_ss] =
                    kV         ? lse
                    : l == 0.f ? -INFINITY
                               : (mrow[mt][hh] + log2f(l)) * kLn2;
        }
#endif
}

/* The scale to fold, or 0. A positive scale commutes with the row max, so
 * the kernel can take the max of raw scores and fold the scale into the
 * exponent's FFMA: exp2(s sc - mu) with an exact product, so every term of a
 * row carries 2^(mx sc - mu), mu being mx sc rounded up (no term passes 1).
 * That factor cancels between l and O while ulp(mu) is small, but vanishes
 * when scaled scores are huge, as every nonzero one is at scale 1e30: scales
 * beyond 11 run unfolded (the max term exactly 1). Decided here rather than
 * in the kernel, whose tile loop then stays as it was. */
inline float fold_scale(const fattn_cuda_args *a) {
    return a->scale_log2 > 0.f && a->scale_log2 <= 16.f ? a->scale_log2 : 0.f;
}

/* A stride matters for alignment only if its index can be non-zero. */
inline bool aligned8(const void *p, int64_t sb, int64_t nb, int64_t sh, int64_t nh, int64_t ss,
                     int64_t ns) {
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0 && (nb <= 1 || sb % 8 == 0) &&
           (nh <= 1 || sh % 8 == 0) && (ns <= 1 || ss % 8 == 0);
}

/* Dynamic shared memory of a shape: Q, and K and V double-buffered, in
 * rows padded by kPad, and the bias families' two bias stages; f16 and
 * bf16 are both 2 bytes. */
template <int DPAD, typename S, int kV> constexpr int shape_smem() {
    return (S::BM + 4 * S::BN) * (DPAD + kPad) * 2 +
           (var_reads_bias(kV) ? 2 * S::BM * (S::BN + kPad) * 2 : 0);
}

template <typename T, int DPAD, typename S, bool kRagged, int kV>
cudaError_t launch(const fattn_cuda_args *a, cudaStream_t stream) {
    static_assert(sizeof(T) == 2, "the shared-memory size assumes a 2-byte storage type");
    constexpr int smem = shape_smem<DPAD, S, kV>();
    auto kern =
        flash_mma_kernel<T, DPAD, S::BM, S::BN, S::NW, S::QREG, S::FOLD, S::MINB, kRagged, kV>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    const int64_t hkv = a->heads_q / a->group;
    /* The batch indices and rows the operands are addressed at: a packed
     * operand has batch index 0 and the total of rows, a paged cache a
     * page per batch index and page_size rows. */
    const fattn_cuda_ragged &r = a->rag;
    const bool pq = r.on && r.cu_q, pk = r.on && r.page_size, ck = r.on && !pk && r.cu_kv;
    const int64_t nbq = pq ? 1 : a->batch, nsq = pq ? r.total_q : a->seq_q;
    const int64_t nbk = pk ? r.num_pages : ck ? 1 : a->batch;
    const int64_t nsk = pk ? r.page_size : ck ? r.total_kv : a->seq_kv;
    int vec = 0;
    if (aligned8(a->q, a->q_sb, nbq, a->q_sh, a->heads_q, a->q_ss, nsq)) vec |= 1;
    if (aligned8(a->k, a->k_sb, nbk, a->k_sh, hkv, a->k_ss, nsk)) vec |= 2;
    if (aligned8(a->v, a->v_sb, nbk, a->v_sh, hkv, a->v_ss, nsk)) vec |= 4;
    /* The rescoring instances scale first: their scores are rescored and
     * masked in scaled units. */
    const float fold_sc = S::FOLD && (kV == kVarNone || kV == kVarMask) ? fold_scale(a) : 0.f;
    const unsigned tiles_q = (unsigned)(((int64_t)a->seq_q + S::BM - 1) / S::BM);
    return launch_pairs(*a, tiles_q, [&](const Pairs &pairs, dim3 grid) {
        flash_mma_kernel<T, DPAD, S::BM, S::BN, S::NW, S::QREG, S::FOLD, S::MINB, kRagged, kV>
            <<<grid, S::NW * 32, smem, stream>>>(*a, pairs, vec, fold_sc);
    });
}

/* The plain shape of bucket DPAD, or the bias families' (bias 1). */
template <int DPAD> void tiles(int bias, int *bm, int *bn, int *smem) {
    using S = Sm80Shape<DPAD>;
    using B = Sm80BiasShape<DPAD>;
    *bm = bias ? B::BM : S::BM;
    *bn = bias ? B::BN : S::BN;
    *smem = bias ? shape_smem<DPAD, B, kVarBias>() : shape_smem<DPAD, S, kVarNone>();
}

/* One instance family of bucket DPAD, in the problem's dtype. */
template <int DPAD, bool kRagged, int kV>
cudaError_t launch_dtype(const fattn_cuda_args *a, cudaStream_t stream) {
    using S = std::conditional_t<var_reads_bias(kV), Sm80BiasShape<DPAD>, Sm80Shape<DPAD>>;
    return a->dtype == FATTN_F16 ? launch<__half, DPAD, S, kRagged, kV>(a, stream)
                                 : launch<__nv_bfloat16, DPAD, S, kRagged, kV>(a, stream);
}

/* The variant family `mode` (MmaVar, not kVarNone). */
template <int DPAD, bool kRagged>
cudaError_t launch_var(const fattn_cuda_args *a, int mode, cudaStream_t stream) {
    switch (mode) {
    case kVarMask: return launch_dtype<DPAD, kRagged, kVarMask>(a, stream);
    case kVarCap: return launch_dtype<DPAD, kRagged, kVarCap>(a, stream);
    case kVarAlibi: return launch_dtype<DPAD, kRagged, kVarAlibi>(a, stream);
    case kVarBias: return launch_dtype<DPAD, kRagged, kVarBias>(a, stream);
    case kVarAll: return launch_dtype<DPAD, kRagged, kVarAll>(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

/* f(std::integral_constant<int, dpad>) for a built bucket dpad. */
template <typename F> cudaError_t for_bucket(int dpad, F f) {
#if FATTN_CUDA_DPAD_32
    if (dpad == 32) return f(std::integral_constant<int, 32>{});
#endif
#if FATTN_CUDA_DPAD_64
    if (dpad == 64) return f(std::integral_constant<int, 64>{});
#endif
#if FATTN_CUDA_DPAD_128
    if (dpad == 128) return f(std::integral_constant<int, 128>{});
#endif
#if FATTN_CUDA_DPAD_256
    if (dpad == 256) return f(std::integral_constant<int, 256>{});
#endif
    return cudaErrorInvalidValue;
}

/* The family a problem runs: the cheapest that has all it asks for. */
inline int var_mode(const fattn_cuda_args *a) {
    if (!a->var.on) return a->head_dim_v != a->head_dim ? kVarMask : kVarNone;
    const bool cap = a->var.softcap > 0.f, alibi = a->var.alibi != NULL;
    if (a->var.bias) return cap || alibi ? kVarAll : kVarBias;
    if (cap && alibi) return kVarAll;
    return cap ? kVarCap : alibi ? kVarAlibi : kVarMask;
}

}   // namespace
#endif /* any bucket */

/* The variant families, dense and ragged (flash_mma_var.cu,
 * flash_mma_var_ragged.cu): mode is var_mode's, dpad a built bucket. */
extern "C" cudaError_t fattn_cuda_flash_mma_var(const fattn_cuda_args *a, int dpad, int mode,
                                                cudaStream_t stream);
extern "C" cudaError_t fattn_cuda_flash_mma_var_ragged(const fattn_cuda_args *a, int dpad, int mode,
                                                       cudaStream_t stream);

#endif /* FATTN_FLASH_MMA_CUH */
