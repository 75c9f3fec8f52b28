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
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "registry.h"

typedef struct module_slot {
    /* How much FATTN_BACKEND_AUTO prefers the backend, at most: its probe's
     * auto_score never exceeds it. A new backend is one row here. */
    int auto_rank;
    const char *file;      /* module file name, NULL if not built */
    const char *not_built; /* reason when file is NULL */
    int tried;
    const fattn_backend_vtable *vt;
    char reason[512];
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
    [FATTN_BACKEND_CPU] = {100, NULL, NULL, 1, NULL, ""},
    [FATTN_BACKEND_CUDA] = {300, CUDA_FILE,
                            "fattn was built without the CUDA backend (FATTN_CUDA=OFF or no CUDA "
                            "toolkit at configure time)",
                            0, NULL, ""},
    [FATTN_BACKEND_OPENCL] = {200, OPENCL_FILE,
                              "fattn was built without the OpenCL backend (FATTN_OPENCL=OFF or no "
                              "OpenCL headers and loader at configure time)",
                              0, NULL, ""},
};
static const fattn_backend_vtable *overrides[FATTN_BACKEND_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char api_module_dir[2048]; /* fattn_set_module_dir; "" = not set */

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

/* What is wrong with a module's table, or NULL when the core can use it.
 * The ABI number is read first: it sits at the same place in every version,
 * and says how to read the rest. */
static const char *table_problem(const fattn_backend_vtable *vt, fattn_backend_kind kind, char *buf,
                                 size_t len) {
    if (!vt) return "its " FATTN_MODULE_SYMBOL "() returned no table";
    if (vt->abi != FATTN_BACKEND_ABI) {
        snprintf(buf, len,
                 "it is built for backend ABI %d, this libfattn needs %d (a stale build?)", vt->abi,
                 FATTN_BACKEND_ABI);
        return buf;
    }
    if (vt->size < sizeof *vt) {
        snprintf(buf, len, "its table is %zu bytes, this libfattn needs %zu", vt->size, sizeof *vt);
        return buf;
    }
    if (vt->kind != kind) {
        snprintf(buf, len, "it is a module of backend %d, not %s", (int)vt->kind,
                 fattn_backend_name(kind));
        return buf;
    }
    /* Slots the core calls without checking. */
    const struct {
        const char *name;
        int set;
    } required[] = {
        {"name", vt->name != NULL},
        {"probe", vt->probe != NULL},
        {"device_name", vt->device_name != NULL},
        {"open", vt->open != NULL},
        {"close", vt->close != NULL},
        {"buffer_alloc", vt->buffer_alloc != NULL},
        {"buffer_free", vt->buffer_free != NULL},
        {"buffer_write", vt->buffer_write != NULL},
        {"buffer_read", vt->buffer_read != NULL},
        {"buffer_native", vt->buffer_native != NULL},
        {"buffer_region", vt->buffer_region != NULL},
        {"plan", vt->plan != NULL},
        {"run", vt->run != NULL},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!required[i].set) {
            snprintf(buf, len, "its table leaves the required slot '%s' empty", required[i].name);
            return buf;
        }
    const int marks = (vt->mark != NULL) + (vt->mark_elapsed != NULL) + (vt->mark_free != NULL);
    if (marks != 0 && marks != 3)
        return "its table has some but not all of mark, mark_elapsed, mark_free";
    const int cps = (vt->cp_open != NULL) + (vt->cp_close != NULL) + (vt->cp_sendrecv != NULL) +
                    (vt->cp_allgather != NULL) + (vt->cp_wait != NULL);
    if (cps != 0 && cps != 5)
        return "its table has some but not all of the cp_ transfer slots";
    return NULL;
}

/* Opens one candidate file and checks its table. Returns 1 with *vt set, 0
 * with the reason when the file is there but unusable, -1 when `path` is a
 * full path to nothing (the next candidate is then tried). */
static int try_module(const char *path, fattn_backend_kind kind, const fattn_backend_vtable **vt,
                      char *reason, size_t len) {
    if (strchr(path, '/') && access(path, F_OK) != 0) return -1;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(reason, len, "cannot load %.200s: %.290s", path, e ? e : "dlopen failed");
        return 0;
    }
    fattn_backend_module_fn fn;
    *(void **)&fn = dlsym(h, FATTN_MODULE_SYMBOL);
    char where[1024], why[200];
    Dl_info info;
    /* The file the loader actually opened, for the messages. */
    snprintf(where, sizeof where, "%s",
             fn && dladdr(*(void **)&fn, &info) && info.dli_fname ? info.dli_fname : path);
    const char *problem =
        fn ? table_problem(fn(), kind, why, sizeof why) : "it has no symbol " FATTN_MODULE_SYMBOL;
    if (problem) {
        snprintf(reason, len, "refused %.300s: %.150s; rebuild fattn or remove that file", where,
                 problem);
        dlclose(h);
        return 0;
    }
    *vt = fn(); /* the module stays loaded for the life of the process */
    return 1;
}

