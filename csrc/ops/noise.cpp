// Schema and argument checks of roarfast::noise. Kernels: cpu/noise_kernel.cpp, cuda/noise_kernel.cu.
#include "ops/noise.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {

NoisePlan plan_noise(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset,
                     const std::optional<at::Tensor>& seeds) {
  check_dim(x, "x", 4, "[B,C,H,W]");
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "x should be float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(n >= 0, "n should be >= 0 (noisy samples per image), got ", n);
  TORCH_CHECK(offset >= 0, "offset should be >= 0 (samples already drawn), got ", offset);
  TORCH_CHECK(noise_level >= 0.0, "noise_level should be >= 0, got ", noise_level);
  NoisePlan plan;
  plan.batch = x.size(0);
  plan.image_elems = x.size(1) * x.size(2) * x.size(3);
  plan.groups = (plan.image_elems + 3) / 4;
  // The Philox counter holds the group and the image in one 32-bit word each.
  TORCH_CHECK(plan.groups <= UINT32_MAX, "x should have at most 2^34 elements per image, got ", plan.image_elems);
  TORCH_CHECK(plan.batch <= UINT32_MAX, "x should have at most 2^32 images, got ", plan.batch);
  plan.seed = static_cast<uint64_t>(seed);
  if (seeds.has_value()) {
    check_dim(*seeds, "seeds", 1, "[B]");
    TORCH_CHECK(seeds->scalar_type() == at::kLong, "seeds should be int64, got ", seeds->scalar_type());
    TORCH_CHECK(seeds->size(0) == plan.batch, "seeds should hold one key per image (", plan.batch, "), got ",
                seeds->size(0));
    TORCH_CHECK(seeds->device() == x.device(), "seeds should be on x's device (", x.device(), "), got ",
                seeds->device());
    plan.seeds = seeds->contiguous();
  }
  plan.offset = static_cast<uint64_t>(offset);
  plan.x = x.contiguous();
  plan.out = at::empty({n * plan.batch, x.size(1), x.size(2), x.size(3)}, plan.x.options());
  if (plan.out.numel() > 0) {
    const auto [lo, hi] = at::aminmax(plan.x.view({plan.batch, plan.image_elems}), 1);
    plan.sigma = ((hi.to(at::kFloat) - lo.to(at::kFloat)) * noise_level).contiguous();
  }
  return plan;
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("noise(Tensor x, int n, float noise_level, int seed, int offset=0, Tensor? seeds=None) -> Tensor");
}
