/* Every environment variable fattn reads is read in env.c; this is the list.
 * Each returns FATTN_OK with *is_set = 0 when the variable is unset or empty. */
#ifndef FATTN_ENV_H
#define FATTN_ENV_H

#include "backend.h"

/* FATTN_BACKEND=auto|cpu|cuda|opencl */
fattn_status fattn_env_backend(fattn_backend_kind *out, int *is_set, fattn_msg *msg);
/* FATTN_DEVICE=<non-negative index> */
fattn_status fattn_env_device(int *out, int *is_set, fattn_msg *msg);
/* FATTN_CPU_THREADS=<1..1024>; returns 0 when unset (use every core). An
 * invalid value is reported through msg. */
fattn_status fattn_env_cpu_threads(int *out, fattn_msg *msg);
/* FATTN_MODULE_DIR: where GPU backend modules are looked for first; NULL if unset. */
const char *fattn_env_module_dir(void);

#endif /* FATTN_ENV_H */
