/* The kernels of token_attention.c, included once per scalar type with REAL and SUFFIX defined.
 * Arrays: tokens (n, T) int64 in [0, C); eA (nh, C, C); eR (nh, C, T); Wn, G (n T, nh C) with rows
 * (sequence, position) and columns (head, type); Z (n T, nh). Row buffers are T + 2 VL long,
 * so vector chunks of the causal prefix never leave them. */
#define FN(name) CAT(name, SUFFIX)
#define VL ((int)(32 / sizeof(REAL)))
#define VEC FN(tvec_)
#define LOAD(p) (*(const FN(tuvec_) *)(p))
#define STORE(p, x) (*(FN(tuvec_) *)(p) = (x))

typedef REAL FN(tvec_) __attribute__((vector_size(32)));
typedef REAL FN(tuvec_) __attribute__((vector_size(32), aligned(sizeof(REAL)), may_alias));

/* Rev[a][T-1-d] = eR[h][a][d] for d < T, zero after: row length TP = T + 2 VL. */
static void FN(reversed_rows_)(int T, int C, const REAL *eR, REAL *Rev) {
    const int TP = T + 2 * VL;
    for (int a = 0; a < C; ++a) {
        for (int d = 0; d < T; ++d) Rev[a * TP + T - 1 - d] = eR[a * T + d];
        for (int m = T; m < TP; ++m) Rev[a * TP + m] = 0;
    }
}

/* One-hot rows of sequence x: O[b][j] = [x_j = b], row length TP. 0, or 1 if a token is out of range. */
static int FN(one_hot_)(int T, int C, const int64_t *x, REAL *O) {
    const int TP = T + 2 * VL;
    for (long i = 0; i < (long)C * TP; ++i) O[i] = 0;
    for (int j = 0; j < T; ++j) {
        if (x[j] < 0 || x[j] >= C) return 1;
        O[x[j] * TP + j] = 1;
    }
    return 0;
}

/* sum_{j < L} O[j] Rev[j] over vector chunks (Rev's zero tail ends the causal prefix). */
static inline REAL FN(prefix_dot_)(const REAL *O, const REAL *Rev, int L) {
    VEC acc = {0};
    for (int j = 0; j < L; j += VL) acc += LOAD(O + j) * LOAD(Rev + j);
    REAL s = 0;
    for (int i = 0; i < VL; ++i) s += acc[i];
    return s;
}

/* Forward for n sequences; 0, 1 for a token out of [0, C), 2 when out of memory. */
int FN(token_attention_forward)(int n, int T, int C, int nh, const int64_t *tokens, const REAL *eA, const REAL *eR,
                                REAL *Wn, REAL *G, REAL *Z) {
    const int TP = T + 2 * VL, row = nh * C;
    REAL *Rev = malloc(sizeof(REAL) * (size_t)nh * C * TP), *O = malloc(sizeof(REAL) * (size_t)C * TP);
    int status = (Rev == NULL || O == NULL) ? 2 : 0;
    for (int h = 0; h < nh && !status; ++h) FN(reversed_rows_)(T, C, eR + (long)h * C * T, Rev + (long)h * C * TP);
    for (int i = 0; i < n && !status; ++i) {
        const int64_t *x = tokens + (long)i * T;
        if (FN(one_hot_)(T, C, x, O)) { status = 1; break; }
        for (int t = 0; t < T; ++t) {
            const long o = ((long)i * T + t);
            const int a = (int)x[t];
            for (int h = 0; h < nh; ++h) {
                /* Rev row a from column T-1-t: Rev[a][T-1-t+j] = eR[a][t-j], zero for j > t */
                const REAL *rev = Rev + ((long)h * C + a) * TP + (T - 1 - t);
                REAL *g = G + o * row + h * C, *wn = Wn + o * row + h * C, z = 0;
                for (int b = 0; b < C; ++b) {
                    g[b] = FN(prefix_dot_)(O + (long)b * TP, rev, t + 1);
                    wn[b] = eA[((long)h * C + a) * C + b] * g[b];
                    z += wn[b];
                }
                for (int b = 0; b < C; ++b) wn[b] /= z;
                Z[o * nh + h] = z;
            }
        }
    }
    free(Rev); free(O);
    return status;
}

