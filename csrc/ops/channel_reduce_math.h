// Reduction of a [C,H,W] attribution map to one score per pixel (README, "Semantics").
// Used by rank (scores with channels), reduce_channels and the ensemble finalize step.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/common.h"

namespace roarfast {

// kNone: the input already has one score per unit; kValue: every C*H*W value is a unit of its own.
enum class ChannelReduce : int { kNone = 0, kSumSquares = 1, kAbsSum = 2, kMax = 3, kValue = 4 };

ROARFAST_HD float reduce_init(ChannelReduce r) { return r == ChannelReduce::kMax ? -INFINITY : 0.0f; }

// Folds one channel's value into the running per-pixel score. A NaN anywhere makes the pixel NaN
// (so it ranks last) instead of being silently dropped by fmax.
ROARFAST_HD float reduce_step(ChannelReduce r, float acc, float v) {
  switch (r) {
    case ChannelReduce::kSumSquares: return acc + v * v;
    case ChannelReduce::kAbsSum: return acc + fabsf(v);
    case ChannelReduce::kMax: return (v != v || acc != acc) ? NAN : (v > acc ? v : acc);
    default: return v;
  }
}

// The score of one unit of an image whose channels are `plane` elements apart: the channel
// reduction for pixel units, the value itself otherwise (rank and reduce_channels).
template <typename T>
ROARFAST_HD float unit_score(const T* image, int64_t channels, int64_t plane, int64_t unit, ChannelReduce reduce) {
  if (reduce == ChannelReduce::kNone || reduce == ChannelReduce::kValue) return static_cast<float>(image[unit]);
  float acc = reduce_init(reduce);
  for (int64_t c = 0; c < channels; ++c) acc = reduce_step(reduce, acc, static_cast<float>(image[c * plane + unit]));
  return acc;
}

// The score of pixel `pixel` (= b * plane + p) of [B,C,H,W] scores: unit_score within its image.
template <typename T>
ROARFAST_HD float pixel_score(const T* scores, int64_t channels, int64_t plane, int64_t pixel, ChannelReduce reduce) {
  const int64_t b = pixel / plane;
  return unit_score(scores + b * channels * plane, channels, plane, pixel - b * plane, reduce);
}

}  // namespace roarfast
