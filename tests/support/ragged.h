/* Variable-length and paged problems for the tests: builds packed, padded
 * or paged tensors and their index tables from seeded random sequences,
 * runs fattn_forward on them and checks every sequence against the double
 * reference (each sequence as its own dense problem), with outputs
 * poisoned and guarded. Also spoils one table at a time (bad offsets,
 * lengths and pages) for the FATTN_ERR_INDEX_TABLE checks. */
#ifndef FATTN_RAGGED_H
#define FATTN_RAGGED_H

#include <stddef.h>
#include <stdint.h>

#include "fattn.h"
#include "harness.h"

/* How K and V are stored. */
typedef enum rag_kv {
    RAG_KV_DENSE = 0,  /* [batch, heads_kv, seq_kv, D], sequence b at batch index b */
    RAG_KV_PACKED = 1, /* [1, heads_kv, total_kv, D] with cu_seqlens_kv */
    RAG_KV_PAGED = 2   /* [num_pages, heads_kv, page_size, D] through a block table */
} rag_kv;

typedef struct rag_case {
    const char *name;
    int64_t batch, heads_q, heads_kv, head_dim;
    /* Query rows per sequence: packed Q and O (cu_seqlens_q) with len_q[b]
     * rows each and a few rows after the last sequence that belong to none;
     * NULL: dense Q [batch, heads_q, seq_q, D]. */
    const int32_t *len_q;
    int64_t seq_q; /* dense Q's rows; with len_q, 0 = the longest */
    /* Keys used per sequence; NULL: seq_kv each. With `used`, seqused_kv
     * gives them and the cache holds more (packed: 3 more rows a sequence;
     * dense: seq_kv rows; paged: the pages). */
    const int32_t *len_kv;
    rag_kv kv;
    int used;
    int64_t seq_kv;    /* the longest (a padded dense cache's length); 0 = from len_kv */
    int64_t page_size; /* RAG_KV_PAGED */
    fattn_causal causal;
    int no_lse;  /* pass no lse tensor */
    int bshd;    /* heads interleaved per row (BSHD) with padded rows, else BHSD */
    float scale; /* 0: the default */
    /* The dtypes a test runs it in: bits 1 << FATTN_F32 etc.; 0 = all.
     * (Each dtype and head-dim bucket is a kernel build on GPU backends,
     * seconds each on PoCL: rare head dims run in one dtype.) */
    unsigned dtypes;
} rag_case;

typedef struct rag_problem rag_problem;

/* Builds case c in dtype on ctx: inputs, tables, buffers and the reference.
 * FATTN_ERR_OUT_OF_MEMORY or a buffer call's status on failure. */
fattn_status rag_build(fattn_context *ctx, const rag_case *c, fattn_dtype dtype, uint64_t seed,
                       rag_problem **out);
void rag_free(rag_problem *rp);

/* Poisons O and lse, runs fattn_forward, synchronises, reads the outputs
 * back and fills r (r->seed and tolerances included). Returns the first
 * failing call's status; r is complete only on FATTN_OK. */
fattn_status rag_run(rag_problem *rp, case_result *r);

/* The outputs as the last rag_run read them back (host copies of O's and
 * lse's buffers, guards included; lse NULL without one), and their bytes. */
void rag_outputs(const rag_problem *rp, const void **o, size_t *o_bytes, const void **lse,
                 size_t *lse_bytes);

/* A table spoiled in one way. */
typedef enum rag_fault {
    RAG_CU_Q_DECREASING = 0, /* cu_seqlens_q[2] < cu_seqlens_q[1] */
    RAG_CU_KV_PAST_TOTAL,    /* cu_seqlens_kv[batch] = total_kv + 1 */
    RAG_Q_OVER_SEQ_Q,        /* desc->seq_q one less than the longest sequence */
    RAG_KV_OVER_SEQ_KV,      /* desc->seq_kv one less than the longest packed span */
    RAG_USED_OVER_CACHE,     /* seqused_kv[b] one more than the sequence holds */
    RAG_PAGE_NEGATIVE,       /* a used page -1 */
    RAG_PAGE_PAST_END,       /* a used page num_pages */
    RAG_FAULT_COUNT
} rag_fault;

const char *rag_fault_name(rag_fault f);
/* The table a message about the fault must name (e.g. "cu_seqlens_q"). */
const char *rag_fault_table(rag_fault f);
/* 1 when the problem has the table the fault spoils. */
int rag_fault_applies(const rag_problem *rp, rag_fault f);

/* What a call with a spoiled table did. */
typedef struct rag_fault_result {
    fattn_status forward;     /* fattn_forward's status */
    fattn_status reported;    /* the error: forward's, or the next synchronize's */
    char message[1024];       /* fattn_error_message after the error */
    int64_t guard_broken;     /* bytes outside O's and lse's views that changed */
    int64_t untouched_broken; /* bytes of O and lse that changed (when forward failed) */
} rag_fault_result;

/* Spoils the table, runs and synchronises (poisoned outputs), reads the
 * outputs back, then restores the table. Returns a buffer call's failure,
 * else FATTN_OK with *res filled. */
fattn_status rag_run_fault(rag_problem *rp, rag_fault f, rag_fault_result *res);

#endif
