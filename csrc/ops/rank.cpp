// Schema and argument checks of roarfast::rank. Kernels: cpu/rank_kernel.cpp, cuda/rank_kernel.cu.
#include "ops/rank.h"

#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {

RankPlan check_rank_args(const at::Tensor& scores, const std::string& reduction) {
  TORCH_CHECK(scores.dim() == 3 || scores.dim() == 4,
              "scores should be [B,H,W] or [B,C,H,W], got ", scores.dim(), "D with shape ", scores.sizes());
  const auto dtype = scores.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "scores should be float32, float16 or bfloat16, got ", dtype);
  RankPlan plan;
  plan.reduce = parse_channel_reduce(reduction, "reduction");
  plan.batch = scores.size(0);
  const int64_t h = scores.size(-2), w = scores.size(-1);
  plan.plane = h * w;
  if (scores.dim() == 3) {
    TORCH_CHECK(plan.reduce == ChannelReduce::kNone,
                "reduction should be 'none' for [B,H,W] scores (nothing to reduce), got '", reduction, "'");
    plan.channels = 1;
    plan.units = plan.plane;
    plan.out_sizes = {plan.batch, h, w};
  } else {
    TORCH_CHECK(plan.reduce != ChannelReduce::kNone,
                "reduction should be sum_sq, abs_sum, max or value for [B,C,H,W] scores, got 'none'");
    plan.channels = scores.size(1);
    if (plan.reduce == ChannelReduce::kValue) {
      plan.units = plan.channels * plan.plane;
      plan.out_sizes = {plan.batch, plan.channels, h, w};
    } else {
      plan.units = plan.plane;
      plan.out_sizes = {plan.batch, h, w};
    }
  }
  TORCH_CHECK(plan.units <= INT32_MAX, "scores should have at most 2^31-1 units per image, got ", plan.units);
  plan.out_dtype = plan.units <= 65536 ? at::kUInt16 : at::kInt;
  return plan;
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("rank(Tensor scores, str reduction='none') -> Tensor");
}
