/* The kernels of relative_attention.c, included once per scalar type with REAL, SUFFIX, VINT (the
 * signed integer vector of REAL's lane width) and EXP_NONPOSITIVE defined.
 *
 * Layouts, per sequence (T positions, head width E <= 64):
 *   T8 = T rounded up to 8: rows of the padded dense copies, and both sides of the saved pattern P;
 *   LD = T rounded up to 16, plus 16: the row length of score buffers and of transposed copies, so
 *        that 16-wide tiles and vector-wide row chunks never leave a row.
 * Padding rows and columns are zero, so tiles that overhang the triangle add nothing. Both passes go
 * through the queries in tiles of 4 rows, and keep only that tile's scores.
 */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)
#define VL ((int)(32 / sizeof(REAL)))
#define VEC FN(vec_)
#define LOAD(p) (*(const FN(uvec_) *)(p))
#define STORE(p, x) (*(FN(uvec_) *)(p) = (x))

typedef REAL FN(vec_) __attribute__((vector_size(32)));
typedef REAL FN(uvec_) __attribute__((vector_size(32), aligned(sizeof(REAL)), may_alias));

/* out[r][j] = sum_{c<E} A[r][c] BT[c][j], r < 4, j in [j0, j1) (a multiple of 16 long). */
static inline void FN(tile_nt_)(const int E, const REAL *A, int lda, const REAL *BT, int ldb, REAL *out, int ldo,
                                int j0, int j1) {
    for (int j = j0; j < j1; j += 16) {
        VEC acc[4][16 / VL] = {{{0}}};
        for (int c = 0; c < E; ++c) {
            VEC b[16 / VL];
            for (int x = 0; x < 16 / VL; ++x) b[x] = LOAD(BT + (long)c * ldb + j + x * VL);
            for (int r = 0; r < 4; ++r) {
                const REAL a = A[r * lda + c];
                for (int x = 0; x < 16 / VL; ++x) acc[r][x] += a * b[x];
            }
        }
        for (int r = 0; r < 4; ++r)
            for (int x = 0; x < 16 / VL; ++x) STORE(out + (long)r * ldo + j + x * VL, acc[r][x]);
    }
}

/* out[r][:] += sum_{j in [j0, j1)} A[r][j] B[j][:], r < 4; B and out rows dense, E wide (vectorised in
 * 16-wide column chunks when E is a multiple of 16). */
static inline void FN(tile_nn_)(const int E, const REAL *A, int lda, const REAL *B, REAL *out, int j0, int j1) {
    if (E % 16) {
        for (int j = j0; j < j1; ++j)
            for (int r = 0; r < 4; ++r)
                for (int x = 0; x < E; ++x) out[r * E + x] += A[r * lda + j] * B[(long)j * E + x];
        return;
    }
    for (int x0 = 0; x0 < E; x0 += 16) {
        VEC acc[4][16 / VL] = {{{0}}};
        for (int j = j0; j < j1; ++j) {
            VEC b[16 / VL];
            for (int x = 0; x < 16 / VL; ++x) b[x] = LOAD(B + (long)j * E + x0 + x * VL);
            for (int r = 0; r < 4; ++r) {
                const REAL a = A[r * lda + j];
                for (int x = 0; x < 16 / VL; ++x) acc[r][x] += a * b[x];
            }
        }
        for (int r = 0; r < 4; ++r)
            for (int x = 0; x < 16 / VL; ++x) {
                REAL *o = out + r * E + x0 + x * VL;
                STORE(o, LOAD(o) + acc[r][x]);
            }
    }
}

/* out[r][:] += sum_{t in [t0, t1)} A[t][j + r] B[t][:], r < 4; B and out rows dense, E wide. */
static inline void FN(tile_tn_)(const int E, const REAL *A, int lda, int j, const REAL *B, REAL *out, int t0,
                                int t1) {
    if (E % 16) {
        for (int t = t0; t < t1; ++t)
            for (int r = 0; r < 4; ++r)
                for (int x = 0; x < E; ++x) out[r * E + x] += A[(long)t * lda + j + r] * B[(long)t * E + x];
        return;
    }
    for (int x0 = 0; x0 < E; x0 += 16) {
        VEC acc[4][16 / VL] = {{{0}}};
        for (int t = t0; t < t1; ++t) {
            VEC b[16 / VL];
            const REAL *a = A + (long)t * lda + j;
            for (int x = 0; x < 16 / VL; ++x) b[x] = LOAD(B + (long)t * E + x0 + x * VL);
            for (int r = 0; r < 4; ++r)
                for (int x = 0; x < 16 / VL; ++x) acc[r][x] += a[r] * b[x];
        }
        for (int r = 0; r < 4; ++r)
            for (int x = 0; x < 16 / VL; ++x) {
                REAL *o = out + r * E + x0 + x * VL;
                STORE(o, LOAD(o) + acc[r][x]);
            }
    }
}

