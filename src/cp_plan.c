/* Context parallelism's geometry and the calls of one ring step: pure
 * arithmetic (src/cp.h). Visibility between a query chunk and a key chunk
 * is an interval of j - i (i, j: rows within the chunks): the window and
 * causal bound it on either side, shifted by D, how far the query chunk
 * starts after the key chunk. A fattn_forward call over rows that form a
 * rectangle of chunks sees, in each pair's own coordinates, its own window
 * shifted by its diagonal (seq_kv - seq_q) and by where the pair lies in
 * the rectangle; a call is valid when those intervals, clipped to the
 * pairs' sizes, are the true ones. */
#include "cp.h"

int cp_chunks(fattn_cp_layout layout, int ranks, int rank, int64_t local, cp_chunk out[2]) {
    if (layout == FATTN_CP_ZIGZAG) {
        const int64_t c = local / 2;
        out[0] = (cp_chunk){0, (int64_t)rank * c, c};
        out[1] = (cp_chunk){c, (int64_t)(2 * ranks - 1 - rank) * c, c};
        return 2;
    }
    out[0] = (cp_chunk){0, (int64_t)rank * local, local};
    return 1;
}

/* An interval of j - i; lo > hi is empty; -CP_UNBOUNDED / CP_UNBOUNDED: no side. */
typedef struct ival {
    int64_t lo, hi;
} ival;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* What query chunk qc may see of key chunk kc. */
static ival pair_ival(const cp_chunk *qc, const cp_chunk *kc, cp_mask m) {
    const int64_t d = qc->global0 - kc->global0;
    return (ival){m.left < 0 ? -CP_UNBOUNDED : d - m.left, m.right < 0 ? CP_UNBOUNDED : d + m.right};
}

/* iv clipped to what a pair of nq rows and nk keys can reach; empty ones
 * all become (1, 0), so that equal sets compare equal. */
static ival clip(ival iv, int64_t nq, int64_t nk) {
    ival c = {max64(iv.lo, -(nq - 1)), min64(iv.hi, nk - 1)};
    return c.lo > c.hi ? (ival){1, 0} : c;
}

static int is_empty(ival iv, int64_t nq, int64_t nk) { return clip(iv, nq, nk).lo > clip(iv, nq, nk).hi; }

/* The interval a call with diagonal w and window (left, right) gives a pair
 * that sits `shift` = (its query rows' offset) - (its keys' offset) into it. */
static ival call_ival(int64_t w, int64_t left, int64_t right, int64_t shift) {
    return (ival){left < 0 ? -CP_UNBOUNDED : w - left + shift,
                  right < 0 ? CP_UNBOUNDED : w + right + shift};
}

typedef struct geom {
    cp_chunk q[2], k[2];
    int nq, nk;
    int own; /* the rank's own slice: pair (a, a) is chunk a's diagonal */
    cp_mask mask;
} geom;

/* The call over query chunks qa..qb and key chunks ka..kb as one window,
 * or 0 when no window describes it (or, on the rank's own slice, it holds
 * the diagonals of some of its query chunks but not all). */
static int try_rect(const geom *g, int qa, int qb, int ka, int kb, cp_call *out) {
    const int64_t q0 = g->q[qa].local0, k0 = g->k[ka].local0;
    const int64_t nq = g->q[qb].local0 + g->q[qb].len - q0;
    const int64_t nk = g->k[kb].local0 + g->k[kb].len - k0;
    const int64_t w = nk - nq;
    int64_t left = -1, right = -1;
    int any = 0, diags = 0;
    /* The first pair bound on a side fixes the call's window on that side;
     * the check below holds every pair to it. */
    for (int a = qa; a <= qb; a++)
        for (int b = ka; b <= kb; b++) {
            const ival iv = pair_ival(&g->q[a], &g->k[b], g->mask);
            const int64_t lq = g->q[a].len, lk = g->k[b].len;
            const int64_t shift = (g->q[a].local0 - q0) - (g->k[b].local0 - k0);
            if (g->own && a == b) diags++;
            if (is_empty(iv, lq, lk)) continue;
            any = 1;
            if (left < 0 && iv.lo != -CP_UNBOUNDED && iv.lo > -(lq - 1)) {
                left = w + shift - iv.lo;
                if (left < 0) return 0;
            }
            if (right < 0 && iv.hi != CP_UNBOUNDED && iv.hi < lk - 1) {
                right = iv.hi - w - shift;
                if (right < 0) return 0;
            }
        }
    /* On the rank's own slice a call holds the diagonals of all its query
     * chunks or of none: the sink then joins each row once, and the calls
     * that start a chunk's rows cover them whole. */
    if (!any || (diags != 0 && diags != qb - qa + 1)) return 0;
    for (int a = qa; a <= qb; a++)
        for (int b = ka; b <= kb; b++) {
            const int64_t lq = g->q[a].len, lk = g->k[b].len;
            const int64_t shift = (g->q[a].local0 - q0) - (g->k[b].local0 - k0);
            const ival t = clip(pair_ival(&g->q[a], &g->k[b], g->mask), lq, lk);
            const ival c = clip(call_ival(w, left, right, shift), lq, lk);
            if (t.lo != c.lo || t.hi != c.hi) return 0;
        }
    /* Sides no row reaches are no sides. */
    if (left >= 0 && w - left <= -(nq - 1)) left = -1;
    if (right >= 0 && w + right >= nk - 1) right = -1;
    *out = (cp_call){q0, nq, k0, nk, left, right, qa, qb, left < 0 && right == 0, diags > 0};
    return 1;
}

