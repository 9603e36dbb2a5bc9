// CPU impute: the stencil over each [H,W] plane in parallel (removed pixels only, the rest 0), and
// the noise added to removed elements one Philox block at a time, images in parallel.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "ops/impute.h"
#include "ops/impute_math.h"

namespace roarfast {

at::Tensor impute_stencil_cpu(const at::Tensor& v, const at::Tensor& removed) {
  const ImputePlan plan = plan_impute(v, removed, "v");
  at::Tensor out = at::zeros_like(plan.v, at::MemoryFormat::Contiguous);
  const int64_t pixels = plan.height * plan.width;
  if (out.numel() == 0) return out;
  const bool* mask = plan.removed.const_data_ptr<bool>();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_stencil_cpu", [&] {
    const scalar_t* src = plan.v.const_data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, plan.planes, 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const bool* m = mask + (n / plan.channels) * pixels;
        const scalar_t* in = src + n * pixels;
        scalar_t* o = dst + n * pixels;
        for (int64_t i = 0; i < plan.height; ++i) {
          for (int64_t j = 0; j < plan.width; ++j) {
            if (m[i * plan.width + j]) o[i * plan.width + j] = impute_stencil_at(in, plan.height, plan.width, i, j);
          }
        }
      }
    });
  });
  return out;
}

at::Tensor impute_noise_cpu(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids, double std,
                            int64_t seed) {
  const ImputePlan plan = plan_impute(images, removed, "images");
  const at::Tensor id = check_impute_ids(ids, images);
  at::Tensor out = plan.v.clone();
  const int64_t pixels = plan.height * plan.width, image_elems = plan.channels * pixels;
  if (out.numel() == 0) return out;
  const int64_t groups = (image_elems + 3) / 4;
  const bool* mask = plan.removed.const_data_ptr<bool>();
  const int64_t* idp = id.const_data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_noise_cpu", [&] {
    scalar_t* dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, images.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        for (int64_t g = 0; g < groups; ++g) {
          impute_noise_group(dst + b * image_elems, mask + b * pixels, pixels, image_elems, g,
                             static_cast<uint64_t>(idp[b]), static_cast<uint64_t>(seed), static_cast<float>(std));
        }
      }
    });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) {
  m.impl("impute_stencil", &roarfast::impute_stencil_cpu);
  m.impl("impute_noise", &roarfast::impute_noise_cpu);
}
