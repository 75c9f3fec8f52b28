/* Variable-length sequences and paged K/V caches on OpenCL (the rules of
 * src/seam/backend.h, fattn_ragged; the kernels' side is kernels_cl/ragged.cl):
 * the ragged kernel arguments, and the context's fault word, where kernels
 * record a bad entry of a device-resident table, with the vtable's
 * take_fault that reports it at the next synchronising call; and the
 * append of new keys into a cache (kernels_cl/append.cl), which follows
 * the same rules. */
#include <stdio.h>

#include "ocl_common.h"

/* ragged.cl's RAG_HAS_* / RAG_PAGED / RAG_TOP_LEFT. */
enum {
    OCL_RAG_CU_Q = 1,
    OCL_RAG_CU_KV = 2,
    OCL_RAG_USED = 4,
    OCL_RAG_PAGED = 8,
    OCL_RAG_TOP_LEFT = 16,
};

const char *ocl_ragged_option(const fattn_problem *p) {
    /* Paged or not is a build option too (decode.cl specialises on it). */
    if (!p->rag.on) return "";
    return p->rag.page_size > 0 ? " -DFATTN_RAGGED=1 -DFATTN_PAGED=1" : " -DFATTN_RAGGED=1";
}

fattn_status ocl_ragged_args(ocl_state *s, cl_kernel k, cl_uint *a, const fattn_problem *p,
                             fattn_msg *msg) {
    const fattn_ragged *r = &p->rag;
    const fattn_operand *t[4] = {&r->cu_seqlens_q, &r->cu_seqlens_kv, &r->seqused_kv,
                                 &r->block_table};
    const int paged = r->page_size > 0;
    for (int i = 0; i < 4; i++) {
        /* An absent table is a NULL cl_mem (clSetKernelArg allows it), and
         * rg_flags tells the kernel not to read it. */
        const cl_mem m = ocl_mem_of(t[i]);
        const cl_long off = m ? t[i]->offset : 0, sb = m ? t[i]->stride_batch : 0,
                      ss = m ? t[i]->stride_seq : 0;
        OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof m, &m));
        OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof off, &off));
        if (i == 3) OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof sb, &sb));
        OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof ss, &ss));
    }
    const cl_long longs[3] = {r->total_q, r->total_kv, r->num_pages};
    for (int i = 0; i < 3; i++) OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof longs[i], &longs[i]));
    /* Keys are ints (below 2^31), so a larger page puts every key on page 0,
     * as the clamped size does. */
    const int64_t ps = r->page_size > FATTN_INT32_MAX ? FATTN_INT32_MAX : r->page_size;
    const cl_int page_size = (cl_int)(paged ? ps : 1);
    const cl_int flags = (ocl_mem_of(&r->cu_seqlens_q) ? OCL_RAG_CU_Q : 0) |
                         (ocl_mem_of(&r->cu_seqlens_kv) ? OCL_RAG_CU_KV : 0) |
                         (ocl_mem_of(&r->seqused_kv) ? OCL_RAG_USED : 0) |
                         (paged ? OCL_RAG_PAGED : 0) | (r->top_left ? OCL_RAG_TOP_LEFT : 0);
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof page_size, &page_size));
    /* Keys are ints and an append adds at most seq_kv of them. */
    const cl_int added = (cl_int)r->keys_added;
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof flags, &flags));
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof added, &added));
    OCL_TRY(msg, clSetKernelArg(k, (*a)++, sizeof s->fault, &s->fault));
    /* Set before the launch is enqueued: a word read once too often costs a
     * read, one never read loses a fault. */
    s->fault_armed = 1;
    return FATTN_OK;
}

fattn_status ocl_fault_open(ocl_state *s, fattn_msg *msg) {
    cl_int zero = 0, err;
    cl_mem m = clCreateBuffer(s->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero,
                              &zero, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, ocl_status_of(err), "creating the fault word: %s (%d)",
                          ocl_error_name(err), (int)err);
    s->fault = m;
    s->fault_armed = 0;
    return FATTN_OK;
}

void ocl_fault_close(ocl_state *s) {
    if (s->fault_wait) clReleaseEvent(s->fault_wait);
    if (s->fault) clReleaseMemObject(s->fault);
    s->fault_wait = NULL;
    s->fault = NULL;
}

/* Reads the word on s->queue after everything enqueued on it (and after
 * fault_wait, the queues left since the last check), resets it when set,
 * and adds its bits to fault_pending. */
static fattn_status read_word(ocl_state *s, fattn_msg *msg) {
    cl_int word = 0;
    /* On an out-of-order queue the read follows the kernels only behind a
     * barrier; on an in-order one the barrier costs nothing. */
    OCL_TRY(msg, clEnqueueBarrierWithWaitList(s->queue, 0, NULL, NULL));
    OCL_TRY(msg, clEnqueueReadBuffer(s->queue, s->fault, CL_TRUE, 0, sizeof word, &word,
                                     s->fault_wait ? 1 : 0, s->fault_wait ? &s->fault_wait : NULL,
                                     NULL));
    if (s->fault_wait) clReleaseEvent(s->fault_wait);
    s->fault_wait = NULL;
    s->fault_armed = 0;
    if (word) {
        static const cl_int zero = 0;
        OCL_TRY(msg, clEnqueueWriteBuffer(s->queue, s->fault, CL_TRUE, 0, sizeof zero, &zero, 0,
                                          NULL, NULL));
        s->fault_pending |= (unsigned)word;
    }
    return FATTN_OK;
}