/* Rows [0, T) of x (row stride xst) into dense (T8, E), zero rows after. */
static inline void FN(dense_rows_)(int T, int E, const REAL *x, long xst, REAL *out) {
    const int T8 = (T + 7) & ~7;
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < E; ++c) out[t * E + c] = x[t * xst + c];
    for (long i = (long)T * E; i < (long)T8 * E; ++i) out[i] = 0;
}

/* x (T rows, stride xst) transposed into (E, LD), zero columns after T. */
static inline void FN(transposed_)(int T, int E, const REAL *x, long xst, REAL *out) {
    const int LD = ((T + 15) & ~15) + 16;
    for (int c = 0; c < E; ++c)
        for (int j = T; j < LD; ++j) out[c * LD + j] = 0;
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < E; ++c) out[c * LD + t] = x[t * xst + c];
}

/* out[j][:] += sum_{r<4} A[r][j] B[r][:] for j in [j0, j1): a rank-4 update of dense rows E wide. */
static inline void FN(tile_rank4_)(const int E, const REAL *A, int lda, const REAL *B, REAL *out, int j0, int j1) {
    if (E % 16) {
        for (int j = j0; j < j1; ++j)
            for (int r = 0; r < 4; ++r)
                for (int x = 0; x < E; ++x) out[(long)j * E + x] += A[r * lda + j] * B[r * E + x];
        return;
    }
    for (int x0 = 0; x0 < E; x0 += 16) {
        VEC b[4][16 / VL];
        for (int r = 0; r < 4; ++r)
            for (int x = 0; x < 16 / VL; ++x) b[r][x] = LOAD(B + r * E + x0 + x * VL);
        for (int j = j0; j < j1; ++j) {
            REAL *o = out + (long)j * E + x0;
            VEC acc[16 / VL];
            for (int x = 0; x < 16 / VL; ++x) acc[x] = LOAD(o + x * VL);
            for (int r = 0; r < 4; ++r) {
                const REAL a = A[r * lda + j];
                for (int x = 0; x < 16 / VL; ++x) acc[x] += a * b[r][x];
            }
            for (int x = 0; x < 16 / VL; ++x) STORE(o + x * VL, acc[x]);
        }
    }
}

/* One sequence's buffers: dense rows (T8, E): Q, K, V, G, H, R; transposed (E, LD): XT; one row tile
 * (4, LD): S, M. Everything a row tile touches stays in the L1 cache. */
typedef struct {
    REAL *Q, *K, *V, *G, *H, *R, *XT, *S, *M;
} FN(work_);

static FN(work_) FN(work_alloc_)(int T, int E) {
    const long T8 = (T + 7) & ~7, LD = ((T + 15) & ~15) + 16;
    FN(work_) w;
    w.Q = malloc(sizeof(REAL) * (6 * T8 * E + E * LD + 8 * LD));
    w.K = w.Q + T8 * E; w.V = w.K + T8 * E; w.G = w.V + T8 * E; w.H = w.G + T8 * E; w.R = w.H + T8 * E;
    w.XT = w.R + T8 * E; w.S = w.XT + E * LD; w.M = w.S + 4 * LD;
    return w;
}

/* The first column of the offsets' side a row tile needs, m >= T-1-t for t in [t0, t0 + 4). */
static inline int FN(first_offset_)(int T, int t0) { return T - 4 - t0 < 0 ? 0 : T - 4 - t0; }

/* Forward of one sequence: y (T, E) dense, P (T8, T8) with zeros above the diagonal. RT: the reversed
 * offsets of its head transposed, RT[c][m] = r_{T-1-m}[c], (E, LD). One row tile at a time: its scores,
 * softmax and output. */
