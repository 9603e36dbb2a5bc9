// ensemble_update / ensemble_finalize: running moments of noisy gradients. Schemas and checks in ensemble.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <vector>

#include "ops/channel_reduce.h"

namespace roarfast {

// Checks the running state (mean, m2: float32 [B,C,H,W], contiguous, one device) and grads [n,B,C,H,W].
void check_ensemble_update_args(const at::Tensor& mean, const at::Tensor& m2, int64_t count, const at::Tensor& grads);

// What a finalize call will do: the output units and how channels fold into them.
struct FinalizePlan {
  int64_t units;     // outputs per map: B*H*W, or B*C*H*W for "none"
  int64_t channels;  // values folded into one output (1 for "none")
  int64_t plane;     // distance between those values (C*H*W for "none", so that b = unit / plane)
  ChannelReduce reduce;
  std::vector<int64_t> out_sizes;
};

FinalizePlan check_ensemble_finalize_args(const at::Tensor& mean, const at::Tensor& m2, int64_t count,
                                          const std::string& reduction);

void ensemble_update_cpu(at::Tensor& mean, at::Tensor& m2, int64_t count, const at::Tensor& grads);
std::tuple<at::Tensor, at::Tensor, at::Tensor> ensemble_finalize_cpu(const at::Tensor& mean, const at::Tensor& m2,
                                                                     int64_t count, c10::string_view reduction);

}  // namespace roarfast
