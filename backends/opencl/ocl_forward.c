/* The OpenCL backend's planner: its table of kernel variants, and the tiled
 * kernel's row (kernels_cl/flash_fwd.cl): the tile choice and the launch.
 * A new kernel family is a row here plus its file; "is it supported" and
 * "what runs" are both answered by the row's accept. */
#include <stdio.h>

#include "ocl_common.h"

/* The tiled variant's plan: the tiles, as ocl_choose_tiles chose them, and
 * the kernel accept built for them (owned by the context's program cache,
 * which outlives the call), so the run neither looks it up nor queries it. */
typedef struct ocl_tiled_plan {
    ocl_tiles t;
    cl_kernel k;
} ocl_tiled_plan;
FATTN_PLAN_FITS(ocl_tiled_plan);

/* The kernel build for these tiles and dtype (from the program cache, else
 * compiled), checked against its own work-group limit, which can be below
 * the device's (registers per work-item): accept asks, so that a plan the
 * memory report shows is one that runs. */
static fattn_status tiled_kernel(ocl_state *s, const fattn_problem *p, const ocl_tiles *t,
                                 cl_kernel *k, fattn_msg *msg) {
    char options[256], var[80];
    ocl_variant_options(p, fattn_variants_used(p), t->dvpad, var, sizeof var);
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DDTYPE=%d -DDPAD=%d -DBQ=%d -DBKV=%d -DTQ=%d -DTK=%d%s%s",
             (int)p->dtype, t->dpad, t->bq, t->bkv, t->tq, t->tk, ocl_ragged_option(p), var);
    fattn_status st = ocl_get_kernel(&s->cache, s->context, s->dev.device, "flash_fwd.cl",
                                     "flash_fwd", options, k, msg);
    if (st != FATTN_OK) return st;
    const size_t nt = (size_t)t->tq * (size_t)t->tk;
    size_t kernel_wg = 0;
    OCL_TRY(msg, clGetKernelWorkGroupInfo(*k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_wg, &kernel_wg, NULL));
    if (nt > kernel_wg)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "tiles %dx%d need %zu work-items per group; this kernel build allows %zu "
                          "on this device (try smaller tiles through FATTN_PARAM_TILE_Q / "
                          "FATTN_PARAM_TILE_KV or FATTN_OPENCL_TILES)",
                          t->bq, t->bkv, nt, kernel_wg);
    return FATTN_OK;
}

fattn_status ocl_tiled_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg) {
    ocl_state *s = state;
    const int64_t int_max = FATTN_INT32_MAX;
    if (p->seq_q > int_max - 1024 || p->seq_kv > int_max || p->batch * p->heads_q > int_max)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the OpenCL kernel indexes rows and heads with 32-bit integers: seq_q, "
                          "seq_kv and batch * heads_q must stay below 2^31");
    ocl_tiles t;
    fattn_status st =
        ocl_choose_tiles(&s->limits, s->settings.opencl_tiles, (int)p->head_dim, (int)p->head_dim_v,
                         p->tune.tile_q, p->tune.tile_kv, &t, msg);
    if (st != FATTN_OK) return st;
    cl_kernel k;
    if ((st = tiled_kernel(s, p, &t, &k, msg)) != FATTN_OK) return st;
    ocl_tiled_plan *tp = FATTN_PLAN_AREA(plan, ocl_tiled_plan);
    tp->t = t;
    tp->k = k;
    plan->tiling.tile_q = t.bq;
    plan->tiling.tile_kv = t.bkv;
    /* Resident groups: as many as local memory allows on each compute unit. */
    const size_t per_cu = s->limits.local_mem / ocl_local_bytes(&t);
    plan->tiling.concurrent_groups =
        (int64_t)s->limits.compute_units * (int64_t)(per_cu ? per_cu : 1);
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

fattn_status ocl_forward_args(cl_kernel k, cl_uint *a, const fattn_problem *p, fattn_msg *msg) {
    const fattn_operand *ops[5] = {&p->q, &p->k, &p->v, &p->o, &p->lse};
    for (int i = 0; i < 5; i++) {
        cl_mem m = i < 4 || p->has_lse ? ocl_mem_of(ops[i]) : NULL;
        cl_long f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head,
                        ops[i]->stride_seq};
        OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof m, &m));
        for (int j = 0; j < 4; j++) OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof f[j], &f[j]));
    }
    /* Ragged: seq_q and seq_kv are the longest sequences (the grid's size);
     * each group resolves its own (kernels_cl/ragged.cl). */
    const cl_int ints[5] = {p->has_lse, (cl_int)p->heads_q, (cl_int)(p->heads_q / p->heads_kv),
                            (cl_int)p->seq_q, (cl_int)p->seq_kv};
    for (int i = 0; i < 5; i++) OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof(cl_int), &ints[i]));
    const cl_int D = (cl_int)p->head_dim, causal = p->causal;
    const cl_float scale = p->scale_log2; /* scale * log2(e): the kernels use exp2 */
    const cl_long causal_offset = ocl_causal_offset(p);
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof D, &D));
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof scale, &scale));
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof causal, &causal));
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof causal_offset, &causal_offset));
    return FATTN_OK;
}

fattn_status ocl_tiled_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                           fattn_msg *msg) {
    ocl_state *s = state;
    const ocl_tiled_plan *tp = FATTN_PLAN_AREA(plan, const ocl_tiled_plan);
    const ocl_tiles t = tp->t;
    cl_kernel k = tp->k;
    cl_uint a = 0;
    fattn_status st = ocl_forward_args(k, &a, p, msg);
    if (st != FATTN_OK) return st;
    st = ocl_variant_args(k, &a, p, fattn_variants_used(p), msg);
    if (st != FATTN_OK) return st;
    if (p->rag.on && (st = ocl_ragged_args(s, k, &a, p, msg)) != FATTN_OK) return st;

    const size_t nt = (size_t)t.tq * (size_t)t.tk;
    const size_t global[2] = {(size_t)((p->seq_q + t.bq - 1) / t.bq) * nt,
                              (size_t)(p->batch * p->heads_q)};
    const size_t local[2] = {nt, 1};
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}

/* The variants, most capable first within an op (fattn_plan_from_table). */
static const fattn_variant variants[] = {
    {"decode-matrix", FATTN_OP_FORWARD, ocl_decode_mma_accept, ocl_decode_run}, /* decode_mma.cl + combine.cl */
    {"decode", FATTN_OP_FORWARD, ocl_decode_accept, ocl_decode_run},    /* decode.cl + combine.cl */
    {"matrix", FATTN_OP_FORWARD, ocl_mma_accept, ocl_mma_run},          /* mma_*.cl + flash_mma.cl */
    {"tiled", FATTN_OP_FORWARD, ocl_tiled_accept, ocl_tiled_run},       /* flash_fwd.cl */
    {"naive", FATTN_OP_FORWARD_NAIVE, ocl_naive_accept, ocl_naive_run}, /* CLBlast + naive.cl */
    {"combine", FATTN_OP_COMBINE, ocl_combine_accept, ocl_combine_run}, /* combine.cl */
};

fattn_status ocl_plan(void *state, const fattn_problem *p, fattn_plan *plan, fattn_msg *msg) {
    return fattn_plan_from_table(variants, (int)(sizeof variants / sizeof variants[0]), state, p,
                                 plan, msg);
}

fattn_status ocl_run(void *state, const fattn_problem *p, const fattn_plan *plan, fattn_msg *msg) {
    return fattn_run_from_table(variants, (int)(sizeof variants / sizeof variants[0]), state, p,
                                plan, msg);
}
