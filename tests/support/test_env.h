/* Saving and restoring an environment variable around a test, so that a
 * developer's FATTN_* settings do not leak into, or out of, it. */
#ifndef FATTN_TEST_ENV_H
#define FATTN_TEST_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct test_env {
    const char *name;
    char *value; /* NULL: was unset */
} test_env;

static inline test_env env_save(const char *name) {
    const char *v = getenv(name);
    test_env s = {name, v ? strdup(v) : NULL};
    return s;
}

static inline void env_restore(test_env *s) {
    if (s->value)
        setenv(s->name, s->value, 1);
    else
        unsetenv(s->name);
    free(s->value);
    s->value = NULL;
}

/* FATTN_TEST_CASES=a,b,...: whether a case named `name` runs (its name
 * contains one of them); unset or empty: every case. For running a few
 * cases by hand (under compute-sanitizer) or in a ctest entry. */
static inline int test_case_selected(const char *name) {
    const char *list = getenv("FATTN_TEST_CASES");
    if (!list || !*list) return 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (strstr(name, tok)) return 1;
    return 0;
}

#endif /* FATTN_TEST_ENV_H */