static void FN(forward_one_)(int T, const int E, const REAL *q, long qst, const REAL *k, long kst, const REAL *v,
                             long vst, const REAL *RT, REAL *y, REAL *P, FN(work_) w) {
    const int T8 = (T + 7) & ~7, LD = ((T + 15) & ~15) + 16;
    FN(dense_rows_)(T, E, q, qst, w.Q);
    FN(dense_rows_)(T, E, v, vst, w.V);
    FN(transposed_)(T, E, k, kst, w.XT);
    for (int i = 0; i < T8 * E; ++i) w.G[i] = 0;
    for (int t0 = 0; t0 < T8; t0 += 4) {
        /* S[r][j] = q_t . k_j for j up to the tile's diagonal; M[r][m] = q_t . r_{T-1-m} for the m >= T-1-t it needs */
        FN(tile_nt_)(E, w.Q + t0 * E, E, w.XT, LD, w.S, LD, 0, (t0 + 4 + 15) & ~15);
        const int m0 = FN(first_offset_)(T, t0) & ~15;
        FN(tile_nt_)(E, w.Q + t0 * E, E, RT, LD, w.M, LD, m0, m0 + ((T - m0 + 15) & ~15));
        for (int t = t0; t < t0 + 4; ++t) { /* P[t][j] = softmax_{j <= t}(S[r][j] + M[r][T-1-t+j]) */
            REAL *s = w.S + (long)(t - t0) * LD, *Pt = P + (long)t * T8;
            if (t >= T) {
                for (int j = 0; j < T8; ++j) Pt[j] = 0;
                continue;
            }
            const REAL *m = w.M + (long)(t - t0) * LD + (T - 1 - t);
            const int L = t + 1, Lv = (L + VL - 1) / VL * VL;
            VEC mx = (VEC){0} - (REAL)1e30;
            for (int j = 0; j < Lv; j += VL) {
                VEC x = LOAD(s + j) + LOAD(m + j);
                for (int i = L - j; i < VL; ++i) x[i] = -1e30; /* past the diagonal: exp gives 0 */
                STORE(s + j, x);
                const VINT more = x > mx;
                mx = (VEC)(((VINT)x & more) | ((VINT)mx & ~more));
            }
            REAL top = mx[0];
            for (int i = 1; i < VL; ++i) top = mx[i] > top ? mx[i] : top;
            VEC sum = {0};
            for (int j = 0; j < Lv; j += VL) {
                const VEC e = EXP_NONPOSITIVE(LOAD(s + j) - top);
                STORE(s + j, e);
                sum += e;
            }
            REAL total = 0;
            for (int i = 0; i < VL; ++i) total += sum[i];
            const REAL inv = 1 / total;
            for (int j = 0; j < Lv; j += VL) STORE(Pt + j, LOAD(s + j) * inv);
            for (int j = Lv; j < T8; ++j) Pt[j] = 0;
        }
        FN(tile_nn_)(E, P + (long)t0 * T8, T8, w.V, w.G + t0 * E, 0, t0 + 4 < T ? t0 + 4 : T); /* y = P V */
    }
    for (int i = 0; i < T * E; ++i) y[i] = w.G[i];
}

/* q, k, v: n sequences (strides xsn, xst, 1) of T rows of width E; sequence i uses head i % nh of rrev
 * (nh, T, E) dense, rrev[h][m] = r_{T-1-m}. Writes y (n, T, E) dense and P (n, T8, T8). 0, or 2 when
 * out of memory. */
int FN(relative_attention_forward)(int n, int T, int E, int nh, const REAL *q, long qsn, long qst, const REAL *k,
                                   long ksn, long kst, const REAL *v, long vsn, long vst, const REAL *rrev, REAL *y,
                                   REAL *P) {
    const long T8 = (T + 7) & ~7, LD = ((T + 15) & ~15) + 16;
    REAL *RT = malloc(sizeof(REAL) * nh * E * LD);
    FN(work_) w = FN(work_alloc_)(T, E);
    if (RT == NULL || w.Q == NULL) {
        free(RT); free(w.Q);
        return 2;
    }
    for (int h = 0; h < nh; ++h) FN(transposed_)(T, E, rrev + (long)h * T * E, E, RT + h * E * LD);
    for (int i = 0; i < n; ++i) {
        const REAL *RTh = RT + (i % nh) * E * LD;
        REAL *yi = y + (long)i * T * E, *Pi = P + i * T8 * T8;
        if (E == 16) /* the specialised tiles */
            FN(forward_one_)(T, 16, q + i * qsn, qst, k + i * ksn, kst, v + i * vsn, vst, RTh, yi, Pi, w);
        else
            FN(forward_one_)(T, E, q + i * qsn, qst, k + i * ksn, kst, v + i * vsn, vst, RTh, yi, Pi, w);
    }
    free(RT); free(w.Q);
    return 0;
}

/* Backward of one sequence; adds its offset gradient to drrev (T, E) of its head. One row tile at a
 * time: its dP, dS and dQ rows, and rank-4 updates of dK, dV and dR (G, H, R), which stay in cache. */
