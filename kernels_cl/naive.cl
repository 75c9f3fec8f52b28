/* The naive baseline's own kernels (OpenCL C 1.2); the two GEMMs around them
 * are CLBlast's. pack_f32 gathers a strided f16/bf16/f32 operand into a dense
 * float32 [B*H][S][D] array that CLBlast can take; softmax_rows turns one row
 * of scores (already multiplied by scale * log2(e)) into probabilities, with
 * the causal mask and the log-sum-exp; unpack_out writes a dense float32
 * output back into the caller's strided O in its storage type, and zero_out
 * writes zeros there. The host builds it after storage.cl. */

#ifndef WG
#define WG 256    /* softmax_rows work-group size, a power of two */
#endif

/* global: (D, S, B*H) where H is the operand's own head count (Hq for Q,
 * Hkv for K and V). */
__kernel void pack_f32(__global const elem_t *x, long off, long sb, long sh, long ss, int H,
                       __global float *out) {
    const int d = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);
    const int D = get_global_size(0), S = get_global_size(1);
    const long src = off + (long)(bh / H) * sb + (long)(bh % H) * sh + (long)s * ss + d;
    out[((long)bh * S + s) * D + d] = LOAD(x, src);
}

__kernel void unpack_out(__global const float *in, __global elem_t *o, long off, long sb, long sh,
                         long ss, int H) {
    const int d = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);
    const int D = get_global_size(0), S = get_global_size(1);
    const long dst = off + (long)(bh / H) * sb + (long)(bh % H) * sh + (long)s * ss + d;
    STORE(o, dst, in[((long)bh * S + s) * D + d]);
}

/* flag[0] = 1 where the float32 [B][H][S][D] array x holds a NaN or an
 * infinity. global: (D, S, B*H). */
__kernel void find_nonfinite(__global const float *x, long off, long sb, long sh, long ss, int H,
                             __global int *flag) {
    const int d = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);
    if (!isfinite(x[off + (long)(bh / H) * sb + (long)(bh % H) * sh + (long)s * ss + d])) flag[0] = 1;
}

/* O = P V over the keys each row sees (causal: key j visible to row i iff
 * j <= i + coff, as in softmax_rows), for pairs bh0,
 * bh0 + 1, ... of P: what the GEMM computes, except that a hidden key's
 * value is not multiplied by its zero weight. V and O are float32 (the f32
 * operands, or the packed copies). global: (D, Sq, pairs). */
__kernel void pv_visible(__global const float *P, __global const float *v, long v_off, long v_sb,
                         long v_sh, long v_ss, __global float *o, long o_off, long o_sb, long o_sh,
                         long o_ss, int Hq, int group, int Sk, int bh0, long coff) {
    const int d = get_global_id(0), i = get_global_id(1), bh = bh0 + get_global_id(2);
    const int Sq = get_global_size(1);
    const int b = bh / Hq, h = bh % Hq, lim = (int)clamp((long)i + coff + 1, 0L, (long)Sk);
    const long pb = ((long)get_global_id(2) * Sq + i) * Sk;
    const long vb = v_off + (long)b * v_sb + (long)(h / group) * v_sh + d;
    float acc = 0.0f;
    for (int j = 0; j < lim; j++) acc = mad(P[pb + j], v[vb + (long)j * v_ss], acc);
    o[o_off + (long)b * o_sb + (long)h * o_sh + (long)i * o_ss + d] = acc;
}

/* Zeros into the caller's O (seq_kv = 0). global: (D, Sq, B*Hq). */
__kernel void zero_out(__global elem_t *o, long off, long sb, long sh, long ss, int H) {
    const int d = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);
    STORE(o, off + (long)(bh / H) * sb + (long)(bh % H) * sh + (long)s * ss + d, 0.0f);
}

/* One work-group per query row of (batch, head) pairs bh0, bh0 + 1, ...:
 * global (WG * Sq, pairs), local (WG, 1); S and P hold those pairs only.
 * Keys j >= the row's limit (causal: key j is visible to row i iff
 * j <= i + coff, coff = Sk - Sq bottom-right, 0 top-left; the host clamps
 * coff to [-Sq, Sk], so the long sum cannot overflow) and -inf scores get
 * probability 0; a row with no finite score gets all zeros and lse = -inf;
 * a NaN or +inf score makes the row's P and lse NaN (as in flash_fwd.cl). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void softmax_rows(__global const float *S, __global float *P, __global float *lse, long l_off,
                  long l_sb, long l_sh, long l_ss, int has_lse, int Hq, int Sq, int Sk, int causal, int bh0,
                  long coff) {
    __local float red[WG];
    const int tid = get_local_id(0), i = get_group_id(0), bh = bh0 + get_group_id(1);
    const long base = ((long)get_group_id(1) * Sq + i) * Sk;
    const int lim = causal ? (int)clamp((long)i + coff + 1, 0L, (long)Sk) : Sk;

    float mx = -INFINITY;
    for (int j = tid; j < lim; j += WG) mx = fmax(mx, S[base + j]);
    red[tid] = mx;
    for (int w = WG / 2; w > 0; w /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < w) red[tid] = fmax(red[tid], red[tid + w]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    mx = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* -inf scores skip exp2: with mx = -inf it would give NaN. */
    float sum = 0.0f;
    for (int j = tid; j < lim; j += WG) sum += S[base + j] == -INFINITY ? 0.0f : exp2(S[base + j] - mx);
    red[tid] = sum;
    for (int w = WG / 2; w > 0; w /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < w) red[tid] += red[tid + w];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    sum = red[0];

    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int j = tid; j < Sk; j += WG) {
        const float s = j < lim ? S[base + j] : -INFINITY;
        P[base + j] = s == -INFINITY ? 0.0f : exp2(s - mx) * inv;
    }
    if (has_lse && tid == 0)
        lse[l_off + (long)(bh / Hq) * l_sb + (long)(bh % Hq) * l_sh + (long)i * l_ss] =
            sum == 0.0f ? -INFINITY : (mx + log2(sum)) * M_LN2_F;
}
