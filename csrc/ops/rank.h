// rank: scores -> per-unit ranks, rank 0 = most important. Schema and checks in rank.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "ops/channel_reduce.h"

namespace roarfast {

// What a rank call will do, worked out once from the arguments by check_rank_args.
struct RankPlan {
  int64_t batch;     // images
  int64_t units;     // ranked units per image (pixels, or C*H*W values)
  int64_t channels;  // channels folded into one pixel score (1 when nothing is folded)
  int64_t plane;     // distance between channels of one pixel, in elements
  ChannelReduce reduce;
  at::ScalarType out_dtype;  // uint16 when units <= 65536, else int32
  std::vector<int64_t> out_sizes;
};

RankPlan check_rank_args(const at::Tensor& scores, const std::string& reduction);

at::Tensor rank_cpu(const at::Tensor& scores, c10::string_view reduction);

}  // namespace roarfast