/* What is wrong with a module directory, or NULL when it is usable. */
static const char *bad_dir(const char *dir) {
    struct stat sb;
    if (dir[0] != '/') return "an absolute path";
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return "an existing directory";
    return NULL;
}

fattn_status fattn_registry_set_module_dir(const char *dir, fattn_msg *msg) {
    const char *bad = dir ? bad_dir(dir) : NULL;
    if (bad)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "module directory '%s' is not %s; pass the absolute path of the folder "
                          "that holds libfattn-<backend>.so, or NULL",
                          dir, bad);
    if (dir && strlen(dir) >= sizeof api_module_dir)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "module directory path is longer than %zu bytes",
                          sizeof api_module_dir - 1);
    pthread_mutex_lock(&lock);
    snprintf(api_module_dir, sizeof api_module_dir, "%s", dir ? dir : "");
    /* A module that failed to load is looked for again in the new place;
     * one already loaded stays (its code may be in use). */
    for (int k = 0; k < FATTN_BACKEND_COUNT; k++)
        if (slots[k].tried && !slots[k].vt) slots[k].tried = 0;
    pthread_mutex_unlock(&lock);
    return FATTN_OK;
}

/* Tries fattn_set_module_dir's directory (else FATTN_MODULE_DIR), then the
 * library's own directory, then the loader's search path. A file that is
 * there but cannot be used stops the search with its reason: falling back
 * to another copy would hide it. Called with the lock held. */
static const fattn_backend_vtable *open_module(const char *file, fattn_backend_kind kind,
                                               char *reason, size_t len) {
    char path[4096], dir[2048];
    const char *env_dir = api_module_dir[0] ? api_module_dir : fattn_env_module_dir();
    const char *origin = api_module_dir[0] ? "fattn_set_module_dir" : "FATTN_MODULE_DIR";
    const fattn_backend_vtable *vt = NULL;
    int r;
    if (env_dir) {
        const char *bad = bad_dir(env_dir);
        if (bad) {
            snprintf(reason, len,
                     "%s='%.300s' is not %s; set it to the absolute path of the folder "
                     "that holds %s, or unset it",
                     origin, env_dir, bad, file);
            return NULL;
        }
        snprintf(path, sizeof path, "%s/%s", env_dir, file);
        if ((r = try_module(path, kind, &vt, reason, len)) >= 0) return vt;
    }
    own_dir(dir, sizeof dir);
    if (dir[0]) {
        snprintf(path, sizeof path, "%s%s", dir, file);
        if ((r = try_module(path, kind, &vt, reason, len)) >= 0) return vt;
    }
    if ((r = try_module(file, kind, &vt, reason, len)) >= 0) return vt;
    return NULL;
}

static void load_slot(module_slot *s, fattn_backend_kind kind) {
    s->tried = 1;
    if (!s->file) {
        snprintf(s->reason, sizeof s->reason, "%s", s->not_built);
        return;
    }
    s->vt = open_module(s->file, kind, s->reason, sizeof s->reason);
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

int fattn_registry_auto_rank(fattn_backend_kind kind) {
    if ((int)kind <= FATTN_BACKEND_AUTO || kind >= FATTN_BACKEND_COUNT) return 0;
    return slots[kind].auto_rank;
}

void fattn_registry_override(fattn_backend_kind kind, const fattn_backend_vtable *vt) {
    if ((int)kind <= FATTN_BACKEND_AUTO || kind >= FATTN_BACKEND_COUNT) return;
    pthread_mutex_lock(&lock);
    overrides[kind] = vt;
    pthread_mutex_unlock(&lock);
}
