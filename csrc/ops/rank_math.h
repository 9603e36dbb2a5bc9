// Ordering of attribution scores for ranking (README, "Semantics"): descending score,
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

}  // namespace roarfast
