/* The shared case table: every backend's conformance test and the benchmark
 * read it, so a shape that matters is checked everywhere at once. */
#ifndef FATTN_CASES_H
#define FATTN_CASES_H

#include <stddef.h>

#include "fattn.h"

typedef enum case_storage {
    STORE_SEPARATE = 0, /* Q, K, V, O each contiguous in the case's layout */
    STORE_KV_STRIDED,   /* K in the other layout, V with padded rows: K and V strides differ */
    STORE_PACKED_QKV, /* one [batch, seq, 3, heads, dim] buffer (needs seq_q = seq_kv, heads equal) */
} case_storage;

typedef struct fattn_case {
    const char *name;
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
    fattn_causal causal; /* NONE, BOTTOM_RIGHT or TOP_LEFT (cases.c: 0, BR, TL) */
    fattn_layout layout;
    case_storage storage;
    float q_magnitude; /* Q is uniform in +-q_magnitude: large values give large logits */
    float scale;       /* 0 = 1/sqrt(head_dim) */
} fattn_case;

extern const fattn_case fattn_cases[];
extern const size_t fattn_case_count;

#endif
