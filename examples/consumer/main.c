/* The smallest fattn program: one call on host arrays, checked by hand for a
 * case whose answer is known (one key: every output row equals V). */
#include <fattn.h>
#include <math.h>
#include <stdio.h>

int main(void) {
    fattn_context *ctx;
    if (fattn_context_create(FATTN_BACKEND_CPU, -1, &ctx) != FATTN_OK) {
        fprintf(stderr, "consumer: %s\n", fattn_error_message(NULL));
        return 1;
    }
    /* 1 batch, 1 head, 3 queries, 1 key, head dim 4. */
    fattn_attention_desc d = FATTN_ATTENTION_DESC_INIT;
    d.batch = d.heads_q = d.heads_kv = 1;
    d.seq_q = 3;
    d.seq_kv = 1;
    d.head_dim = 4;
    d.dtype = FATTN_F32;
    const float q[12] = {1, -2, 3, 0.5f, 0, 1, 1, 1, -1, 2, 0, 4};
    const float k[4] = {0.25f, 1, -1, 2}, v[4] = {3, -1, 0.5f, 7};
    float o[12], lse[3];
    fattn_status st = fattn_attention_host(ctx, &d, FATTN_LAYOUT_BSHD, q, k, v, o, lse);
    /* The library loaded at run time is the 0.x release this was built for
     * (minor releases of 0.x may change the API). */
    int bad = st != FATTN_OK || fattn_version_number() / 100 != FATTN_VERSION_NUMBER / 100;
    for (int i = 0; i < 12 && !bad; i++) bad = fabsf(o[i] - v[i % 4]) > 1e-6f;
    printf("consumer: fattn %s on %s: %s\n", fattn_version_string(),
           fattn_context_backend_name(ctx), bad ? "WRONG" : "ok");
    if (st != FATTN_OK) fprintf(stderr, "consumer: %s\n", fattn_error_message(ctx));
    fattn_context_free(ctx);
    return bad;
}
