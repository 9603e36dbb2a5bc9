// CPU noise: output images (sample-major) in parallel, each filled 4 elements per Philox block.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "ops/noise.h"
#include "ops/noise_math.h"

namespace roarfast {

at::Tensor noise_cpu(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset) {
  NoisePlan plan = plan_noise(x, n, noise_level, seed, offset);
  if (plan.out.numel() == 0) return plan.out;
  const float* sigma = plan.sigma.const_data_ptr<float>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "noise_cpu", [&] {
    const scalar_t* src = plan.x.const_data_ptr<scalar_t>();
    scalar_t* dst = plan.out.data_ptr<scalar_t>();
    at::parallel_for(0, n * plan.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t s = row / plan.batch, b = row - s * plan.batch;
        for (int64_t g = 0; g < plan.groups; ++g) {
          noise_group(src + b * plan.image_elems, dst + row * plan.image_elems, plan.image_elems, g,
                      static_cast<uint32_t>(b), plan.offset + static_cast<uint64_t>(s), plan.seed, sigma[b]);
        }
      }
    });
  });
  return plan.out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) { m.impl("noise", &roarfast::noise_cpu); }
