/* Small helpers the self-contained tests share: seeded random inputs that
 * are never near zero, and matching an error message against the words it
 * must name. Header-only (static inline), so each test stays one file. */
#ifndef FATTN_TEST_UTIL_H
#define FATTN_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1] but never near 0: a zero input hides a missing read. */
static inline float uniform(uint64_t *s) {
    const double u = (double)(next_u64(s) >> 11) / 9007199254740992.0;
    const double mag = 0.1 + 0.9 * u;
    return (float)((next_u64(s) & 1) ? mag : -mag);
}

/* Case-insensitive search of needle[0, n) in hay; with whole = 1 the match
 * must not touch letters, digits or '_' on either side (for short names
 * such as the tensor "o"). */
static inline int find_ci(const char *hay, const char *needle, size_t n, int whole) {
    for (const char *h = hay; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && (h[i] | 0x20) == (needle[i] | 0x20)) i++;
        if (i < n) continue;
        if (!whole) return 1;
        const int before = h > hay ? h[-1] : ' ', after = h[n];
        const int wb = before == '_' || (before >= '0' && before <= '9') ||
                       ((before | 0x20) >= 'a' && (before | 0x20) <= 'z');
        const int wa = after == '_' || (after >= '0' && after <= '9') ||
                       ((after | 0x20) >= 'a' && (after | 0x20) <= 'z');
        if (!wb && !wa) return 1;
    }
    return 0;
}

/* needles: alternatives separated by '|', each matched case-insensitively;
 * one starting with '~' must appear as a whole word. "" accepts any
 * non-empty message. */
static inline int msg_has(const char *msg, const char *needles) {
    if (!msg || !*msg) return 0;
    if (!*needles) return 1;
    for (const char *p = needles;;) {
        const char *bar = strchr(p, '|');
        const size_t len = bar ? (size_t)(bar - p) : strlen(p);
        const int whole = len > 0 && *p == '~';
        if (find_ci(msg, p + whole, len - (size_t)whole, whole)) return 1;
        if (!bar) return 0;
        p = bar + 1;
    }
}

#endif /* FATTN_TEST_UTIL_H */
