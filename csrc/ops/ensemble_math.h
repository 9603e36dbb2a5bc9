// Streaming moments of the SmoothGrad ensemble (README, "Semantics"), shared by the CPU and CUDA
// ensemble kernels: Welford within a chunk of samples, the Chan et al. merge of the chunk into the
// running (count, mean, M2), and the finalize to SG, SG-SQ and VAR. All in float32.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/channel_reduce_math.h"

namespace roarfast {

// Folds the (seen+1)-th value x into a running (mean, m2) of `seen` values (Welford).
ROARFAST_HD void welford_step(float x, int64_t seen, float& mean, float& m2) {
  const float delta = x - mean;
  mean += delta / static_cast<float>(seen + 1);
  m2 += delta * (x - mean);
}

// Merges moments b into a (Chan, Golub, LeVeque): exact for any split of the samples, and every
// term added to m2 is >= 0, so the variance never goes negative.
ROARFAST_HD void chan_merge(int64_t count_a, float& mean_a, float& m2_a, int64_t count_b, float mean_b, float m2_b) {
  const int64_t count = count_a + count_b;
  if (count == 0) return;
  const float delta = mean_b - mean_a;
  const float weight_b = static_cast<float>(count_b) / static_cast<float>(count);
  mean_a += delta * weight_b;
  m2_a += m2_b + delta * delta * static_cast<float>(count_a) * weight_b;
}

// One element of an update: the n samples of grads at e (samples `stride` apart) merged into mean/m2.
template <typename T>
ROARFAST_HD void ensemble_update_element(const T* grads, int64_t n, int64_t stride, int64_t e, int64_t count,
                                         float* mean, float* m2) {
  float chunk_mean = 0.0f, chunk_m2 = 0.0f;
  for (int64_t i = 0; i < n; ++i) welford_step(static_cast<float>(grads[i * stride + e]), i, chunk_mean, chunk_m2);
  float m = mean[e], q = m2[e];
  chan_merge(count, m, q, n, chunk_mean, chunk_m2);
  mean[e] = m;
  m2[e] = q;
}

// SG, SG-SQ, VAR of one value: mean g, mean g^2 = m2/count + mean^2, population variance >= 0.
ROARFAST_HD void ensemble_moments(float mean, float m2, int64_t count, float& sg, float& sg_sq, float& var) {
  const float spread = m2 / static_cast<float>(count);
  sg = mean;
  sg_sq = spread + mean * mean;
  var = fmaxf(spread, 0.0f);
}

// One output unit of finalize: unit = b*plane + p; its `channels` values (plane apart) are reduced
// by `reduce` (kNone with channels = 1: the value itself).
ROARFAST_HD void ensemble_finalize_unit(const float* mean, const float* m2, int64_t count, int64_t channels,
                                        int64_t plane, ChannelReduce reduce, int64_t unit, float* sg, float* sg_sq,
                                        float* var) {
  const int64_t b = unit / plane, p = unit - b * plane;
  float acc_sg = reduce_init(reduce), acc_sq = reduce_init(reduce), acc_var = reduce_init(reduce);
  for (int64_t c = 0; c < channels; ++c) {
    const int64_t e = (b * channels + c) * plane + p;
    float s, q, v;
    ensemble_moments(mean[e], m2[e], count, s, q, v);
    acc_sg = reduce_step(reduce, acc_sg, s);
    acc_sq = reduce_step(reduce, acc_sq, q);
    acc_var = reduce_step(reduce, acc_var, v);
  }
  sg[unit] = acc_sg;
  sg_sq[unit] = acc_sq;
  var[unit] = acc_var;
}

}  // namespace roarfast
