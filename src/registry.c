/* Backend registry. The CPU backend is linked in; CUDA and OpenCL live in
 * modules (libfattn-cuda.so, libfattn-opencl.so) opened with dlopen the first
 * time they are asked for, so libfattn itself links no GPU runtime and loads
 * on any machine. A module that is absent or fails to load makes its backend
 * unavailable, with the loader's reason. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "registry.h"

typedef struct module_slot {
    const char *file;          /* module file name, NULL if not built */
    const char *not_built;     /* reason when file is NULL */
    int tried;
    const fattn_backend_vtable *vt;
    char reason[256];
} module_slot;

#ifdef FATTN_CUDA_MODULE
#define CUDA_FILE FATTN_CUDA_MODULE
#else
#define CUDA_FILE NULL
#endif
#ifdef FATTN_OPENCL_MODULE
#define OPENCL_FILE FATTN_OPENCL_MODULE
#else
#define OPENCL_FILE NULL
#endif

static module_slot slots[FATTN_BACKEND_COUNT] = {
    [FATTN_BACKEND_CUDA] = {CUDA_FILE,
                            "fattn was built without the CUDA backend (FATTN_CUDA=OFF or no CUDA "
                            "toolkit at configure time)",
                            0, NULL, ""},
    [FATTN_BACKEND_OPENCL] = {OPENCL_FILE,
                              "fattn was built without the OpenCL backend (FATTN_OPENCL=OFF or no "
                              "OpenCL headers and loader at configure time)",
                              0, NULL, ""},
};
static const fattn_backend_vtable *overrides[FATTN_BACKEND_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Directory of the file that holds this code (libfattn.so, or a program
 * linked statically), with a trailing '/'; "" if unknown. */
static void own_dir(char *dir, size_t len) {
    Dl_info info;
    dir[0] = '\0';
    if (dladdr((void *)&fattn_registry_get, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) + 2 <= len) {
            memcpy(dir, info.dli_fname, (size_t)(slash - info.dli_fname) + 1);
            dir[slash - info.dli_fname + 1] = '\0';
        }
    }
}

/* Tries FATTN_MODULE_DIR, then the library's own directory, then the
 * loader's search path. Keeps the first dlerror for the reason. */
static void *open_module(const char *file, char *reason, size_t len) {
    char path[4096], dir[2048];
    const char *env_dir = fattn_env_module_dir();
    void *h = NULL;
    reason[0] = '\0';
    if (env_dir) {
        snprintf(path, sizeof path, "%s/%s", env_dir, file);
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        snprintf(reason, len, "%s", dlerror());
    }
    own_dir(dir, sizeof dir);
    if (dir[0]) {
        snprintf(path, sizeof path, "%s%s", dir, file);
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        if (!reason[0]) snprintf(reason, len, "%s", dlerror());
    }
    if ((h = dlopen(file, RTLD_NOW | RTLD_LOCAL))) return h;
    if (!reason[0]) snprintf(reason, len, "%s", dlerror());
    return NULL;
}

static void load_slot(module_slot *s, fattn_backend_kind kind) {
    s->tried = 1;
    if (!s->file) {
        snprintf(s->reason, sizeof s->reason, "%s", s->not_built);
        return;
    }
    char why[200];
    void *h = open_module(s->file, why, sizeof why);
    if (!h) {
        snprintf(s->reason, sizeof s->reason, "cannot load %s: %s", s->file, why);
        return;
    }
    fattn_backend_module_fn fn;
    *(void **)&fn = dlsym(h, FATTN_MODULE_SYMBOL);
    const fattn_backend_vtable *vt = fn ? fn() : NULL;
    if (!vt || vt->abi != FATTN_BACKEND_ABI || vt->kind != kind) {
        snprintf(s->reason, sizeof s->reason,
                 "%s is not a fattn %s module of backend ABI %d (stale build?)", s->file,
                 fattn_backend_name(kind), FATTN_BACKEND_ABI);
        dlclose(h);
        return;
    }
    s->vt = vt;   /* the module stays loaded for the life of the process */
}

const fattn_backend_vtable *fattn_registry_get(fattn_backend_kind kind, char *reason,
                                               size_t reason_len) {
    const fattn_backend_vtable *vt = NULL;
    if (reason && reason_len) reason[0] = '\0';
    if ((int)kind <= FATTN_BACKEND_AUTO || kind >= FATTN_BACKEND_COUNT) {
        if (reason) snprintf(reason, reason_len, "no backend of kind %d", (int)kind);
        return NULL;
    }
    pthread_mutex_lock(&lock);
    if (overrides[kind]) {
        vt = overrides[kind];
    } else if (kind == FATTN_BACKEND_CPU) {
        vt = fattn_cpu_backend();
    } else {
        module_slot *s = &slots[kind];
        if (!s->tried) load_slot(s, kind);
        vt = s->vt;
        if (!vt && reason) snprintf(reason, reason_len, "%s", s->reason);
    }
    pthread_mutex_unlock(&lock);
    return vt;
}

void fattn_registry_override(fattn_backend_kind kind, const fattn_backend_vtable *vt) {
    if ((int)kind <= FATTN_BACKEND_AUTO || kind >= FATTN_BACKEND_COUNT) return;
    pthread_mutex_lock(&lock);
    overrides[kind] = vt;
    pthread_mutex_unlock(&lock);
}
