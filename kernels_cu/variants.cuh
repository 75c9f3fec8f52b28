// The attention variants on the device (params.h's fattn_cuda_var; fattn.h
// states the rules): the visible keys of a row (causal and the window),
// a score's softcap, ALiBi and bias in natural units, and a sink folded
// into a row's softmax at the end. Kernels call these only in their
// variant instances, under block-uniform branches on the arguments.
#ifndef FATTN_VARIANTS_CUH
#define FATTN_VARIANTS_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "device_util.cuh"

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// Whether key j (< kv_len, the sequence's keys) is visible to row i: causal
// (j <= i + off) and the window (i + woff - left <= j <= i + woff + right,
// woff = len_kv - len_q of the sequence). int64: the host clamps the window
// sides (params.h), so the sums cannot overflow.
__device__ __forceinline__ bool var_visible(const fattn_cuda_args &a, int64_t i, int64_t j,
                                            int64_t kv_len, int64_t off, int64_t woff) {
    return j < kv_len && (!a.causal || j <= i + off) &&
           (a.var.window_right < 0 || j <= i + woff + a.var.window_right) &&
           (a.var.window_left < 0 || j >= i + woff - a.var.window_left);
}

// Whether any variant changes a score (softcap, ALiBi, bias) rather than
// only hiding keys (window) or joining the denominator (sinks).
__device__ __forceinline__ bool var_rescore(const fattn_cuda_args &a) {
    return a.var.softcap > 0.f || a.var.alibi || a.var.bias;
}

// ALiBi's slope of sequence b, query head h; 0 without ALiBi.
__device__ __forceinline__ float var_slope(const fattn_cuda_args &a, int64_t b, int64_t h) {
    return a.var.alibi ? a.var.alibi[b * a.var.alibi_sb + h * a.var.alibi_sh] : 0.f;
}

// The bias element of (b, h) at row i, key 0 (the sequence's own); key j
// lies j * bias_sd further.
__device__ __forceinline__ int64_t var_bias_row(const fattn_cuda_args &a, int64_t b, int64_t h,
                                                int64_t i) {
    return b * a.var.bias_sb + h * a.var.bias_sh + i * a.var.bias_ss;
}

// The bias element at `at`, in float32.
__device__ __forceinline__ float var_bias(const fattn_cuda_args &a, int64_t at) {
    const fattn_cuda_var &v = a.var;
    if (v.bias_dtype == FATTN_F32) return static_cast<const float *>(v.bias)[at];
    const unsigned short e = static_cast<const unsigned short *>(v.bias)[at];
    if (v.bias_dtype == FATTN_F16) return __half2float(__ushort_as_half(e));
    return __bfloat162float(__ushort_as_bfloat16(e));
}

// Two f16/bf16 bias elements packed in w (the lower first), in float32.
__device__ __forceinline__ float2 var_bias_u32(const fattn_cuda_args &a, unsigned w) {
    if (a.var.bias_dtype == FATTN_F16)
        return make_float2(__half2float(__ushort_as_half((unsigned short)(w & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(w >> 16))));
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Elements at and after `at` (even, the pair aligned: 8 bytes f32, 4 bytes
// f16/bf16), in float32: one load for both.
__device__ __forceinline__ float2 var_bias_pair(const fattn_cuda_args &a, int64_t at) {
    const fattn_cuda_var &v = a.var;
    if (v.bias_dtype == FATTN_F32)
        return *reinterpret_cast<const float2 *>(static_cast<const float *>(v.bias) + at);
    return var_bias_u32(
        a, *reinterpret_cast<const unsigned *>(static_cast<const unsigned short *>(v.bias) + at));
}

// c2 tanh(u / (2 log2 e)) as c2 (1 - 2 / (2^u + 1)): two MUFU operations and
// no division. Its absolute error is a few 1e-7 of c2 (2^u is within
// 2^-22 relative, the reciprocal within an ulp), which is what a capped
// score needs; tanhf's relative accuracy costs a long polynomial, and
// tanh.approx.f32 (2^-11 relative) would move a capped logit of 30 by 0.015.
// u = +inf gives c2, -inf -c2; NaN stays NaN.
__device__ __forceinline__ float var_tanh2(float u, float c2) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(ex2(u) + 1.f));
    return fmaf(r, -2.f * c2, c2);
}

// Score x (natural units: scale * q.k) of a visible key j of row i, after
// the softcap (first; -inf -> -softcap, NaN stays), ALiBi (-slope * |dist|,
// dist = i + woff - j) and the bias (element bias_at: var_bias_row plus j
// * bias_sd), in that order. Row i and key j must lie in the sequence
// (the bias is read).
__device__ __forceinline__ float var_score(const fattn_cuda_args &a, float x, float slope,
                                           float dist, int64_t bias_at) {
    if (a.var.softcap > 0.f) x = a.var.softcap * tanhf(x / a.var.softcap);
    if (a.var.alibi) x -= slope * fabsf(dist);
    if (a.var.bias) x += var_bias(a, bias_at);
    return x;
}

// Head h's sink logit in log2 units, -inf without sinks.
__device__ __forceinline__ float var_sink_log2(const fattn_cuda_args &a, int64_t h) {
    return a.var.sinks ? a.var.sinks[h * a.var.sinks_sh] * kLog2e : -INFINITY;
}

// A row whose keys gave max m and sum l = sum exp2(s - m) (log2 units)
// takes the sink sink2 (log2 units) into its denominator: *inv becomes
// what the row's accumulator (relative to m) is multiplied by, *lse the
// natural-log lse. A row with no key (m = -inf) gets O = 0 and lse = the
// sink; a NaN l stays NaN in both. Without a sink (sink2 = -inf) nothing
// changes.
__device__ __forceinline__ void var_sink_fold(float m, float l, float sink2, float *inv,
                                              float *lse) {
    const float mm = fmaxf(m, sink2);
    if (sink2 == -INFINITY || mm == -INFINITY) return;
    const float sc = m == -INFINITY ? 0.f : ex2(m - mm);
    const float total = l * sc + ex2(sink2 - mm);
    *inv = sc / total;
    *lse = (mm + log2f(total)) * kLn2;
}

}   // namespace

#endif   // FATTN_VARIANTS_CUH