/* Backward: from dWn (n T, nh C) to deA (nh, C, C) and deR (nh, C, T), both overwritten. */
int FN(token_attention_backward)(int n, int T, int C, int nh, const int64_t *tokens, const REAL *eA, const REAL *Wn,
                                 const REAL *G, const REAL *Z, const REAL *dWn, REAL *deA, REAL *deR) {
    const int TP = T + 2 * VL, row = nh * C;
    REAL *dRev = calloc((size_t)nh * C * TP, sizeof(REAL)), *O = malloc(sizeof(REAL) * (size_t)C * TP);
    REAL *dG = malloc(sizeof(REAL) * (size_t)C);
    int status = (dRev == NULL || O == NULL || dG == NULL) ? 2 : 0;
    for (long i = 0; i < (long)nh * C * C; ++i) deA[i] = 0;
    for (int i = 0; i < n && !status; ++i) {
        const int64_t *x = tokens + (long)i * T;
        if (FN(one_hot_)(T, C, x, O)) { status = 1; break; }
        for (int t = 0; t < T; ++t) {
            const long o = ((long)i * T + t);
            const int a = (int)x[t], Lv = (t + 1 + VL - 1) / VL * VL;
            for (int h = 0; h < nh; ++h) {
                const REAL *wn = Wn + o * row + h * C, *dwn = dWn + o * row + h * C, *g = G + o * row + h * C;
                const REAL *ea = eA + ((long)h * C + a) * C;
                REAL s = 0;
                for (int b = 0; b < C; ++b) s += dwn[b] * wn[b];
                const REAL inv = 1 / Z[o * nh + h];
                for (int b = 0; b < C; ++b) {
                    const REAL dW = (dwn[b] - s) * inv; /* through W / sum_b W */
                    deA[((long)h * C + a) * C + b] += dW * g[b];
                    dG[b] = dW * ea[b];
                }
                /* deR[a][t-j] += sum_b dG[b] [x_j = b], j <= t: lanes past t land in the padding */
                REAL *drev = dRev + ((long)h * C + a) * TP + (T - 1 - t);
                for (int j = 0; j < Lv; j += VL) {
                    VEC acc = LOAD(drev + j);
                    for (int b = 0; b < C; ++b) acc += dG[b] * LOAD(O + (long)b * TP + j);
                    STORE(drev + j, acc);
                }
            }
        }
    }
    for (int h = 0; h < nh && !status; ++h)
        for (int a = 0; a < C; ++a)
            for (int d = 0; d < T; ++d) deR[((long)h * C + a) * T + d] = dRev[((long)h * C + a) * TP + T - 1 - d];
    free(dRev); free(O); free(dG);
    return status;
}


/* ---- the whole layer: out = E[x_t] + sum_{h,b} Wn[t, h, b] U[h, b], with its C-row tables ---- */

/* The layer's C-row tables, recomputed from the parameters by forward and backward alike. */
typedef struct {
    REAL *X, *xhat, *rstd, *Q, *K, *V, *eA, *eR, *U;
} FN(tables_);

/* Tables for C states, width w, nh heads, T positions: X = LN(E) (and xhat, rstd); Q = X Wq^T / sqrt(e),
 * K = X Wk^T, V = X Wv^T (C, w); eA = exp(A - rowmax) (nh, C, C), A[h][a][b] = Q_a . K_b over head h's
 * columns; eR = exp(R - rowmax) (nh, C, T), R[h][a][d] = Q_a . r_d; U[(h, b)][o] = sum_i V[b][h e + i]
 * Wo[o][h e + i] (nh C, w). 4 when a shifted exponent A[a][a] + R[a][0] is below -60 (the caller then
 * takes the general path), else 0. */
