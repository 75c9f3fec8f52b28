/* Which backends exist: the CPU backend built in, GPU backends loaded as
 * modules on first use so the core loads on machines without their drivers. */
#ifndef FATTN_REGISTRY_H
#define FATTN_REGISTRY_H

#include "backend.h"

/* The vtable of a backend kind (not AUTO), or NULL with the reason it cannot
 * be loaded written into reason. Thread-safe; a module is loaded once. */
const fattn_backend_vtable *fattn_registry_get(fattn_backend_kind kind, char *reason,
                                               size_t reason_len);

/* FATTN_BACKEND_AUTO's ceiling for a backend (its row in the registry). */
int fattn_registry_auto_rank(fattn_backend_kind kind);

/* fattn_set_module_dir: an absolute existing directory, or NULL (back to
 * FATTN_MODULE_DIR). Applies to modules not loaded yet. */
fattn_status fattn_registry_set_module_dir(const char *dir, fattn_msg *msg);

/* Tests only: replaces a backend with vt (a mock), or restores the real one
 * when vt is NULL. Not thread-safe. */
void fattn_registry_override(fattn_backend_kind kind, const fattn_backend_vtable *vt);

/* The built-in CPU backend. */
const fattn_backend_vtable *fattn_cpu_backend(void);

#endif /* FATTN_REGISTRY_H */
