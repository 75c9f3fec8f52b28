/* What the split-KV decode kernels (decode.cl, decode_mma.cl) share: which
 * work-group is which (batch, KV head, row tile, split), the sequence it
 * reads (FATTN_RAGGED), and the split's key tiles. The host joins this file
 * before either kernel; decode.cl's header describes the work division.
 *
 * DECODE_SPLIT(BR_, BKV_), the first statement of a kernel with decode.cl's
 * parameters (BR_ rows per row tile, BKV_ keys per tile), declares in the
 * kernel's scope: s, rt, hk, b, R, r0, rows, first, last (the tile's
 * packed rows), imax (the largest query index among them), woff (the
 * window's offset), kb, vb (K's and V's bases for the sequence and head),
 * t0, t1 (the split's tiles) and j_hi (its keys' end); ragged also sq,
 * Lq, live, khb, vhb (the head bases), tab (the sequence's table row);
 * with FATTN_VAR vlo, vlo_max, vhi, vhi_min (keys every row sees lie in
 * [vlo_max, vhi_min)). It updates Sk and coff to the sequence's, and tiles
 * when ragged. ROW_OK(r): row r of the tile is computed; Q_AT(g, i): Q's
 * row for query head hk * group + g and query index i. */

#if FATTN_RAGGED
#define DEC_RAGGED_PARAMS , RAGGED_PARAMS
#define DEC_RAGGED_ARGS , RAGGED_ARGS
#else
#define DEC_RAGGED_PARAMS
#define DEC_RAGGED_ARGS
#endif

/* Keys j < key_limit(i) are visible to query row i (flash_fwd.cl's rule):
 * with causal, j <= i + coff; coff is clamped to [-Sq, Sk] by the host. */
inline int key_limit(int i, int Sk, int causal, long coff) {
    if (!causal) return Sk;
    return (int)clamp((long)i + coff + 1, 0L, (long)Sk);
}

typedef struct dec_split {
    long b, kb, vb, woff, coff;
    int s, rt, hk, R, r0, rows, first, last, imax, t0, t1, j_hi, Sk, tiles;
#if FATTN_RAGGED
    rag_seq sq;
    int Lq, live;
    long khb, vhb, tab;
#endif
#if FATTN_VAR
    int vlo, vlo_max, vhi, vhi_min;
#endif
} dec_split;

#if FATTN_VAR
#define DEC_VAR_ARGS , win_left, win_right
#define DEC_VAR_PARAMS , long win_left, long win_right
#else
#define DEC_VAR_ARGS
#define DEC_VAR_PARAMS
#endif