static int FN(tables_fill_)(int C, int w, int nh, int T, const REAL *E, const REAL *g, const REAL *b, REAL eps,
                            const REAL *Wq, const REAL *Wk, const REAL *Wv, const REAL *Wo, const REAL *r,
                            FN(tables_) m) {
    const int e = w / nh;
    const REAL scale = 1 / SQRT((REAL)e);
    for (int a = 0; a < C; ++a) {
        const REAL *row = E + (long)a * w;
        REAL mean = 0, var = 0;
        for (int c = 0; c < w; ++c) mean += row[c];
        mean /= w;
        for (int c = 0; c < w; ++c) var += (row[c] - mean) * (row[c] - mean);
        m.rstd[a] = 1 / SQRT(var / w + eps);
        for (int c = 0; c < w; ++c) {
            m.xhat[a * w + c] = (row[c] - mean) * m.rstd[a];
            m.X[a * w + c] = m.xhat[a * w + c] * g[c] + b[c];
        }
    }
    for (int a = 0; a < C; ++a)
        for (int o = 0; o < w; ++o) {
            REAL q = 0, k = 0, v = 0;
            for (int c = 0; c < w; ++c) {
                const REAL x = m.X[a * w + c];
                q += x * Wq[o * w + c];
                k += x * Wk[o * w + c];
                v += x * Wv[o * w + c];
            }
            m.Q[a * w + o] = q * scale;
            m.K[a * w + o] = k;
            m.V[a * w + o] = v;
        }
    int underflow = 0;
    for (int h = 0; h < nh; ++h)
        for (int a = 0; a < C; ++a) {
            const REAL *q = m.Q + a * w + h * e;
            REAL *eA = m.eA + ((long)h * C + a) * C, *eR = m.eR + ((long)h * C + a) * T;
            REAL topA = -INFINITY, topR = -INFINITY;
            for (int bb = 0; bb < C; ++bb) {
                REAL s = 0;
                for (int i = 0; i < e; ++i) s += q[i] * m.K[bb * w + h * e + i];
                eA[bb] = s;
                topA = s > topA ? s : topA;
            }
            for (int d = 0; d < T; ++d) {
                REAL s = 0;
                for (int i = 0; i < e; ++i) s += q[i] * r[(long)d * w + h * e + i];
                eR[d] = s;
                topR = s > topR ? s : topR;
            }
            if ((eA[a] - topA) + (eR[0] - topR) < -60) underflow = 1;
            for (int bb = 0; bb < C; ++bb) eA[bb] = EXP(eA[bb] - topA);
            for (int d = 0; d < T; ++d) eR[d] = EXP(eR[d] - topR);
        }
    for (int h = 0; h < nh; ++h)
        for (int bb = 0; bb < C; ++bb)
            for (int o = 0; o < w; ++o) {
                REAL u = 0;
                for (int i = 0; i < e; ++i) u += m.V[bb * w + h * e + i] * Wo[o * w + h * e + i];
                m.U[((long)h * C + bb) * w + o] = u;
            }
    return underflow ? 4 : 0;
}

static REAL *FN(tables_alloc_)(int C, int w, int nh, int T, FN(tables_) *m) {
    const long n = 5L * C * w + C + (long)nh * C * C + (long)nh * C * T + (long)nh * C * w;
    REAL *buf = malloc(sizeof(REAL) * n);
    if (buf != NULL) {
        m->X = buf; m->xhat = m->X + C * w; m->Q = m->xhat + C * w; m->K = m->Q + C * w; m->V = m->K + C * w;
        m->rstd = m->V + C * w; m->eA = m->rstd + C; m->eR = m->eA + (long)nh * C * C; m->U = m->eR + (long)nh * C * T;
    }
    return buf;
}

/* out (n T, w); saves Wn, G (n T, nh C) and Z (n T, nh) for the backward. E (C, w), ln_w, ln_b (w), Wq, Wk,
 * Wv, Wo (w, w) as nn.Linear's, r (>= T, w) the offsets (head h in columns [h e, (h + 1) e)). Status: 0;
 * 1 a token outside [0, C); 2 out of memory; 4 the exponentials could underflow. */
