/* The CUDA backend module's one exported symbol: its vtable, naming which
 * file fills each slot. The only file that sees every layer (cuda_common.h
 * lists them). */
#include "cuda_common.h"

/* What the layers above the device hold in the state goes first: the cuBLAS
 * handle belongs to the device's context. */
static void cuda_close(void *state) {
    if (!state) return;
    cuda_naive_release(state);
    cuda_close_state(state);
}

static const fattn_backend_vtable cuda_vtable = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_CUDA,
    .name = "cuda",
    .native_is_host = 0,
    /* cuda_device.c */
    .probe = cuda_probe,
    .device_name = cuda_device_name,
    .open = cuda_open,
    .close = cuda_close,
    .set_stream = cuda_set_stream,
    .synchronize = cuda_synchronize,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_wrap = cuda_buffer_wrap,
    .buffer_free = cuda_buffer_free,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .buffer_native = cuda_buffer_native,
    .buffer_region = cuda_buffer_region,
    .device_memory = cuda_device_memory,
    .mark = cuda_mark,
    .mark_elapsed = cuda_mark_elapsed,
    .mark_free = cuda_mark_free,
    .take_fault = cuda_take_fault,
    .append = cuda_append,
    /* cuda_plan.c, over the variants in cuda_launch.c, cuda_decode.c, cuda_naive.c and
     * cuda_combine.c */
    .plan = cuda_plan_problem,
    .run = cuda_run,
#if FATTN_CUDA_NCCL
    /* cuda_cp.c */
    .cp_open = cuda_cp_open,
    .cp_close = cuda_cp_close,
    .cp_sendrecv = cuda_cp_sendrecv,
    .cp_allgather = cuda_cp_allgather,
    .cp_wait = cuda_cp_wait,
#endif
};

__attribute__((visibility("default"))) const fattn_backend_vtable *fattn_backend_module_v1(void) {
    return &cuda_vtable;
}