/* One chunk pair, its rows trimmed where they see nothing so that the
 * call's diagonal can sit inside the pair's interval. 0: nothing visible. */
static int pair_call(const geom *g, int a, int b, cp_call *out) {
    const ival iv = pair_ival(&g->q[a], &g->k[b], g->mask);
    int64_t nq = g->q[a].len, nk = g->k[b].len;
    if (is_empty(iv, nq, nk)) return 0;
    int64_t w = nk - nq;
    if (iv.lo != -CP_UNBOUNDED && w < iv.lo) {
        nq = nk - iv.lo; /* rows from nk - lo on see no key: they see j >= i + lo >= nk */
        w = iv.lo;
    } else if (iv.hi != CP_UNBOUNDED && w > iv.hi) {
        nk = nq + iv.hi; /* keys from nq + hi on are seen by no row: i >= j - hi >= nq */
        w = iv.hi;
    }
    int64_t left = iv.lo == -CP_UNBOUNDED ? -1 : w - iv.lo;
    int64_t right = iv.hi == CP_UNBOUNDED ? -1 : iv.hi - w;
    if (left >= 0 && w - left <= -(nq - 1)) left = -1;
    if (right >= 0 && w + right >= nk - 1) right = -1;
    *out = (cp_call){g->q[a].local0, nq, g->k[b].local0, nk, left, right, a, a,
                     left < 0 && right == 0, g->own && a == b};
    return 1;
}

int cp_plan_step(fattn_cp_layout layout, int ranks, int rank, int src, int64_t local,
                 cp_mask mask, cp_call out[CP_MAX_CALLS]) {
    geom g;
    g.nq = cp_chunks(layout, ranks, rank, local, g.q);
    g.nk = cp_chunks(layout, ranks, src, local, g.k);
    g.own = src == rank;
    g.mask = mask;
    int n = 0;
    cp_call c;
    /* The whole block. */
    if (try_rect(&g, 0, g.nq - 1, 0, g.nk - 1, &c)) {
        out[0] = c;
        return 1;
    }
    /* Per key chunk (all query chunks), then per query chunk (all key
     * chunks): each only if every column (row) is one call or sees nothing. */
    for (int pass = 0; pass < 2 && g.nq > 1 && g.nk > 1; pass++) {
        int ok = 1;
        n = 0;
        for (int x = 0; x < (pass ? g.nq : g.nk) && ok; x++) {
            const int qa = pass ? x : 0, qb = pass ? x : g.nq - 1;
            const int ka = pass ? 0 : x, kb = pass ? g.nk - 1 : x;
            int visible = 0;
            for (int a = qa; a <= qb; a++)
                for (int b = ka; b <= kb; b++)
                    visible |= !is_empty(pair_ival(&g.q[a], &g.k[b], mask), g.q[a].len, g.k[b].len);
            if (!visible) continue;
            if (try_rect(&g, qa, qb, ka, kb, &c))
                out[n++] = c;
            else
                ok = 0;
        }
        if (ok) goto order;
    }
    n = 0;
    for (int a = 0; a < g.nq; a++)
        for (int b = 0; b < g.nk; b++)
            if (pair_call(&g, a, b, &c)) out[n++] = c;
order:
    /* Calls that cover their query chunks whole come first (the diagonals
     * are among them): a rank's rows are complete before a trimmed call adds
     * to them. A stable pass keeps the rest in order. */
    for (int i = 1; i < n; i++) {
        const cp_call t = out[i];
        const int whole = t.q_len == g.q[t.q_last].local0 + g.q[t.q_last].len - g.q[t.q_first].local0;
        int j = i;
        while (whole && j > 0 &&
               out[j - 1].q_len != g.q[out[j - 1].q_last].local0 + g.q[out[j - 1].q_last].len -
                                       g.q[out[j - 1].q_first].local0) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = t;
    }
    return n;
}
