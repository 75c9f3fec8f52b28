/* Context parallelism's transfers on CUDA (the vtable's cp_ slots): NCCL
 * send/recv pairs and all-gathers on a stream of the link's own, ordered
 * against the context's stream with events. NCCL is not linked: its
 * functions come from the libnccl.so.2 already in the process (the one
 * that made the caller's communicator), else from the one dlopen finds.
 * Built with NCCL's header (FATTN_CUDA_NCCL); without it the slots stay
 * NULL and fattn_cp_create_nccl says so. */
#include "cuda_common.h"

#if FATTN_CUDA_NCCL
#include <dlfcn.h>
#include <pthread.h>

#include <nccl.h>

static struct {
    __typeof__(&ncclSend) send;
    __typeof__(&ncclRecv) recv;
    __typeof__(&ncclAllGather) all_gather;
    __typeof__(&ncclGroupStart) group_start;
    __typeof__(&ncclGroupEnd) group_end;
    __typeof__(&ncclCommCount) count;
    __typeof__(&ncclCommUserRank) user_rank;
    __typeof__(&ncclCommGetAsyncError) async_error;
    __typeof__(&ncclGetErrorString) error_string;
    char error[256];
} nccl;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void open_nccl(void) {
    /* The library that made the communicator, if loaded; else any. */
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
    if (!h) h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nccl.error, sizeof nccl.error, "%s", dlerror());
        return;
    }
    *(void **)&nccl.send = dlsym(h, "ncclSend");
    *(void **)&nccl.recv = dlsym(h, "ncclRecv");
    *(void **)&nccl.all_gather = dlsym(h, "ncclAllGather");
    *(void **)&nccl.group_start = dlsym(h, "ncclGroupStart");
    *(void **)&nccl.group_end = dlsym(h, "ncclGroupEnd");
    *(void **)&nccl.count = dlsym(h, "ncclCommCount");
    *(void **)&nccl.user_rank = dlsym(h, "ncclCommUserRank");
    *(void **)&nccl.async_error = dlsym(h, "ncclCommGetAsyncError");
    *(void **)&nccl.error_string = dlsym(h, "ncclGetErrorString");
    if (!nccl.send || !nccl.recv || !nccl.all_gather || !nccl.group_start || !nccl.group_end ||
        !nccl.count || !nccl.user_rank || !nccl.async_error || !nccl.error_string) {
        snprintf(nccl.error, sizeof nccl.error, "libnccl.so.2 lacks a function fattn uses");
        nccl.send = NULL;
    }
}

typedef struct cuda_cp_link {
    ncclComm_t comm;
    cudaStream_t xfer;    /* the transfers' stream */
    cudaEvent_t ready;    /* the context's stream, before a transfer */
    cudaEvent_t done;     /* the transfer stream, after the last transfer */
} cuda_cp_link;

static fattn_status nccl_fail(fattn_msg *msg, ncclResult_t r, const char *what) {
    return fattn_fail(msg, r == ncclInvalidArgument || r == ncclInvalidUsage
                               ? FATTN_ERR_INVALID_ARGUMENT
                               : FATTN_ERR_DEVICE,
                      "%s: NCCL error %d (%s)", what, (int)r, nccl.error_string(r));
}

static void link_free(cuda_cp_link *l) {
    if (l->xfer) cudaStreamDestroy(l->xfer);
    if (l->ready) cudaEventDestroy(l->ready);
    if (l->done) cudaEventDestroy(l->done);
    free(l);
}

