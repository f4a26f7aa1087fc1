/* Causal softmax attention with one learned vector per relative offset, forward and backward, on
 * one CPU thread: the native path of sim/accel/relative_attention.py (which states the function
 * and holds the PyTorch path this is tested against).
 *
 * At Edelman et al.'s sizes (T = 100, head width 16) the work per sequence is a handful of
 * (100 x 16) by (16 x 100) products, too small for BLAS calls to pay off: here each product is a
 * loop over 4 x 16 output tiles held in registers (GCC/Clang vector extensions, so no
 * instruction-set intrinsics), over the causal triangle only, with every buffer of a sequence in
 * cache. Built at first use by sim/accel/native.py; float32 and float64 versions of every entry
 * point (the float64 one is what gradcheck tests).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));

/* exp(z) lane by lane for z <= 0: Cody-Waite reduction z = n ln2 + r, |r| <= ln2 / 2, and the
 * degree-7 Taylor polynomial of exp(r) (relative error below 1e-7, float32's own); 0 below -87,
 * where exp(z) < 2e-38. A NaN stays NaN. */
static inline v8f exp_nonpositive_f32(v8f z) {
    const v8i live = ~(z <= -87.0f);
    const v8f zc = (v8f)(((v8i)z & live) | ((v8i)((v8f){0} - 87.0f) & ~live));
    const v8i n = __builtin_convertvector(zc * 1.44269504f - 0.5f, v8i); /* round(zc / ln2), zc <= 0 */
    const v8f nf = __builtin_convertvector(n, v8f);
    const v8f r = (zc - nf * 0.693145752f) - nf * 1.42860677e-6f;       /* ln2 in two parts */
    v8f p = r * (1.0f / 5040) + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return (v8f)((v8i)(p * (v8f)((n + 127) << 23)) & live);             /* times 2^n */
}

/* float64 serves the exactness tests: libm's exp, one lane at a time. */
static inline v4d exp_nonpositive_f64(v4d z) {
    for (int i = 0; i < 4; ++i) z[i] = exp(z[i]);
    return z;
}

#define REAL float
#define SUFFIX _f32
#define VINT v8i
#define EXP_NONPOSITIVE exp_nonpositive_f32
#include "relative_attention_kernels.h"
#undef REAL
#undef SUFFIX
#undef VINT
#undef EXP_NONPOSITIVE

#define REAL double
#define SUFFIX _f64
#define VINT v4l
#define EXP_NONPOSITIVE exp_nonpositive_f64
#include "relative_attention_kernels.h"