fattn_status ocl_fault_switch(ocl_state *s, cl_context qctx, fattn_msg *msg) {
    if (!s->fault) return FATTN_OK; /* during open, before the word exists */
    if (qctx == s->context) {
        /* The new queue's read must also wait for the old queue's launches:
         * a marker there (after the earlier queues' marker) is what it waits on. */
        if (!s->fault_armed) return FATTN_OK;
        cl_event ev;
        OCL_TRY(msg, clEnqueueMarkerWithWaitList(s->queue, s->fault_wait ? 1 : 0,
                                                 s->fault_wait ? &s->fault_wait : NULL, &ev));
        if (s->fault_wait) clReleaseEvent(s->fault_wait);
        s->fault_wait = ev;
        return FATTN_OK;
    }
    /* Another cl_context: the word is remade there. The old one is read
     * first (waiting for its launches; the faults stay pending), and the
     * new one made before anything is released, so a failure changes nothing. */
    cl_int zero = 0, err;
    cl_mem m =
        clCreateBuffer(qctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero, &err);
    if (err != CL_SUCCESS)
        return fattn_fail(msg, ocl_status_of(err), "creating the fault word: %s (%d)",
                          ocl_error_name(err), (int)err);
    fattn_status st = s->fault_armed ? read_word(s, msg) : FATTN_OK;
    if (st != FATTN_OK) {
        clReleaseMemObject(m);
        return st;
    }
    clReleaseMemObject(s->fault);
    s->fault = m;
    return FATTN_OK;
}

fattn_status ocl_take_fault(void *state, fattn_msg *msg) {
    ocl_state *s = state;
    if (s->fault_armed) {
        fattn_status st = read_word(s, msg);
        if (st != FATTN_OK) return st;
    }
    const unsigned bits = s->fault_pending;
    s->fault_pending = 0;
    return bits ? fattn_fault_fail(bits, msg) : FATTN_OK;
}

/* Groups along each dimension of kernels_cl/append.cl at most, and their
 * work-items: the groups stride over what is left. */
#define OCL_APPEND_GROUPS ((int64_t)64)
#define OCL_APPEND_BATCH ((int64_t)1 << 16)
#define OCL_APPEND_WG 64
#define OCL_APPEND_ROWS 8 /* append.cl's AP_ROWS */

fattn_status ocl_append(void *state, const fattn_problem *p, fattn_msg *msg) {
    ocl_state *s = state;
    char options[96];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DDTYPE=%d -DAP_ROWS=%d%s", (int)p->dtype,
             OCL_APPEND_ROWS, ocl_ragged_option(p));
    cl_kernel k;
    fattn_status st = ocl_get_kernel(&s->cache, s->context, s->dev.device, "append.cl", "append",
                                     options, &k, msg);
    if (st != FATTN_OK) return st;
    /* The cache, then the new rows: buffer, element offset, three strides. */
    const fattn_operand *ops[4] = {&p->k, &p->v, &p->k_new, &p->v_new};
    cl_uint a = 0;
    for (int i = 0; i < 4; i++) {
        const cl_mem m = ocl_mem_of(ops[i]);
        const cl_long f[4] = {ops[i]->offset, ops[i]->stride_batch, ops[i]->stride_head,
                              ops[i]->stride_seq};
        OCL_TRY(msg, clSetKernelArg(k, a++, sizeof m, &m));
        for (int j = 0; j < 4; j++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof f[j], &f[j]));
    }
    /* Sizes below 2^31 where they are ints: the planner checked seq_q and
     * seq_kv, and seq_new <= seq_kv (validation). */
    const cl_long longs[2] = {p->batch, p->heads_kv};
    const cl_int ints[4] = {(cl_int)p->seq_new, (cl_int)p->head_dim, (cl_int)p->seq_q,
                            (cl_int)p->seq_kv};
    for (int i = 0; i < 2; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof longs[i], &longs[i]));
    for (int i = 0; i < 4; i++) OCL_TRY(msg, clSetKernelArg(k, a++, sizeof ints[i], &ints[i]));
    if ((st = ocl_ragged_args(s, k, &a, p, msg)) != FATTN_OK) return st;

    size_t kernel_wg = 0;
    OCL_TRY(msg, clGetKernelWorkGroupInfo(k, s->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_wg, &kernel_wg, NULL));
    const size_t wg = kernel_wg < OCL_APPEND_WG ? kernel_wg : OCL_APPEND_WG;
    const int64_t blocks = (p->heads_kv * p->seq_new + OCL_APPEND_ROWS - 1) / OCL_APPEND_ROWS;
    const int64_t g0 = blocks < OCL_APPEND_GROUPS ? blocks : OCL_APPEND_GROUPS;
    const int64_t g1 = p->batch < OCL_APPEND_BATCH ? p->batch : OCL_APPEND_BATCH;
    const size_t global[2] = {(size_t)g0 * wg, (size_t)g1}, local[2] = {wg, 1};
    OCL_TRY(msg, clEnqueueNDRangeKernel(s->queue, k, 2, NULL, global, local, 0, NULL, NULL));
    return FATTN_OK;
}
