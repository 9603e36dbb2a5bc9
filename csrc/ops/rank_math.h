// Ordering of attribution scores for ranking (DESIGN.md section 2): descending score,
// ties by the lower flat index, NaN last. Shared by the CPU radix sort and the CUDA sorts.
#pragma once

#include <cstdint>

#include "ops/channel_reduce_math.h"

namespace roarfast {

// A 32-bit key whose ascending unsigned order is the score's descending order, NaN after
// everything (-inf included). -0 and +0 map to one key so that they tie, as they compare equal.
// A stable ascending sort of (key, index) pairs in index order therefore gives the rank order.
ROARFAST_HD uint32_t rank_key(float score) {
  if (score != score) return 0xFFFFFFFFu;
  if (score == 0.0f) score = 0.0f;
  const uint32_t u = float_bits(score);
  const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~ascending;
}

// The score of one ranking unit of an image whose channels are `plane` elements apart:
// the channel reduction for pixel units, the value itself otherwise.
template <typename T>
ROARFAST_HD float unit_score(const T* image, int64_t channels, int64_t plane, int64_t unit, ChannelReduce reduce) {
  if (reduce == ChannelReduce::kNone || reduce == ChannelReduce::kValue) return static_cast<float>(image[unit]);
  float acc = reduce_init(reduce);
  for (int64_t c = 0; c < channels; ++c) acc = reduce_step(reduce, acc, static_cast<float>(image[c * plane + unit]));
  return acc;
}

}  // namespace roarfast
