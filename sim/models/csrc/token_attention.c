/* The core of the token-only first attention layer (sim/models/fused_layers.py, TokenOnlyAttention),
 * forward and backward, on one CPU thread. That file states the layer and holds the PyTorch path this
 * is tested against. Per head h, sequence n and position t, with a = x_t the query's type:
 *
 *   G[t, b] = sum_{j <= t, x_j = b} eR[a, t - j]        (eR = exp of the shifted offset scores)
 *   W[t, b] = eA[a, b] G[t, b],  Z[t] = sum_b W[t, b],  Wn[t, b] = W[t, b] / Z[t]
 *
 * and the backward from dWn to the gradients of eA and eR. Each sum over j is a vector dot product
 * of the one-hot row of type b against the reversed eR row of type a (zero-padded, so lanes past
 * the diagonal add nothing). Built at first use by sim/models/native.py.
 */
#include <stdint.h>
#include <stdlib.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SUFFIX _f32
#include "token_attention_kernels.h"
#undef REAL
#undef SUFFIX

#define REAL double
#define SUFFIX _f64
#include "token_attention_kernels.h"
