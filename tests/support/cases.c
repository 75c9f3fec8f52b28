/* The shared case table. Sizes straddle tile edges (1, 7, 63, 64, 65, 127,
 * 129, 1000), head dims cover 1..256 including non-powers of two, and each
 * row names the feature it is there for. Causal 1 is bottom-right (BR), the
 * default; TL is top-left. */
#include "cases.h"

#define BSHD FATTN_LAYOUT_BSHD
#define BHSD FATTN_LAYOUT_BHSD
#define BR FATTN_CAUSAL_BOTTOM_RIGHT
#define TL FATTN_CAUSAL_TOP_LEFT

/* The table is aligned by hand. */
/* clang-format off */
const fattn_case fattn_cases[] = {
    /* name                      B  Hq Hkv   Sq    Sk    D  causal layout storage         |Q|  scale */
    {"one token",                1, 1, 1,    1,    1,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"head dim 1",               1, 2, 2,    7,    7,    1, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"seq 63 dim 40",            1, 2, 2,   63,   63,   40, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"seq 64 dim 64",            2, 2, 2,   64,   64,   64, 0, BHSD, STORE_SEPARATE,     1.f, 0},
    {"seq 65 dim 80",            1, 3, 3,   65,   65,   80, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"seq 127 dim 96",           1, 2, 2,  127,  127,   96, 0, BHSD, STORE_SEPARATE,     1.f, 0},
    {"seq 129 dim 128",          1, 2, 2,  129,  129,  128, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"seq 129 dim 256",          1, 1, 1,  129,  129,  256, 0, BHSD, STORE_SEPARATE,     1.f, 0},
    {"seq 1000 dim 64",          1, 2, 2, 1000, 1000,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal seq 65",            1, 2, 2,   65,   65,   64, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal seq 127 dim 256",   1, 1, 1,  127,  127,  256, 1, BHSD, STORE_SEPARATE,     1.f, 0},
    {"causal seq 1000 dim 128",  1, 2, 2, 1000, 1000,  128, 1, BHSD, STORE_SEPARATE,     1.f, 0},
    {"causal sq>sk 129/63",      1, 2, 2,  129,   63,   64, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal sq>sk 65/7",        2, 1, 1,   65,    7,   40, 1, BHSD, STORE_SEPARATE,     1.f, 0},
    {"causal sq<sk 63/129",      1, 2, 2,   63,  129,   80, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal decode 1/1000",     2, 4, 4,    1, 1000,  128, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    {"sq<sk 7/1000",             1, 2, 2,    7, 1000,   96, 0, BHSD, STORE_SEPARATE,     1.f, 0},
    {"sq>sk 1000/65",            1, 1, 1, 1000,   65,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"GQA 8/2",                  1, 8, 2,  129,  129,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"GQA 8/2 causal bhsd",      2, 8, 2,   65,  127,  128, 1, BHSD, STORE_SEPARATE,     1.f, 0},
    {"MQA 6/1",                  1, 6, 1,   65,   65,  128, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    {"MQA 4/1 dim 256",          1, 4, 1,   63,  129,  256, 0, BHSD, STORE_SEPARATE,     1.f, 0},
    {"batch 3",                  3, 2, 2,   63,   63,   80, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"kv strides differ",        2, 4, 2,  127,  129,   64, 0, BSHD, STORE_KV_STRIDED,   1.f, 0},
    {"kv strides differ causal", 1, 2, 2,  129,  129,  128, 1, BHSD, STORE_KV_STRIDED,   1.f, 0},
    {"kv strides differ dim 40", 1, 3, 1,   64,   65,   40, 1, BSHD, STORE_KV_STRIDED,   1.f, 0},
    {"packed qkv",               2, 2, 2,  129,  129,   64, 0, BSHD, STORE_PACKED_QKV,   1.f, 0},
    {"packed qkv causal dim 96", 1, 3, 3,   65,   65,   96, 1, BSHD, STORE_PACKED_QKV,   1.f, 0},
    {"large logits",             1, 2, 2,  129,  129,   64, 0, BSHD, STORE_SEPARATE,    16.f, 0},
    {"large logits causal",      1, 2, 2,  127,  127,  128, 1, BHSD, STORE_SEPARATE,    16.f, 0},
    {"large logits scale 1",     1, 1, 1,   65,   65,   64, 0, BSHD, STORE_SEPARATE,     4.f, 1.f},
    {"single key equals v",      1, 2, 2,   65,    1,   96, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"single key causal",        1, 2, 2,    7,    1,   64, 1, BHSD, STORE_SEPARATE,     1.f, 0},
    {"no keys",                  1, 2, 2,    7,    0,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"custom scale",             1, 2, 2,   63,   65,   64, 0, BSHD, STORE_SEPARATE,     1.f, 0.3f},
    /* Both causal alignments with seq_q != seq_kv both ways, at sizes that are
     * multiples of no tile. Top-left: row i sees keys 0..i, so with more
     * queries than keys no row is empty and rows past seq_kv see every key.
     * Bottom-right: row i sees keys 0..i + seq_kv - seq_q, so with more
     * queries than keys the first seq_q - seq_kv rows see none (O = 0, LSE
     * = -inf) and the last row sees every key. */
    {"causal tl sq<sk 37/101",   1, 2, 2,   37,  101,   64, TL, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal br sq<sk 37/101",   1, 2, 2,   37,  101,   64, BR, BSHD, STORE_SEPARATE,     1.f, 0},
    {"causal tl sq>sk 101/37",   2, 4, 2,  101,   37,   40, TL, BHSD, STORE_SEPARATE,     1.f, 0},
    {"causal br sq>sk 101/37",   2, 4, 2,  101,   37,   40, BR, BHSD, STORE_SEPARATE,     1.f, 0},
    {"causal tl decode 1/77",    1, 3, 1,    1,   77,   96, TL, BSHD, STORE_KV_STRIDED,   1.f, 0},
    {"causal br decode 1/77",    1, 3, 1,    1,   77,   96, BR, BSHD, STORE_KV_STRIDED,   1.f, 0},
    {"causal tl sq>sk 77/1",     1, 2, 2,   77,    1,   80, TL, BHSD, STORE_KV_STRIDED,   1.f, 0},
    {"causal br sq>sk 77/1",     1, 2, 2,   77,    1,   80, BR, BHSD, STORE_KV_STRIDED,   1.f, 0},
    {"causal tl seq 65 dim 128", 1, 2, 2,   65,   65,  128, TL, BSHD, STORE_PACKED_QKV,   1.f, 0},
    {"causal tl large logits",   1, 2, 2,   63,  129,  256, TL, BHSD, STORE_SEPARATE,    16.f, 0},
    /* More (batch, head) pairs than one CUDA grid dimension holds (65,535). */
    {"batch x heads 70000",    350, 200, 50,  2,    3,    8, 1, BSHD, STORE_SEPARATE,     1.f, 0},
    /* Decoding: a few query rows against a long cache, GQA groups 1, 4, 8
     * and 32, key counts that are multiples of no tile or split. */
    {"decode 1/4099 gqa 4 d128",  1, 8, 2,    1, 4099,  128, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"decode 2/1000 gqa 8 br",    1, 8, 1,    2, 1000,   64, BR, BHSD, STORE_SEPARATE,    1.f, 0},
    {"decode 4/40000 gqa 4 d32",  1, 4, 1,    4, 40000,  32, 0, BSHD, STORE_SEPARATE,     1.f, 0},
    {"decode 8/777 gqa 32 tl",    1, 32, 1,   8,  777,   80, TL, BSHD, STORE_KV_STRIDED,  1.f, 0},
    {"decode 1/7 mha d256",       3, 2, 2,    1,    7,  256, 0, BHSD, STORE_SEPARATE,     1.f, 0},
};
/* clang-format on */

const size_t fattn_case_count = sizeof fattn_cases / sizeof fattn_cases[0];
