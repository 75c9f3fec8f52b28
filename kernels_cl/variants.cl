/* Attention variants in the OpenCL kernels (include/fattn.h's
 * fattn_mask_desc): sliding window, logit softcap, ALiBi, additive bias,
 * sinks and head_dim_v, the OpenCL side of src/seam/backend.h's
 * fattn_variants. The host prepends it (after ragged.cl) to every kernel
 * file; it is empty unless the build sets FATTN_VAR to the problem's
 * FATTN_VAR_* bits, so each combination is a program of its own and the
 * plain builds do not change. Scores are in the log2 domain (Q pre-scaled by
 * scale * log2(e)), so every additive term is multiplied by log2(e) and the
 * cap is softcap * log2(e). backends/opencl/ocl_variants.c sets VAR_PARAMS. */

#ifndef FATTN_VAR
#define FATTN_VAR 0 /* FATTN_VAR_* bits (src/seam/backend.h) this build runs */
#endif
#ifndef BIAS_DTYPE
#define BIAS_DTYPE 0 /* the bias's storage: 0 = f32, 1 = f16, 2 = bf16 */
#endif

/* The bits, as src/seam/backend.h numbers them. */
#define VAR_WINDOW 1
#define VAR_SOFTCAP 2
#define VAR_ALIBI 4
#define VAR_SINKS 8
#define VAR_BIAS 16
#define VAR_HEAD_DIM_V 32
#define VAR_HAS(bit) ((FATTN_VAR & (bit)) != 0)

#if FATTN_VAR

#if BIAS_DTYPE == 0
typedef float bias_t;
#define BLOAD(p, i) ((p)[i])
#elif BIAS_DTYPE == 1
typedef half bias_t;
#define BLOAD(p, i) vload_half((i), (p))
#else
typedef ushort bias_t;
#define BLOAD(p, i) as_float((uint)(p)[i] << 16)
#endif

/* The variants' kernel arguments, after a kernel's own and before
 * RAGGED_PARAMS: the window (clamped by the host to -1 .. seq_q + seq_kv,
 * so sums stay far inside a long), the cap in log2 units (0: none), the
 * slopes (b, h), the sinks (h), the bias (b, h, i, j) and V's head dim.
 * Buffers a build does not use are NULL. */
#define VAR_PARAMS                                                                                 \
    , long win_left, long win_right, float cap2, __global const float *al, long al_off,            \
        long al_sb, long al_sh, __global const float *snk, long snk_off, long snk_sh,              \
        __global const bias_t *bs, long bs_off, long bs_sb, long bs_sh, long bs_ss, long bs_sd,    \
        int Dv
#define DV_OF(D) (VAR_HAS(VAR_HEAD_DIM_V) ? Dv : (D))

/* The keys row i of a sequence sees, [*lo, hi): hi is the causal limit
 * `lim` (flash_fwd.cl's key_limit) cut by the window's right side; *lo the
 * window's left edge, 0 without one. woff = len_kv - len_q (the window is
 * bottom-right whatever the causal alignment). Both grow with i. */
inline int var_keys(int i, long woff, int lim, long wl, long wr, int *lo) {
    long l = 0, h = lim;
#if VAR_HAS(VAR_WINDOW)
    if (wl >= 0) l = max(l, (long)i + woff - wl);
    if (wr >= 0) h = min(h, (long)i + woff + wr + 1);
#endif
    h = max(h, 0L);
    *lo = (int)min(l, h);
    return (int)h;
}

/* The score of a visible key j for row i (both within the sequence):
 * softcap first, then ALiBi (slope2 = slope * log2(e)), then the bias
 * element at brow + j * bs_sd. The caller masks hidden keys to -inf
 * without calling it, so a hidden key's bias is never read. */
inline float var_score(float s, int i, int j, long woff, float cap2, float slope2,
                       __global const bias_t *bs, long brow, long bs_sd) {
#if VAR_HAS(VAR_SOFTCAP)
    s = cap2 * tanh(s / cap2);
#endif
#if VAR_HAS(VAR_ALIBI)
    s -= slope2 * (float)abs((long)i + woff - j);
#endif
#if VAR_HAS(VAR_BIAS)
    s += BLOAD(bs, brow + j * bs_sd) * M_LOG2E_F;
#endif
    return s;
}

/* Row (b, h)'s slope in log2 units, 0 without ALiBi. */
inline float var_slope(__global const float *al, long al_off, long al_sb, long al_sh, long b,
                       long h) {
#if VAR_HAS(VAR_ALIBI)
    return al[al_off + b * al_sb + h * al_sh] * M_LOG2E_F;
#else
    return 0.0f;
#endif
}

/* Head h's sink in log2 units, -inf without sinks (a sink of -inf is none). */
inline float var_sink(__global const float *snk, long snk_off, long snk_sh, long h) {
#if VAR_HAS(VAR_SINKS)
    return snk[snk_off + h * snk_sh] * M_LOG2E_F;
#else
    return -INFINITY;
#endif
}

/* The end of a row with a sink (log2 units): the row's max m and sum l over
 * its keys become, with the sink joined to the denominator once, the factor
 * its accumulator is multiplied by (*scale_o) and lse in log2 units. A row
 * that saw no key (m -inf, l 0) gets O = 0 and lse = the sink; a NaN sink,
 * m or l makes both NaN. Without a sink (-inf): fattn's plain rule. */
inline float var_finish(float m, float l, float sink2, float *scale_o) {
    if (sink2 == -INFINITY) {
        *scale_o = l == 0.0f ? 0.0f : 1.0f / l;
        return l == 0.0f ? -INFINITY : m + log2(l);
    }
    const float M = fmax(m, sink2); /* fmax drops a NaN m: the NaN then comes through l */
    const float keep = m == -INFINITY ? 0.0f : exp2(m - M);
    const float den = l * keep + exp2(sink2 - M);
    *scale_o = keep / den;
    return M + log2(den);
}

#else
#define VAR_PARAMS
#define DV_OF(D) (D)
#endif /* FATTN_VAR */
