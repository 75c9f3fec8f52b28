/* The reference every backend is tested against: naive attention that
 * materialises one row of scores at a time and accumulates in double. */
#ifndef FATTN_REFERENCE_H
#define FATTN_REFERENCE_H

#include "fattn.h"

/* A host tensor: base pointer plus fattn_tensor's element offset and strides. */
typedef struct ref_view {
    const void *base;
    fattn_dtype dtype;
    int64_t offset, stride_batch, stride_head, stride_seq;
} ref_view;

/* Element (b, h, s, d) of a view, converted exactly to double. */
double ref_get(const ref_view *v, int64_t b, int64_t h, int64_t s, int64_t d);

/* Keys j < ref_key_limit(desc, i) are the ones query row i sees, clamped to
 * 0..seq_kv, written from fattn.h's definition and not from the library's:
 * with causal, key j is visible iff j <= i + off, where off = seq_kv - seq_q
 * (FATTN_CAUSAL_BOTTOM_RIGHT) or 0 (FATTN_CAUSAL_TOP_LEFT). */
int64_t ref_key_limit(const fattn_attention_desc *desc, int64_t i);

/* out: [batch][heads_q][seq_q][head_dim], lse: [batch][heads_q][seq_q]
 * (-INFINITY for a row that sees no key). The scale is resolved as the
 * library documents (0 means 1/sqrt(head_dim)); causal is either alignment. */
void ref_attention(const fattn_attention_desc *desc, const ref_view *q, const ref_view *k,
                   const ref_view *v, double *out, double *lse);

#endif