int FN(token_layer_forward)(int n, int T, int C, int w, int nh, const int64_t *tokens, const REAL *E, const REAL *g,
                            const REAL *b, double eps, const REAL *Wq, const REAL *Wk, const REAL *Wv, const REAL *Wo,
                            const REAL *r, REAL *out, REAL *Wn, REAL *G, REAL *Z) {
    FN(tables_) m;
    REAL *buf = FN(tables_alloc_)(C, w, nh, T, &m);
    if (buf == NULL) return 2;
    int status = FN(tables_fill_)(C, w, nh, T, E, g, b, (REAL)eps, Wq, Wk, Wv, Wo, r, m);
    if (!status) status = FN(token_attention_forward)(n, T, C, nh, tokens, m.eA, m.eR, Wn, G, Z);
    if (!status) {
        const int row = nh * C;
        for (long i = 0; i < (long)n * T; ++i) {
            REAL *o = out + i * w;
            const REAL *wn = Wn + i * row;
            for (int c = 0; c < w; ++c) o[c] = E[tokens[i] * w + c];
            for (int k = 0; k < row; ++k)
                for (int c = 0; c < w; ++c) o[c] += wn[k] * m.U[(long)k * w + c];
        }
    }
    free(buf);
    return status;
}

/* Gradients of the layer from dout (n T, w): dE (C, w), dln_w, dln_b (w), dWq, dWk, dWv, dWo (w, w) and dr
 * (R, w) (rows from T on zero), all overwritten. Same status codes as the forward. */
