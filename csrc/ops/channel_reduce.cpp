// Channel-reduction names, and the schema and argument checks of roarfast::reduce_channels.
// Kernels: cpu/channel_reduce_kernel.cpp, cuda/channel_reduce_kernel.cu.
#include "ops/channel_reduce.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {

ChannelReduce parse_channel_reduce(const std::string& name, const char* arg_name) {
  if (name == "none") return ChannelReduce::kNone;
  if (name == "sum_sq") return ChannelReduce::kSumSquares;
  if (name == "abs_sum") return ChannelReduce::kAbsSum;
  if (name == "max") return ChannelReduce::kMax;
  if (name == "value") return ChannelReduce::kValue;
  TORCH_CHECK(false, arg_name, " should be one of sum_sq, abs_sum, max, value, none; got '", name, "'");
}

ReducePlan check_reduce_channels_args(const at::Tensor& scores, const std::string& reduction) {
  check_dim(scores, "scores", 4, "[B,C,H,W]");
  const auto dtype = scores.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "scores should be float32, float16 or bfloat16, got ", dtype);
  ReducePlan plan;
  plan.reduce = parse_channel_reduce(reduction, "reduction");
  TORCH_CHECK(plan.reduce != ChannelReduce::kNone && plan.reduce != ChannelReduce::kValue,
              "reduction should be sum_sq, abs_sum or max (one score per pixel), got '", reduction, "'");
  plan.batch = scores.size(0);
  plan.channels = scores.size(1);
  plan.plane = scores.size(2) * scores.size(3);
  plan.out_sizes = {plan.batch, scores.size(2), scores.size(3)};
  return plan;
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("reduce_channels(Tensor scores, str reduction) -> Tensor");
}
