/* The settings a backend reads (fattn_settings, in backend.h), resolved from
 * the caller's fattn_context_params, else the environment, else defaults.
 * The store owns copies of the strings, so they live as long as it does. */
#ifndef FATTN_SETTINGS_H
#define FATTN_SETTINGS_H

#include "backend.h"

typedef struct fattn_settings_store {
    fattn_settings s;
    char *owned[16];
    int count;
} fattn_settings_store;

/* Resolves the settings for backend `kind` (cpu_threads, and its
 * FATTN_CPU_THREADS check, only for the CPU); params may be NULL (the
 * environment alone). FATTN_ERR_ENVIRONMENT for an invalid variable,
 * FATTN_ERR_INVALID_ARGUMENT for an invalid API value, with a message. */
fattn_status fattn_settings_resolve(const fattn_context_params *params, fattn_backend_kind kind,
                                    fattn_settings_store *out, fattn_msg *msg);
void fattn_settings_free(fattn_settings_store *store);

#endif /* FATTN_SETTINGS_H */
