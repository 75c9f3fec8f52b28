/* Size-first structs: every struct the caller fills or receives starts with
 * its size, so the library can read an older caller's smaller struct (the
 * fields it lacks keep their defaults) and refuse a newer caller's larger
 * one only when it sets fields this library does not know. */
#include <string.h>

#include "internal.h"

static size_t size_of(const void *s) {
    size_t n;
    memcpy(&n, s, sizeof n);
    return n;
}

/* The caller's size: at least the first version's, and either this
 * version's or more, or one an older version had. An older struct ends
 * where a field of the newer one starts; any other size would cut a field
 * (half a pointer, half a string) and is no struct a caller compiled. */
static fattn_status check_size(size_t size, size_t own, const size_t *older, int n_older,
                               const char *name, const char *type, fattn_msg *msg) {
    if (size == 0)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "%s->size is 0: start from %s's INIT macro (it sets size = sizeof(%s))",
                          name, type, type);
    if (size < older[0])
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "%s->size = %zu is smaller than any %s (at least %zu bytes; this "
                          "version's is %zu): set size = sizeof(%s), e.g. with its INIT macro",
                          name, size, type, older[0], own, type);
    int known = size >= own;
    for (int i = 0; i < n_older && !known; i++) known = size == older[i];
    if (!known)
        return fattn_fail(msg, FATTN_ERR_INVALID_ARGUMENT,
                          "%s->size = %zu ends inside a field of %s (this version's is %zu "
                          "bytes): set size = sizeof(%s), e.g. with its INIT macro",
                          name, size, type, own, type);
    return FATTN_OK;
}

fattn_status fattn_ext_read(void *dst, size_t own, const void *src, const size_t *older,
                            int n_older, const char *name, const char *type, fattn_msg *msg) {
    const size_t size = size_of(src);
    fattn_status st = check_size(size, own, older, n_older, name, type, msg);
    if (st != FATTN_OK) return st;
    /* A newer caller's extra fields are fine while they hold their zero
     * defaults; a set one asks for something this library cannot do. */
    for (size_t i = own; i < size; i++)
        if (((const unsigned char *)src)[i] != 0)
            return fattn_fail(
                msg, FATTN_ERR_INVALID_ARGUMENT,
                "%s->size = %zu but this fattn (%s) knows %zu bytes of %s, and byte %zu "
                "past them is set: the caller uses a field this version does not "
                "have; link a newer fattn",
                name, size, fattn_version_string(), own, type, i);
    memcpy(dst, src, size < own ? size : own);
    memcpy(dst, &own, sizeof own);
    return FATTN_OK;
}

fattn_status fattn_ext_write(void *dst, const void *src, size_t own, const size_t *older,
                             int n_older, const char *name, const char *type, fattn_msg *msg) {
    const size_t size = size_of(dst);
    fattn_status st = check_size(size, own, older, n_older, name, type, msg);
    if (st != FATTN_OK) return st;
    const size_t n = size < own ? size : own;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, n - sizeof size);
    return FATTN_OK;
}
