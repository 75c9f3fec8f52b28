/* fattn_combine on OpenCL (FATTN_OP_COMBINE): the variant table's combine
 * row and its launch of kernels_cl/combine.cl. The kernel indexes in longs
 * and its groups stride over the rows, so it takes any sizes and strides;
 * what it refuses is a head dim above its per-work-item accumulators.
 *
 * The parts' dtype and the output's may differ: the program is built per
 * (part dtype, output dtype) pair, DTYPE naming the output as in every
 * kernel file (storage.cl's elem_t and STORE) and PART_DTYPE the parts, so
 * the inner loop has no per-element dtype switch, the bf16 rounding is
 * storage.cl's own, and at most nine small programs (per work-group size)
 * go through the program cache.
 *
 * The split-KV decode of packed query rows (a ragged problem with
 * cu_seqlens_q, ocl_decode.c) runs a ragged build of the same kernel, which
 * reads the offsets to place each sequence's rows in O and lse; the public
 * fattn_combine never has one. */
#include <stdio.h>

#include "ocl_common.h"

/* combine.cl's COMBINE_MAX_D. */
#define OCL_COMBINE_MAX_D 256
/* Work-items per row, at most: a head dim of 64 is one element each. */
#define OCL_COMBINE_WG 64
/* Groups launched at most; beyond it they stride over the rows. */
#define OCL_COMBINE_MAX_GROUPS ((int64_t)1 << 16)

/* The combine's plan: the work-group size (a power of two, WG in combine.cl). */
typedef struct ocl_combine_plan {
    int wg;
} ocl_combine_plan;
FATTN_PLAN_FITS(ocl_combine_plan);

static int combine_dtype(fattn_dtype t) {
    return t == FATTN_F32 || t == FATTN_F16 || t == FATTN_BF16;
}

fattn_status ocl_combine_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                fattn_msg *msg) {
    const ocl_state *s = state;
    if (p->head_dim < 1 || p->head_dim > OCL_COMBINE_MAX_D)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: the OpenCL combine kernel takes 1..%d",
                          (long long)p->head_dim, OCL_COMBINE_MAX_D);
    if (!combine_dtype(p->part_dtype) || !combine_dtype(p->dtype))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL combine kernel takes f32, f16 and bf16 (parts %d, output %d)",
                          (int)p->part_dtype, (int)p->dtype);
    /* softmax_wg: the largest power of two <= 256 the device takes in a group. */
    const int wg = s->limits.softmax_wg < OCL_COMBINE_WG ? s->limits.softmax_wg : OCL_COMBINE_WG;
    FATTN_PLAN_AREA(plan, ocl_combine_plan)->wg = wg > 0 ? wg : 1;
    /* No tiles: one group per row, no workspace. */
    plan->tiling.tile_q = 0;
    plan->tiling.tile_kv = 0;
    plan->tiling.concurrent_groups = 0;
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

fattn_status ocl_combine_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg) {
    ocl_state *s = state;
    const int wg = FATTN_PLAN_AREA(plan, const ocl_combine_plan)->wg;
    fattn_status st;
    const fattn_operand *cu_q = &p->rag.cu_seqlens_q;
    const int packed = p->rag.on && ocl_mem_of(cu_q) != NULL;
    /* The split-KV decode's merge of a problem with sinks (its copy of the
     * problem keeps p->var; fattn_combine's has none). */
    const int sinks = (fattn_variants_used(p) & FATTN_VAR_SINKS) != 0;
    char options[128];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DDTYPE=%d -DPART_DTYPE=%d -DWG=%d%s%s",
             (int)p->dtype, (int)p->part_dtype, wg, packed ? " -DFATTN_RAGGED=1" : "",
             sinks ? " -DSINKS=1" : "");
    cl_kernel k;
    if ((st = ocl_get_kernel(&s->cache, s->context, s->dev.device, "combine.cl", "combine", options,
                             &k, msg)) != FATTN_OK)
        return st;

    /* Operands in the kernel's order: the O parts and the lse parts with
     * their part strides, then O and the lse (NULL without has_lse). */
    const fattn_operand *ops[4] = {&p->part_o, &p->part_lse, &p->o, &p->lse};
    const int64_t part_stride[2] = {p->part_o_stride, p->part_lse_stride};
    cl_uint a = 0;
    for (int i = 0; i < 4; i++) {
        cl_mem m = i < 3 || p->has_lse ? ocl_mem_of(ops[i]) : NULL;
        const cl_long f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head,
                              ops[i]->stride_seq};
        OCL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int j = 0; j < 4; j++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof f[j], &f[j]));
        if (i < 2) {
            const cl_long ps = part_stride[i];
            OCL_TRY(msg, clSetKernelArg(k, a++, sizeof ps, &ps));
        }
    }
    const cl_int has_lse = p->has_lse, D = (cl_int)p->head_dim; /* 1..256: the accept's check */
    const int64_t rows = p->batch * p->heads_q * p->seq_q;      /* validated: no overflow */
    const cl_long longs[4] = {p->heads_q, p->seq_q, rows, p->parts};
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof has_lse, &has_lse));
    for (int i = 0; i < 4; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof longs[i], &longs[i]));
    OCL_TRY(msg, clSetKernelArg(k, a++, sizeof D, &D));
    if (sinks) {
        const fattn_operand *sk = &p->var.sinks;
        const cl_mem m = ocl_mem_of(sk);
        const cl_long f[2] = {sk->offset, sk->stride_head};
        OCL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int i = 0; i < 2; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof f[i], &f[i]));
    }
    if (packed) {
        const cl_mem m = ocl_mem_of(cu_q);
        const cl_long f[3] = {cu_q->offset, cu_q->stride_seq, p->rag.total_q};
        OCL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int i = 0; i < 3; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof f[i], &f[i]));
    }

    /* The kernel's own limit can be below the device's. */
    size_t kernel_wg = 0;
    OCL_TRY(msg, clGetKernelWorkGroupInfo(k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_wg, &kernel_wg, NULL));
    if ((size_t)wg > kernel_wg)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the combine kernel needs %d work-items per group; this build allows "
                          "%zu on this device",
                          wg, kernel_wg);
    const int64_t groups = rows < OCL_COMBINE_MAX_GROUPS ? rows : OCL_COMBINE_MAX_GROUPS;
    const size_t global = (size_t)groups * (size_t)wg, local = (size_t)wg;
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 1, NULL, &global, &local, 0, NULL, NULL));
    return FATTN_OK;
}