static void FN(backward_one_)(int T, const int E, const REAL *q, long qst, const REAL *k, long kst, const REAL *v,
                              long vst, const REAL *rrev, const REAL *y, const REAL *P, const REAL *dy, REAL *dq,
                              long dqst, REAL *dk, long dkst, REAL *dv, long dvst, REAL *drrev, FN(work_) w) {
    const int T8 = (T + 7) & ~7, LD = ((T + 15) & ~15) + 16;
    REAL *D = w.S, *dM = w.M; /* the row tile's dS and its offsets' side */
    FN(dense_rows_)(T, E, q, qst, w.Q);
    FN(dense_rows_)(T, E, k, kst, w.K);
    FN(dense_rows_)(T, E, dy, E, w.V);   /* dY */
    FN(transposed_)(T, E, v, vst, w.XT); /* V^T */
    for (int i = 0; i < T8 * E; ++i) w.G[i] = w.H[i] = w.R[i] = 0;
    for (int t0 = 0; t0 < T8; t0 += 4) {
        const int jn = t0 + 4 < T ? t0 + 4 : T, m0 = FN(first_offset_)(T, t0);
        FN(tile_nt_)(E, w.V + t0 * E, E, w.XT, LD, D, LD, 0, (t0 + 4 + 15) & ~15); /* dP = dY V^T */
        for (int t = t0; t < t0 + 4; ++t) {
            /* dS[t][j] = P[t][j] (dP[t][j] - dy_t . y_t), and dM[t][T-1-t+j] = dS[t][j]: the offsets' side */
            REAL *d = D + (long)(t - t0) * LD, *dm = dM + (long)(t - t0) * LD;
            const REAL *Pt = P + (long)t * T8;
            for (int j = 0; j < LD; ++j) dm[j] = 0;
            if (t >= T) {
                for (int j = 0; j < LD; ++j) d[j] = 0;
                continue;
            }
            REAL rowsum = 0;
            for (int c = 0; c < E; ++c) rowsum += dy[t * E + c] * y[t * E + c];
            /* whole vector chunks: P is zero past the diagonal, so dS is too, as far as the tile reads */
            const int Lv = (t + 1 + VL - 1) / VL * VL;
            for (int j = 0; j < Lv; j += VL) {
                const VEC x = LOAD(Pt + j) * (LOAD(d + j) - rowsum);
                STORE(d + j, x);
                STORE(dm + (T - 1 - t) + j, x);
            }
        }
        REAL gq[4 * 64] = {0};
        FN(tile_nn_)(E, D, LD, w.K, gq, 0, jn);   /* dQ = dS K + dM R */
        FN(tile_nn_)(E, dM, LD, rrev, gq, m0, T);
        for (int t = t0; t < jn; ++t)
            for (int c = 0; c < E; ++c) dq[t * dqst + c] = gq[(t - t0) * E + c];
        FN(tile_rank4_)(E, D, LD, w.Q + t0 * E, w.G, 0, jn);      /* dK += dS^T Q */
        FN(tile_rank4_)(E, P + (long)t0 * T8, T8, w.V + t0 * E, w.H, 0, jn); /* dV += P^T dY */
        FN(tile_rank4_)(E, dM, LD, w.Q + t0 * E, w.R, m0, T);    /* dR += dM^T Q */
    }
    for (int j = 0; j < T; ++j)
        for (int c = 0; c < E; ++c) {
            dk[j * dkst + c] = w.G[j * E + c];
            dv[j * dvst + c] = w.H[j * E + c];
            drrev[j * E + c] += w.R[j * E + c];
        }
}

/* Backward of relative_attention_forward: dy (n, T, E) dense; writes dq, dk, dv (strides like q's) and
 * drrev (nh, T, E) dense. 0, or 2 when out of memory. */
int FN(relative_attention_backward)(int n, int T, int E, int nh, const REAL *q, long qsn, long qst, const REAL *k,
                                    long ksn, long kst, const REAL *v, long vsn, long vst, const REAL *rrev,
                                    const REAL *y, const REAL *P, const REAL *dy, REAL *dq, long dqsn, long dqst,
                                    REAL *dk, long dksn, long dkst, REAL *dv, long dvsn, long dvst, REAL *drrev) {
    const long T8 = (T + 7) & ~7;
    FN(work_) w = FN(work_alloc_)(T, E);
    if (w.Q == NULL) return 2;
    for (long i = 0; i < (long)nh * T * E; ++i) drrev[i] = 0;
    for (int i = 0; i < n; ++i) {
        const long h = i % nh, o = (long)i * T * E;
        if (E == 16)
            FN(backward_one_)(T, 16, q + i * qsn, qst, k + i * ksn, kst, v + i * vsn, vst, rrev + h * T * E, y + o,
                              P + i * T8 * T8, dy + o, dq + i * dqsn, dqst, dk + i * dksn, dkst, dv + i * dvsn, dvst,
                              drrev + h * T * E, w);
        else
            FN(backward_one_)(T, E, q + i * qsn, qst, k + i * ksn, kst, v + i * vsn, vst, rrev + h * T * E, y + o,
                              P + i * T8 * T8, dy + o, dq + i * dqsn, dqst, dk + i * dksn, dkst, dv + i * dvsn, dvst,
                              drrev + h * T * E, w);
    }
    free(w.Q);
    return 0;
}

#undef FN
#undef VL
#undef VEC
#undef LOAD
#undef STORE
