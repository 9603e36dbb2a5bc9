// Channel reductions: parsing the names the schemas take as strings, and the reduce_channels op
// ([B,C,H,W] maps -> float32 [B,H,W] pixel scores). Schema and checks in channel_reduce.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ops/channel_reduce_math.h"

namespace roarfast {

// "sum_sq" | "abs_sum" | "max" | "value" | "none"; anything else is an error naming the choices.
ChannelReduce parse_channel_reduce(const std::string& name, const char* arg_name);

// What a reduce_channels call will do, from check_reduce_channels_args.
struct ReducePlan {
  int64_t batch, channels, plane;
  ChannelReduce reduce;
  std::vector<int64_t> out_sizes;  // [B,H,W]
};

ReducePlan check_reduce_channels_args(const at::Tensor& scores, const std::string& reduction);

at::Tensor reduce_channels_cpu(const at::Tensor& scores, c10::string_view reduction);

}  // namespace roarfast
