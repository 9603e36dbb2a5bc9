// Schemas and argument checks of roarfast::ensemble_update and roarfast::ensemble_finalize.
// Kernels: cpu/ensemble_kernel.cpp, cuda/ensemble_kernel.cu.
#include "ops/ensemble.h"

#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {
namespace {

// mean and m2: the running state, float32 [B,C,H,W], contiguous (updated in place), one device.
void check_state(const at::Tensor& mean, const at::Tensor& m2, int64_t count) {
  check_dim(mean, "mean", 4, "[B,C,H,W]");
  check_same_device(mean, "mean", m2, "m2");
  TORCH_CHECK(mean.scalar_type() == at::kFloat, "mean should be float32, got ", mean.scalar_type());
  TORCH_CHECK(m2.scalar_type() == at::kFloat, "m2 should be float32, got ", m2.scalar_type());
  TORCH_CHECK(m2.sizes() == mean.sizes(), "m2 should have the shape of mean ", mean.sizes(), ", got ", m2.sizes());
  TORCH_CHECK(mean.is_contiguous(), "mean should be contiguous (it is updated in place)");
  TORCH_CHECK(m2.is_contiguous(), "m2 should be contiguous (it is updated in place)");
  TORCH_CHECK(count >= 0, "count should be >= 0 (samples merged so far), got ", count);
}

}  // namespace

void check_ensemble_update_args(const at::Tensor& mean, const at::Tensor& m2, int64_t count, const at::Tensor& grads) {
  check_state(mean, m2, count);
  check_same_device(mean, "mean", grads, "grads");
  check_dim(grads, "grads", 5, "[n,B,C,H,W]");
  const auto dtype = grads.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "grads should be float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(grads.sizes().slice(1) == mean.sizes(), "grads should be [n,B,C,H,W] with [B,C,H,W] = ", mean.sizes(),
              " (the shape of mean), got ", grads.sizes());
}

FinalizePlan check_ensemble_finalize_args(const at::Tensor& mean, const at::Tensor& m2, int64_t count,
                                          const std::string& reduction) {
  check_state(mean, m2, count);
  TORCH_CHECK(count > 0, "count should be > 0 to finalize (no samples were merged), got ", count);
  FinalizePlan plan;
  plan.reduce = parse_channel_reduce(reduction, "reduction");
  TORCH_CHECK(plan.reduce != ChannelReduce::kValue,
              "reduction should be none, sum_sq, abs_sum or max for ensemble_finalize, got 'value'");
  const int64_t batch = mean.size(0), channels = mean.size(1), plane = mean.size(2) * mean.size(3);
  if (plan.reduce == ChannelReduce::kNone) {
    plan.units = batch * channels * plane;
    plan.channels = 1;
    plan.plane = channels * plane;
    plan.out_sizes = mean.sizes().vec();
  } else {
    plan.units = batch * plane;
    plan.channels = channels;
    plan.plane = plane;
    plan.out_sizes = {batch, mean.size(2), mean.size(3)};
  }
  return plan;
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("ensemble_update(Tensor(a!) mean, Tensor(b!) m2, int count, Tensor grads) -> ()");
  m.def("ensemble_finalize(Tensor mean, Tensor m2, int count, str reduction='none') -> (Tensor, Tensor, Tensor)");
}
