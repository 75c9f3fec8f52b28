/* fattn_combine on CUDA (FATTN_OP_COMBINE): the variant table's combine
 * row. The kernel (kernels_cu/combine.cu) indexes everything in 64 bits and
 * strides over the rows, so what it refuses is only a head dim above its
 * per-thread accumulators or a dtype it was not built for. One launch on
 * the context's stream; nothing allocated, nothing synchronised. */
#include <string.h>

#include "cuda_common.h"

static int combine_dtype(fattn_dtype t) {
    return t == FATTN_F32 || t == FATTN_F16 || t == FATTN_BF16;
}

fattn_status cuda_combine_accept(void *state, const fattn_problem *p, fattn_plan *plan,
                                 fattn_msg *msg) {
    (void)state;
    if (p->head_dim < 1 || p->head_dim > FATTN_CUDA_COMBINE_MAX_D)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "head dim %lld: the CUDA combine kernel takes 1..%d",
                          (long long)p->head_dim, FATTN_CUDA_COMBINE_MAX_D);
    if (!combine_dtype(p->part_dtype) || !combine_dtype(p->dtype))
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "the CUDA combine kernel takes f32, f16 and bf16 (parts %d, output %d)",
                          (int)p->part_dtype, (int)p->dtype);
    memset(FATTN_PLAN_AREA(plan, cuda_plan), 0, sizeof(cuda_plan));
    /* No tiles: one block per row, no workspace. */
    plan->tiling.tile_q = 0;
    plan->tiling.tile_kv = 0;
    plan->tiling.concurrent_groups = 0;
    plan->tiling.workspace_bytes = 0;
    return FATTN_OK;
}

/* An operand's first element. */
static const void *at(const fattn_operand *op, int64_t es) {
    return (const char *)cuda_ptr(op) + (size_t)op->offset * (size_t)es;
}

fattn_status cuda_combine_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                              fattn_msg *msg) {
    cuda_state *s = state;
    (void)plan;
    fattn_status st = cuda_use(s, msg);
    if (st != FATTN_OK) return st;
    fattn_cuda_combine_args a;
    memset(&a, 0, sizeof a);
    a.part_o = at(&p->part_o, fattn_esize(p->part_dtype));
    a.part_lse = (const float *)at(&p->part_lse, sizeof(float));
    a.o = (void *)at(&p->o, fattn_esize(p->dtype));
    a.lse = p->has_lse ? (float *)at(&p->lse, sizeof(float)) : NULL;
    a.po_sb = p->part_o.stride_batch, a.po_sh = p->part_o.stride_head;
    a.po_ss = p->part_o.stride_seq, a.po_ps = p->part_o_stride;
    a.pl_sb = p->part_lse.stride_batch, a.pl_sh = p->part_lse.stride_head;
    a.pl_ss = p->part_lse.stride_seq, a.pl_ps = p->part_lse_stride;
    a.o_sb = p->o.stride_batch, a.o_sh = p->o.stride_head, a.o_ss = p->o.stride_seq;
    a.l_sb = p->lse.stride_batch, a.l_sh = p->lse.stride_head, a.l_ss = p->lse.stride_seq;
    a.batch = p->batch;
    a.heads = p->heads_q;
    a.seq = p->seq_q;
    a.parts = p->parts;
    a.head_dim = (int)p->head_dim; /* 1..256: the accept's check */
    a.part_dtype = p->part_dtype;
    a.dtype = p->dtype;
    const cudaError_t err = fattn_cuda_combine(&a, s->stream);
    return err == cudaSuccess ? FATTN_OK : cuda_fail(msg, err, "the combine kernel");
}