inline dec_split dec_split_of(long gid, int br, int bkv, int splits, int row_tiles, int Hkv,
                              int group, int Sq, int Sk, int tiles, int causal, long coff,
                              long k_off, long k_sb, long k_sh, long k_ss, long v_off, long v_sb,
                              long v_sh, long v_ss DEC_VAR_PARAMS DEC_RAGGED_PARAMS) {
    dec_split d;
    d.s = (int)(gid % splits);
    const long rest = gid / splits;
    d.rt = (int)(rest % row_tiles);
    const long bh = rest / row_tiles;
    d.hk = (int)(bh % Hkv);
    d.b = bh / Hkv;
    d.R = group * Sq, d.r0 = d.rt * br;
    d.rows = min(br, d.R - d.r0);
    d.first = d.r0, d.last = d.r0 + d.rows - 1;
    const int cross = d.first / Sq != d.last / Sq;
#if FATTN_RAGGED
    /* Sequence b's rows rr are those with rr % Sq < Lq; the rest are skipped. */
    d.sq = rag_resolve(d.b, Sq, Sk, get_local_id(0) == 0 && d.hk == 0 && d.rt == 0 && d.s == 0,
                       RAGGED_ARGS);
    d.Lq = d.sq.len_q;
    /* A group with none of them has no row (ROW_OK) and, with Sk 0, no key
     * tile: it writes nothing. Not an early return ahead of the barriers:
     * with one, PoCL 3.1 corrupted host memory when a split had no key tile. */
    d.live = cross ? d.Lq > 0 : d.first % Sq < d.Lq;
    Sk = d.live ? d.sq.len_kv : 0;
    if (causal) coff = d.sq.coff;
    tiles = (Sk + bkv - 1) / bkv; /* the sequence's own, divided among the splits */
    /* Paged or not is a build option (FATTN_PAGED, the host builds the two
     * apart): with the page code in the same program as a run-time branch,
     * even an unpaged ragged decode ran 1.3x slower than the dense one on
     * NVIDIA's OpenCL. rg_flags says the same. */
    d.khb = k_off + d.hk * k_sh, d.vhb = v_off + d.hk * v_sh;
    d.kb = d.khb + d.sq.kv_batch * k_sb + d.sq.kv_row0 * k_ss;
    d.vb = d.vhb + d.sq.kv_batch * v_sb + d.sq.kv_row0 * v_ss;
    d.tab = rg_tab_off + d.b * rg_tab_sb;
    /* The largest query index among the tile's rows that are the sequence's. */
    d.imax = cross ? d.Lq - 1 : min(d.last % Sq, d.Lq - 1);
    d.woff = (long)Sk - d.Lq; /* the window's offset (bottom-right) */
#else
    d.kb = k_off + d.b * k_sb + d.hk * k_sh;
    d.vb = v_off + d.b * v_sb + d.hk * v_sh;
    /* The split's keys end where the tile's last-seeing row stops (the
     * largest query index among its rows: Sq - 1 when they cross a head). */
    d.imax = cross ? Sq - 1 : d.last % Sq;
    d.woff = (long)Sk - Sq;
#endif
#if FATTN_VAR
    /* The keys the tile's rows see, [vlo, vhi): from the smallest query
     * index's first (the window) to the largest's limit; the split divides
     * those tiles. Keys in [vlo_max, vhi_min) every row sees. */
    const int imin = cross ? 0 : d.first % Sq;
    d.vhi = var_keys(d.imax, d.woff, key_limit(d.imax, Sk, causal, coff), win_left, win_right,
                     &d.vlo_max);
    d.vhi_min = var_keys(imin, d.woff, key_limit(imin, Sk, causal, coff), win_left, win_right,
                         &d.vlo);
    const int tb = d.vlo / bkv, vt = max((d.vhi + bkv - 1) / bkv - tb, 0);
    d.t0 = tb + (int)((long)d.s * vt / splits);
    d.t1 = tb + (int)((long)(d.s + 1) * vt / splits);
    d.j_hi = min(d.t1 * bkv, d.vhi);
#else
    d.t0 = (int)((long)d.s * tiles / splits), d.t1 = (int)((long)(d.s + 1) * tiles / splits);
    d.j_hi = min(d.t1 * bkv, key_limit(d.imax, Sk, causal, coff));
#endif
    d.Sk = Sk, d.coff = coff, d.tiles = tiles;
    return d;
}

#if FATTN_RAGGED
#define DEC_RAGGED_NAMES(d)                                                                        \
    const rag_seq sq = d.sq;                                                                       \
    const int Lq = d.Lq, live = d.live;                                                            \
    const long khb = d.khb, vhb = d.vhb, tab = d.tab;
#define ROW_OK(r) (live && (r) < rows && (r0 + (r)) % Sq < Lq)
#define Q_AT(g, i)                                                                                 \
    (q_off + sq.q_batch * q_sb + (long)(hk * group + (g)) * q_sh + (sq.q_row0 + (i)) * q_ss)
#else
#define DEC_RAGGED_NAMES(d)
#define ROW_OK(r) ((r) < rows)
#define Q_AT(g, i) (q_off + b * q_sb + (long)(hk * group + (g)) * q_sh + (long)(i) * q_ss)
#endif
#if FATTN_VAR
#define DEC_VAR_NAMES(d) const int vlo = d.vlo, vlo_max = d.vlo_max, vhi = d.vhi, vhi_min = d.vhi_min;
#else
#define DEC_VAR_NAMES(d)
#endif

#define DECODE_SPLIT(BR_, BKV_)                                                                    \
    const dec_split ds_ = dec_split_of(get_group_id(0), BR_, BKV_, splits, row_tiles, Hkv, group, \
                                       Sq, Sk, tiles, causal, coff, k_off, k_sb, k_sh, k_ss,       \
                                       v_off, v_sb, v_sh, v_ss DEC_VAR_ARGS DEC_RAGGED_ARGS);      \
    const long b = ds_.b, kb = ds_.kb, vb = ds_.vb, woff = ds_.woff;                               \
    const int s = ds_.s, rt = ds_.rt, hk = ds_.hk, R = ds_.R, r0 = ds_.r0, rows = ds_.rows;        \
    const int first = ds_.first, last = ds_.last, imax = ds_.imax;                                 \
    const int t0 = ds_.t0, t1 = ds_.t1, j_hi = ds_.j_hi;                                           \
    Sk = ds_.Sk, coff = ds_.coff, tiles = ds_.tiles;                                               \
    DEC_RAGGED_NAMES(ds_) DEC_VAR_NAMES(ds_)
