/* Saving and restoring an environment variable around a test, so that a
 * developer's FATTN_* settings do not leak into, or out of, it. */
#ifndef FATTN_TEST_ENV_H
#define FATTN_TEST_ENV_H

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

#endif /* FATTN_TEST_ENV_H */
