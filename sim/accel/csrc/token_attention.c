/* The core of the token-only first attention layer (sim/accel/fused_layers.py, TokenOnlyAttention),
 * forward and backward, on one CPU thread. That file states the layer and holds the PyTorch path this
 * is tested against. Per head h, sequence n and position t, with a = x_t the query's type:
 *
 *   G[t, b] = sum_{j <= t, x_j = b} eR[a, t - j]        (eR = exp of the shifted offset scores)
 *   W[t, b] = eA[a, b] G[t, b],  Z[t] = sum_b W[t, b],  Wn[t, b] = W[t, b] / Z[t]
 *
 * and the backward from dWn to the gradients of eA and eR. Each sum over j is a vector dot product
 * of the one-hot row of type b against the reversed eR row of type a (zero-padded, so lanes past
 * the diagonal add nothing). Around it, token_layer_forward and token_layer_backward compute the whole
 * layer from its parameters: the C-row tables (LayerNorm of the embedding rows, projections, shifted
 * exponentials, U = V W_O) and out = E[x_t] + sum_{h,b} Wn[t, h, b] U[h, b], so a training step calls C
 * once each way. Built at first use by sim/accel/native.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SUFFIX _f32
#define EXP expf
#define SQRT sqrtf
#include "token_attention_kernels.h"
#undef REAL
#undef SUFFIX
#undef EXP
#undef SQRT

#define REAL double
#define SUFFIX _f64
#define EXP exp
#define SQRT sqrt
#include "token_attention_kernels.h"
