/* The contract between the CUDA backend's C host code (backends/cuda/) and
 * its kernels (the .cu files here): one plain parameter struct and the
 * extern "C" entry points, in C so that both sides include it (the idea of
 * FlashAttention-2's Flash_fwd_params). Every launcher enqueues on `stream`
 * and returns cudaGetLastError() after each launch (or the error that
 * stopped it), never synchronising. */
#ifndef FATTN_CUDA_PARAMS_H
#define FATTN_CUDA_PARAMS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "fattn.h" /* fattn_dtype: the storage type, named on both sides */

#ifdef __cplusplus
extern "C" {
#endif

/* Variable-length sequences and paged K/V (the host's fattn_ragged; the
 * rules are in src/seam/backend.h, the device side in kernels_cu/ragged.cuh).
 * on = 0: a dense batch, and nothing else here is read. Table pointers are
 * at the table's first element, NULL when the table is absent. */
typedef struct fattn_cuda_ragged {
    const int32_t *cu_q, *cu_kv, *used, *table;
    int64_t cu_q_s, cu_kv_s, used_s; /* element strides of the three vectors */
    int64_t table_sb, table_ss;      /* block table: per sequence, per page */
    int64_t total_q, total_kv, num_pages;
    int page_size;     /* keys per page, clamped to 2^31-1 (keys are ints); 0: not paged */
    int pages_per_seq; /* clamped likewise: no key reaches past it */
    int on, top_left;
    int added;       /* keys an append wrote after used[b] (at most seq_kv), else 0 */
    unsigned *fault; /* the context's fault word: FATTN_FAULT_* bits */
} fattn_cuda_ragged;

/* The softcap's polynomials (fattn_cuda_var.cap_poly): tier t has t + 2
 * terms, tanh to degree 2t + 3, each on the widest range where it stays
 * as accurate as the others (cuda_launch.c's cap_poly): the fewer the
 * terms, the narrower. Degree 9 on |x| <= 0.75 ran 4-6% slower than
 * degree 7 (call139), so the widest tier stops there. */
#define FATTN_CUDA_CAP_TIERS 3
#define FATTN_CUDA_CAP_POLY_TERMS (FATTN_CUDA_CAP_TIERS + 1) /* the most terms */

/* The attention variants (src/seam/backend.h, fattn_variants; fattn.h
 * states the rules). on = 0: none, and nothing else here is read. Pointers
 * are at the operand's element offset, NULL when not given; strides are in
 * elements. Sequence b, query row i and key j are the sequence's own (of a
 * ragged problem too); the window and ALiBi align bottom-right: off =
 * len_kv - len_q of the sequence. */
typedef struct fattn_cuda_var {
    int on;
    /* -1: unbounded on that side; else clamped by the host to at most
     * seq_q + seq_kv (a wider window hides no key), so int64 sums of a row,
     * an offset and a window side cannot overflow. */
    int64_t window_left, window_right;
    float softcap;      /* > 0: s = softcap * tanh(s / softcap), natural units; 0: none */
    const float *alibi; /* slope (b, h) at b * alibi_sb + h * alibi_sh */
    int64_t alibi_sb, alibi_sh;
    const float *sinks; /* logit of head h at h * sinks_sh (natural units) */
    int64_t sinks_sh;
    const void *bias; /* element (b, h, i, j) at b * sb + h * sh + i * ss + j * sd */
    int64_t bias_sb, bias_sh, bias_ss, bias_sd;
    fattn_dtype bias_dtype; /* FATTN_F32, FATTN_F16 or FATTN_BF16 */
    float scale;            /* the softmax scale itself: the variants act in natural units */
    int fast_tanh;          /* FATTN_FLAG_FAST_SOFTCAP: the softcap may use tanh.approx.f32 */
    /* The accurate softcap in log2 units as polynomials where they hold
     * (the host's fits, cuda_launch.c's cap_poly): softcap log2(e)
     * tanh(scale s / softcap) = s sum_k cap_poly[t][k] (s^2)^k, k < t + 2,
     * for |s| <= cap_poly_smax[t] (< 0: nowhere: no softcap, a negative
     * scale, or a coefficient outside float's normal range). */
    float cap_poly[FATTN_CUDA_CAP_TIERS][FATTN_CUDA_CAP_POLY_TERMS];
    float cap_poly_smax[FATTN_CUDA_CAP_TIERS];
} fattn_cuda_var;

/* One forward problem. Pointers are at the operand's element offset; strides
 * are in elements (the head dim is contiguous). lse is NULL when not wanted. */
typedef struct fattn_cuda_args {
    const void *q, *k, *v;
    void *o;
    float *lse;
    int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
    int64_t l_sb, l_sh, l_ss;
    /* Any size: the launchers fold (batch, head) pairs into grid y and z
     * (kernels_cu/device_util.cuh). */
    int64_t batch, heads_q, group; /* group = heads_q / heads_kv: query heads per K/V head */
    int seq_q, seq_kv, head_dim;   /* seq below 2^31 (the planner checks) */
    float scale_log2;              /* softmax scale * log2(e): kernels use exp2 */
    int causal;        /* 1: key j is visible to query row i iff j <= i + causal_offset */
    fattn_dtype dtype; /* of q, k, v and o: FATTN_F32, FATTN_F16 or FATTN_BF16 */
    /* With causal, in [-seq_q, seq_kv - 1] (else 0): the host clamps the
     * problem's int64 offset into that range, which changes no mask (an
     * offset >= seq_kv - 1 shows every key to every row, one <= -seq_q none)
     * and, with both sequences below 2^31, fits an int; bottom-right
     * alignment is seq_kv - seq_q, top-left 0. The entry points check it.
     * Last, so that the fields before keep their offsets: placed before
     * dtype, it made ptxas spill 64 bytes in the dpad-128 tensor-core
     * kernel on sm_90, which spills nothing this way. */
    int causal_offset;
    /* Variable-length sequences and paged K/V; rag.on 0 for a dense batch.
     * With rag.on, batch counts sequences, seq_q/seq_kv are the longest
     * (they size the grid), and each block resolves its own sequence. */
    fattn_cuda_ragged rag;
    /* The variants (var.on 0 for plain attention) and the width of V and O
     * (always set; head_dim unless the problem has head_dim_v). Last, after
     * the fields the plain kernels read, so that their offsets stay. A
     * kernel that takes neither is never planned for a problem that has
     * them (the planner declines it by its FATTN_VAR_* bit). */
    fattn_cuda_var var;
    int head_dim_v;
} fattn_cuda_args;

/* Head-dim buckets compiled into this build: the build sets each
 * FATTN_CUDA_DPAD_<n> to 0 or 1 from FATTN_CUDA_HEAD_DIMS (all, when a kernel
 * file is compiled alone). A problem runs in the smallest built bucket >= its
 * head dim, zero-padded. */
#ifndef FATTN_CUDA_DPAD_32
#define FATTN_CUDA_DPAD_32 1
#endif
#ifndef FATTN_CUDA_DPAD_64
#define FATTN_CUDA_DPAD_64 1
#endif
#ifndef FATTN_CUDA_DPAD_128
#define FATTN_CUDA_DPAD_128 1
#endif
#ifndef FATTN_CUDA_DPAD_256
#define FATTN_CUDA_DPAD_256 1
#endif

/* 1 when the bucket `dpad` (32, 64, 128 or 256) was built. */
int fattn_cuda_dpad_built(int dpad);

/* Tensor-core kernel (mma.sync m16n8k16, ldmatrix, cp.async), f16 and bf16,
 * compute capability 8.0+. */
cudaError_t fattn_cuda_flash_mma(const fattn_cuda_args *a, int dpad, cudaStream_t stream);
/* Tile sizes the mma kernel uses for dpad (for the planner and the memory
 * report), bias 1 for a problem with an additive bias (its families take
 * tiles of their own); zeros when the bucket was not built. */
void fattn_cuda_flash_mma_tiles(int dpad, int bias, int *block_m, int *block_n, int *smem_bytes);

/* Hopper kernel (wgmma.mma_async, sm_90a code: compute 9.0 only), f16 and
 * bf16, dense batches with any variant but head_dim_v (a bias in the
 * problem's dtype), in the buckets its tiles query gives nonzero tiles for
 * (zeros: not built there); all 1: the tiles of a problem with a bias or
 * with softcap and ALiBi together (its kWgAll shape). Built with
 * FATTN_CUDA_WGMMA (backends/cuda/CMakeLists.txt). */
cudaError_t fattn_cuda_flash_wgmma(const fattn_cuda_args *a, int dpad, cudaStream_t stream);
void fattn_cuda_flash_wgmma_tiles(int dpad, int all, int *block_m, int *block_n,
                                  int *smem_bytes);

/* CUDA-core kernel (FFMA, float32 arithmetic), every dtype, compute capability 7.0+.
 * small: 1 takes the tile shape for devices that give a block less shared
 * memory than the tuned one needs (the tiles query says how much each takes). */
cudaError_t fattn_cuda_flash_simt(const fattn_cuda_args *a, int dpad, int small,
                                  cudaStream_t stream);
void fattn_cuda_flash_simt_tiles(int dpad, int small, int *block_m, int *block_n, int *smem_bytes);
/* 1 when the CUDA-core kernel was built for f16/bf16 too (FATTN_CUDA_SIMT_HALF). */
int fattn_cuda_simt_half_built(void);

/* The naive baseline's softmax: S (float32, [batch * heads_q][seq_q][seq_kv],
 * already scaled by scale * log2 e) to P (float32, or the storage dtype when
 * p_dtype is FATTN_F16/FATTN_BF16, same layout), masked, with the lse. */
cudaError_t fattn_cuda_naive_softmax(const float *s, void *p, fattn_dtype p_dtype,
                                     const fattn_cuda_args *a, cudaStream_t stream);
/* Zeros into O (seq_kv = 0) and -inf into the lse. */
cudaError_t fattn_cuda_zero_output(const fattn_cuda_args *a, cudaStream_t stream);

/* One fattn_combine problem (FATTN_OP_COMBINE). Pointers are at the
 * operands' element offsets: part_o at part 0 of O (part_dtype), part_lse
 * at part 0 of the lse; part p lies po_ps (pl_ps) elements further. Strides
 * and sizes are int64 elements, any size (the kernel loops over rows);
 * lse is NULL when not wanted. */
typedef struct fattn_cuda_combine_args {
    const void *part_o;
    const float *part_lse;
    void *o;
    float *lse;
    int64_t po_sb, po_sh, po_ss, po_ps; /* O parts: batch, head, seq, part */
    int64_t pl_sb, pl_sh, pl_ss, pl_ps; /* lse parts */
    int64_t o_sb, o_sh, o_ss, l_sb, l_sh, l_ss;
    int64_t batch, heads, seq, parts;
    int head_dim;           /* 1..FATTN_CUDA_COMBINE_MAX_D */
    fattn_dtype part_dtype; /* FATTN_F32, FATTN_F16 or FATTN_BF16 */
    fattn_dtype dtype;      /* of o: the same three */
    /* Optional packed rows of O and lse (the decode path's merge for a
     * problem with cu_seqlens_q; NULL otherwise): batch counts sequences,
     * seq is the longest, and row i of sequence b goes to row cu_q[b] + i
     * of O and lse at batch index 0. Rows i >= cu_q[b+1] - cu_q[b], and
     * every row of a span the rules of src/seam/backend.h call bad, are
     * neither read nor written (the decode kernel wrote no part for them
     * and recorded the fault). */
    const int32_t *cu_q;
    int64_t cu_q_s;  /* element stride of cu_q */
    int64_t total_q; /* packed rows of O */
    /* 1: launched as a programmatic dependent of the kernel before it on
     * the stream (the split-KV decode, compute capability 9.0 and up): the
     * launch overlaps that kernel's tail and the blocks wait for its
     * results (griddepcontrol.wait) before reading the parts. */
    int after_grid;
    /* The split-KV decode's merge only (NULL for fattn_combine): head h's
     * sink logit (natural units) at sinks[h * sinks_sh] joins each row's
     * sum once, after the parts (fattn.h's rule: the parts exclude it). */
    const float *sinks;
    int64_t sinks_sh;
} fattn_cuda_combine_args;

/* The largest head dim the combine kernel takes. */
#define FATTN_CUDA_COMBINE_MAX_D 256

/* The log-sum-exp merge of the parts, one block per row (b, h, i), float32
 * arithmetic: cudaErrorInvalidValue for a head dim or dtype it does not take. */
cudaError_t fattn_cuda_combine(const fattn_cuda_combine_args *a, cudaStream_t stream);

/* The split-KV decode kernel (kernels_cu/decode.cu; backends/cuda/cuda_decode.c
 * plans it): each block takes br packed query rows (the heads of one K/V
 * head's group times the query rows) and one key split of one sequence.
 * Float32 arithmetic on the CUDA cores, every dtype, head dims 1..256. */
typedef struct fattn_cuda_decode_args {
    int dpad;      /* head-dim bucket of the instance: 64, 128 or 256 */
    int br;        /* packed rows per block: 4, 8 or 16 (16: dpad <= 128) */
    /* 1: the instance that rescores (softcap, ALiBi, bias; var.on), else the
     * plain one, which takes the window and sinks */
    int rescore;
    int splits;    /* key splits, grid y; 1: the kernel writes O and lse itself */
    int row_tiles; /* ceil(group * seq_q / br) */
    /* splits > 1: the partial results, float32, row (split, b, h, i) at
     * ((split * batch + b) * heads_q + h) * seq_q + i: ws_o holds head_dim
     * values per row (normalised), ws_lse one natural-log lse (-inf: the
     * split saw no key for the row). Unused (NULL) with one split. */
    float *ws_o, *ws_lse;
} fattn_cuda_decode_args;

/* The smallest decode bucket built that holds head_dim (64 when the 32 or
 * 64 bucket was built, 128, 256), 0 when none. */
int fattn_cuda_decode_dpad(int64_t head_dim);
/* An instance's keys per block tile (the split granularity) and dynamic
 * shared memory; zeros when the instance was not built. rescore: as in
 * fattn_cuda_decode_args. */
void fattn_cuda_decode_shape(fattn_dtype dtype, int dpad, int br, int rescore, int *block_kv,
                             int *smem_bytes);
/* Blocks of an instance resident per SM on the current device. */
cudaError_t fattn_cuda_decode_occupancy(fattn_dtype dtype, int dpad, int br, int rescore,
                                        int *blocks_per_sm);
/* Enqueues the decode kernel (not the combine): cudaErrorInvalidValue for
 * an instance that was not built. */
cudaError_t fattn_cuda_decode(const fattn_cuda_args *a, const fattn_cuda_decode_args *d,
                              cudaStream_t stream);

/* desc->append (kernels_cu/append.cu): row t of k_new and v_new for
 * sequence b becomes key used[b] + t of the cache (a->k and a->v, written
 * here although the attention only reads them), through the page table
 * when paged. Pointers are at the operands' element offsets. A sequence
 * whose new keys break the rules of src/seam/backend.h gets nothing
 * written and its fault recorded (a->rag.added is seq_new). */
typedef struct fattn_cuda_append_args {
    const void *k_new, *v_new;
    int64_t kn_sb, kn_sh, kn_ss, vn_sb, vn_sh, vn_ss;
    int64_t heads_kv;
    int seq_new; /* >= 1, at most seq_kv */
} fattn_cuda_append_args;

cudaError_t fattn_cuda_append(const fattn_cuda_args *a, const fattn_cuda_append_args *n,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FATTN_CUDA_PARAMS_H */
