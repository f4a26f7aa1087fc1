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

#undef FN
#undef VL
#undef VEC
#undef LOAD
#undef STORE