int FN(token_layer_backward)(int n, int T, int C, int w, int nh, int R, const int64_t *tokens, const REAL *E,
                             const REAL *g, const REAL *b, double eps, const REAL *Wq, const REAL *Wk, const REAL *Wv,
                             const REAL *Wo, const REAL *r, const REAL *Wn, const REAL *G, const REAL *Z,
                             const REAL *dout, REAL *dE, REAL *dg, REAL *db, REAL *dWq, REAL *dWk, REAL *dWv,
                             REAL *dWo, REAL *dr) {
    const int e = w / nh, row = nh * C;
    const REAL scale = 1 / SQRT((REAL)e);
    FN(tables_) m;
    REAL *buf = FN(tables_alloc_)(C, w, nh, T, &m);
    /* dU (nh C, w), dWn (n T, nh C), deA (nh, C, C), deR (nh, C, T), dQ, dK, dV, dX (C, w) */
    REAL *work = malloc(sizeof(REAL) * ((size_t)row * w + (size_t)n * T * row + (size_t)nh * C * (C + T)
                                        + 4 * (size_t)C * w));
    int status = (buf == NULL || work == NULL) ? 2 : 0;
    for (long i = 0; i < (long)n * T && !status; ++i)
        if (tokens[i] < 0 || tokens[i] >= C) status = 1;
    if (!status) status = FN(tables_fill_)(C, w, nh, T, E, g, b, (REAL)eps, Wq, Wk, Wv, Wo, r, m);
    REAL *dU = work, *dWn = dU + (long)row * w, *deA = dWn + (long)n * T * row, *deR = deA + (long)nh * C * C;
    REAL *dQ = deR + (long)nh * C * T, *dK = dQ + C * w, *dV = dK + C * w, *dX = dV + C * w;
    if (!status) {
        for (long i = 0; i < (long)row * w; ++i) dU[i] = 0;
        for (long i = 0; i < (long)C * w; ++i) dE[i] = 0;
        for (long i = 0; i < (long)n * T; ++i) { /* dU += Wn^T dout, dWn = dout U^T, and the residual's dE */
            const REAL *d = dout + i * w, *wn = Wn + i * row;
            REAL *dwn = dWn + i * row, *de = dE + tokens[i] * w;
            for (int k = 0; k < row; ++k) {
                REAL s = 0;
                for (int c = 0; c < w; ++c) {
                    dU[(long)k * w + c] += wn[k] * d[c];
                    s += d[c] * m.U[(long)k * w + c];
                }
                dwn[k] = s;
            }
            for (int c = 0; c < w; ++c) de[c] += d[c];
        }
        status = FN(token_attention_backward)(n, T, C, nh, tokens, m.eA, Wn, G, Z, dWn, deA, deR);
    }
    if (!status) {
        for (long i = 0; i < (long)w * w; ++i) dWo[i] = 0;
        for (long i = 0; i < 4L * C * w; ++i) dQ[i] = 0; /* dQ, dK, dV, dX */
        for (long i = 0; i < (long)R * w; ++i) dr[i] = 0;
        for (int h = 0; h < nh; ++h) {
            for (int bb = 0; bb < C; ++bb) /* U = V_h Wo_h^T: dV and dWo */
                for (int o = 0; o < w; ++o) {
                    const REAL du = dU[((long)h * C + bb) * w + o];
                    for (int i = 0; i < e; ++i) {
                        dV[bb * w + h * e + i] += du * Wo[o * w + h * e + i];
                        dWo[o * w + h * e + i] += du * m.V[bb * w + h * e + i];
                    }
                }
            for (int a = 0; a < C; ++a) { /* through exp (the row shifts do not change the output) */
                const REAL *ea = m.eA + ((long)h * C + a) * C, *er = m.eR + ((long)h * C + a) * T;
                const REAL *da = deA + ((long)h * C + a) * C, *drr = deR + ((long)h * C + a) * T;
                for (int bb = 0; bb < C; ++bb) {
                    const REAL dA = da[bb] * ea[bb];
                    for (int i = 0; i < e; ++i) {
                        dQ[a * w + h * e + i] += dA * m.K[bb * w + h * e + i];
                        dK[bb * w + h * e + i] += dA * m.Q[a * w + h * e + i];
                    }
                }
                for (int d = 0; d < T; ++d) {
                    const REAL dR = drr[d] * er[d];
                    for (int i = 0; i < e; ++i) {
                        dQ[a * w + h * e + i] += dR * r[(long)d * w + h * e + i];
                        dr[(long)d * w + h * e + i] += dR * m.Q[a * w + h * e + i];
                    }
                }
            }
        }
        for (int o = 0; o < w; ++o) /* the projections: Q = X Wq^T scale, K = X Wk^T, V = X Wv^T */
            for (int c = 0; c < w; ++c) {
                REAL sq = 0, sk = 0, sv = 0;
                for (int a = 0; a < C; ++a) {
                    const REAL x = m.X[a * w + c];
                    sq += dQ[a * w + o] * x;
                    sk += dK[a * w + o] * x;
                    sv += dV[a * w + o] * x;
                }
                dWq[o * w + c] = sq * scale;
                dWk[o * w + c] = sk;
                dWv[o * w + c] = sv;
            }
        for (int a = 0; a < C; ++a)
            for (int c = 0; c < w; ++c) {
                REAL s = 0;
                for (int o = 0; o < w; ++o)
                    s += dQ[a * w + o] * scale * Wq[o * w + c] + dK[a * w + o] * Wk[o * w + c]
                         + dV[a * w + o] * Wv[o * w + c];
                dX[a * w + c] = s;
            }
        for (int c = 0; c < w; ++c) dg[c] = db[c] = 0;
        for (int a = 0; a < C; ++a) { /* the LayerNorm of the C rows, added to the residual's dE */
            const REAL *dx = dX + a * w, *xh = m.xhat + a * w;
            REAL m1 = 0, m2 = 0;
            for (int c = 0; c < w; ++c) {
                dg[c] += dx[c] * xh[c];
                db[c] += dx[c];
                m1 += dx[c] * g[c];
                m2 += dx[c] * g[c] * xh[c];
            }
            m1 /= w;
            m2 /= w;
            for (int c = 0; c < w; ++c) dE[a * w + c] += m.rstd[a] * (dx[c] * g[c] - m1 - xh[c] * m2);
        }
    }
    free(buf); free(work);
    return status;
}

#undef FN
#undef VL
#undef VEC
#undef LOAD
#undef STORE
