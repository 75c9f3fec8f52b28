/* A fake OpenCL backend module for test_modules. Built once per variant:
 * FAKE_GOOD is a usable table (one fake device), each other variant breaks
 * one rule the registry must check. Nothing here touches OpenCL. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static void fake_probe(const fattn_settings *settings, fattn_probe *out) {
    (void)settings;
    out->device_count = 1;
    out->gpu_count = 0;
    out->auto_score = 0; /* a CPU-like device: never chosen automatically */
    out->reason[0] = '\0';
}

static fattn_status fake_device_name(const fattn_settings *settings, int device, char *buf,
                                     size_t len, fattn_msg *msg) {
    (void)settings;
    (void)device;
    (void)msg;
    snprintf(buf, len, "fake module device");
    return FATTN_OK;
}

static fattn_status fake_open(const fattn_open_args *args, void **state, fattn_msg *msg) {
    (void)args;
    (void)msg;
    *state = NULL;
    return FATTN_OK;
}

static void fake_close(void *state) { (void)state; }

static fattn_status fake_alloc(void *state, size_t bytes, void **mem, fattn_msg *msg) {
    (void)state;
    *mem = malloc(bytes);
    return *mem ? FATTN_OK : fattn_fail(msg, FATTN_ERR_OUT_OF_MEMORY, "fake: no memory");
}

static void fake_free(void *state, void *mem, int owned) {
    (void)state;
    if (owned) free(mem);
}

static fattn_status fake_write(void *state, void *mem, size_t offset, const void *src, size_t bytes,
                               fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy((char *)mem + offset, src, bytes);
    return FATTN_OK;
}

static fattn_status fake_read(void *state, void *mem, size_t offset, void *dst, size_t bytes,
                              fattn_msg *msg) {
    (void)state;
    (void)msg;
    memcpy(dst, (const char *)mem + offset, bytes);
    return FATTN_OK;
}

static void *fake_native(void *state, void *mem) {
    (void)state;
    return mem;
}

static fattn_status fake_region(void *state, void *mem, const void **root, uint64_t *start,
                                fattn_msg *msg) {
    (void)state;
    (void)msg;
    *root = NULL;
    *start = (uint64_t)(uintptr_t)mem;
    return FATTN_OK;
}

static fattn_status fake_plan(void *state, const fattn_problem *p, fattn_plan *plan,
                              fattn_msg *msg) {
    (void)state;
    (void)p;
    (void)plan;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "fake module computes nothing");
}

static fattn_status fake_run(void *state, const fattn_problem *p, const fattn_plan *plan,
                             fattn_msg *msg) {
    (void)state;
    (void)p;
    (void)plan;
    return fattn_fail(msg, FATTN_ERR_UNSUPPORTED, "fake module computes nothing");
}

static fattn_status fake_mark(void *state, void **mark, fattn_msg *msg) {
    (void)state;
    (void)msg;
    *mark = NULL;
    return FATTN_OK;
}

static fattn_backend_vtable table = {
    .abi = FATTN_BACKEND_ABI,
    .size = sizeof(fattn_backend_vtable),
    .kind = FATTN_BACKEND_OPENCL,
    .name = "opencl",
    .probe = fake_probe,
    .device_name = fake_device_name,
    .open = fake_open,
    .close = fake_close,
    .buffer_alloc = fake_alloc,
    .buffer_free = fake_free,
    .buffer_write = fake_write,
    .buffer_read = fake_read,
    .buffer_native = fake_native,
    .buffer_region = fake_region,
    .plan = fake_plan,
    .run = fake_run,
};

#ifndef FAKE_NOSYM
__attribute__((visibility("default"))) const fattn_backend_vtable *fattn_backend_module_v1(void) {
#if defined(FAKE_ABI)
    table.abi = FATTN_BACKEND_ABI - 1;
#elif defined(FAKE_SHORT)
    table.size = offsetof(fattn_backend_vtable, buffer_region); /* built before that slot existed */
#elif defined(FAKE_SLOT)
    table.plan = NULL;
#elif defined(FAKE_NORUN)
    table.run = NULL; /* plans, but nothing can run them */
#elif defined(FAKE_MARKS)
    table.mark = fake_mark; /* without mark_elapsed and mark_free */
#endif
    (void)fake_mark;
    return &table;
}
#else
__attribute__((visibility("default"))) int fattn_not_a_module = 1;
static void *unused_[] = {(void *)&table, (void *)fake_mark};
__attribute__((visibility("default"))) void *fattn_fake_unused(void) { return unused_; }
#endif
