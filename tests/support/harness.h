/* Runs one case of the shared table on a context and checks it against the
 * double reference: random seeded inputs, poisoned outputs, guard elements
 * around O and LSE. Used by the conformance tests, the demo and the bench. */
#ifndef FATTN_HARNESS_H
#define FATTN_HARNESS_H

#include <stdint.h>

#include "cases.h"

typedef struct case_result {
    uint64_t seed;
    double max_err; /* max |O - ref| over all elements (V is in [-1, 1]) */
    double tol;     /* what max_err must stay within for this case and dtype */
    double lse_err; /* max |LSE - ref| / max(1, |ref|) over finite rows */
    double lse_tol;
    int64_t nan_count;    /* O or LSE elements left poisoned (NaN) or NaN from the math */
    int64_t lse_mismatch; /* rows where ref LSE is -inf and ours is not, or vice versa */
    int64_t guard_broken; /* elements outside O and LSE that changed */
    double seconds;       /* host wall time of the forward call, synchronised */
} case_result;

/* HARNESS_TF32: the tiled path with FATTN_FLAG_ALLOW_TF32 (f32 cases), held
 * to HARNESS_TF32_TOL. */
typedef enum harness_path { HARNESS_TILED = 0, HARNESS_NAIVE = 1, HARNESS_TF32 = 2 } harness_path;

/* Tolerance on |O - ref| for a dtype, for logits of order one. */
double harness_tolerance(fattn_dtype dtype);

/* The same for f32 computed in TF32 (O, then LSE relative; see harness.c). */
#define HARNESS_TF32_TOL 3e-3
#define HARNESS_TF32_LSE_TOL 2e-3

/* FATTN_TEST_TF32=1: the flags f32 runs of the variant and ragged suites
 * carry (FATTN_FLAG_ALLOW_TF32, so the OpenCL matrix path takes them), else
 * 0; and the O and LSE tolerances a run of desc's dtype and flags gets. */
unsigned harness_tf32_flags(fattn_dtype dtype);
double harness_tol(const fattn_attention_desc *desc);
double harness_lse_tol(const fattn_attention_desc *desc);

/* Runs case c in dtype on ctx and fills r. Returns the forward call's status
 * (or a buffer call's); r is complete only on FATTN_OK. */
fattn_status harness_run(fattn_context *ctx, const fattn_case *c, fattn_dtype dtype, uint64_t seed,
                         harness_path path, case_result *r);

/* 1 when r is within tolerance with nothing unwritten or overwritten. */
int harness_passed(const case_result *r);

/* Builds the attention description of a case. */
fattn_attention_desc harness_desc(const fattn_case *c, fattn_dtype dtype);

const char *harness_dtype_name(fattn_dtype dtype);

/* Stores x as element i of a host array of dtype t (rounded to nearest even). */
void harness_put(void *base, fattn_dtype t, int64_t i, float x);

#endif