fattn_status cuda_cp_open(void *state, void *comm, void **link, int *ranks, int *rank,
                          fattn_msg *msg) {
    cuda_state *s = state;
    pthread_once(&nccl_once, open_nccl);
    if (!nccl.send)
        return fattn_fail(msg, FATTN_ERR_UNSUPPORTED,
                          "context parallelism needs NCCL (libnccl.so.2) at run time: %s",
                          nccl.error);
    fattn_status st = cuda_use(s, msg);
    if (st) return st;
    ncclResult_t r;
    if ((r = nccl.count((ncclComm_t)comm, ranks)) != ncclSuccess ||
        (r = nccl.user_rank((ncclComm_t)comm, rank)) != ncclSuccess)
        return nccl_fail(msg, r, "reading the communicator's ranks");
    cuda_cp_link *l = calloc(1, sizeof *l);
    if (!l) return fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "the NCCL link");
    l->comm = (ncclComm_t)comm;
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&l->xfer, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&l->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming)) != cudaSuccess) {
        link_free(l);
        return cuda_fail(msg, e, "the transfer stream and its events");
    }
    *link = l;
    return FATTN_OK;
}

void cuda_cp_close(void *state, void *link) {
    if (!link) return;
    cuda_use_quiet(state);
    cudaStreamSynchronize(((cuda_cp_link *)link)->xfer);
    link_free(link);
}

static void *at(const fattn_cp_span *sp) { return (char *)sp->mem + sp->offset; }

/* The transfer stream waits for what the context's stream holds now. */
static fattn_status begin(cuda_state *s, cuda_cp_link *l, fattn_msg *msg) {
    fattn_status st = cuda_use(s, msg);
    if (st) return st;
    cudaError_t e;
    if ((e = cudaEventRecord(l->ready, s->stream)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(l->xfer, l->ready, 0)) != cudaSuccess)
        return cuda_fail(msg, e, "ordering a transfer after the context's stream");
    return FATTN_OK;
}

static fattn_status end(cuda_cp_link *l, ncclResult_t r, const char *what, fattn_msg *msg) {
    if (r != ncclSuccess) return nccl_fail(msg, r, what);
    const cudaError_t e = cudaEventRecord(l->done, l->xfer);
    return e == cudaSuccess ? FATTN_OK : cuda_fail(msg, e, "recording a transfer's end");
}

fattn_status cuda_cp_sendrecv(void *state, void *link, int n, const fattn_cp_span *send,
                              const fattn_cp_span *recv, int to, int from, fattn_msg *msg) {
    cuda_cp_link *l = link;
    fattn_status st = begin(state, l, msg);
    if (st) return st;
    ncclResult_t r = nccl.group_start();
    for (int i = 0; i < n && r == ncclSuccess; i++) {
        r = nccl.send(at(&send[i]), (size_t)send[i].bytes, ncclUint8, to, l->comm, l->xfer);
        if (r == ncclSuccess)
            r = nccl.recv(at(&recv[i]), (size_t)recv[i].bytes, ncclUint8, from, l->comm, l->xfer);
    }
    const ncclResult_t r2 = nccl.group_end();
    return end(l, r != ncclSuccess ? r : r2, "ncclSend/ncclRecv of a K/V slice", msg);
}

fattn_status cuda_cp_allgather(void *state, void *link, int n, const fattn_cp_span *send,
                               const fattn_cp_span *recv, fattn_msg *msg) {
    cuda_cp_link *l = link;
    fattn_status st = begin(state, l, msg);
    if (st) return st;
    ncclResult_t r = nccl.group_start();
    for (int i = 0; i < n && r == ncclSuccess; i++)
        r = nccl.all_gather(at(&send[i]), at(&recv[i]), (size_t)send[i].bytes, ncclUint8, l->comm,
                            l->xfer);
    const ncclResult_t r2 = nccl.group_end();
    return end(l, r != ncclSuccess ? r : r2, "ncclAllGather of the K/V slices", msg);
}

fattn_status cuda_cp_wait(void *state, void *link, fattn_msg *msg) {
    cuda_state *s = state;
    cuda_cp_link *l = link;
    fattn_status st = cuda_use(s, msg);
    if (st) return st;
    const cudaError_t e = cudaStreamWaitEvent(s->stream, l->done, 0);
    if (e != cudaSuccess) return cuda_fail(msg, e, "waiting for a transfer");
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = nccl.async_error(l->comm, &async);
    if (r != ncclSuccess) return nccl_fail(msg, r, "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
        return nccl_fail(msg, async, "the communicator reports a failed transfer");
    return FATTN_OK;
}
#endif
