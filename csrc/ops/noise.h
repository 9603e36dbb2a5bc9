// noise: n noisy copies of a batch for SmoothGrad. Schema and checks in noise.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace roarfast {

// What a noise call will do, worked out once from the arguments by plan_noise.
struct NoisePlan {
  at::Tensor x;      // contiguous [B,C,H,W]
  at::Tensor sigma;  // float32 [B]: noise_level * (max - min) per image
  at::Tensor out;    // uninitialized [n*B,C,H,W], x's dtype
  int64_t batch;
  int64_t image_elems;  // C*H*W
  int64_t groups;       // ceil(image_elems / 4): one Philox block each
  uint64_t seed;
  uint64_t offset;
  at::Tensor seeds;  // int64 [B] on x's device, or undefined: image b keyed by seeds[b] (its counter's image 0)
};

NoisePlan plan_noise(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset,
                     const std::optional<at::Tensor>& seeds);

at::Tensor noise_cpu(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset,
                     const std::optional<at::Tensor>& seeds);

}  // namespace roarfast
