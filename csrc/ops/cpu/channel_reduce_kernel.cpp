// CPU reduce_channels: pixels in parallel, each folding its channels with pixel_score.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/channel_reduce.h"

namespace roarfast {

at::Tensor reduce_channels_cpu(const at::Tensor& scores_in, c10::string_view reduction) {
  const ReducePlan plan = check_reduce_channels_args(scores_in, std::string(reduction));
  const at::Tensor scores = scores_in.contiguous();
  at::Tensor out = at::empty(plan.out_sizes, scores.options().dtype(at::kFloat));
  float* dst = out.data_ptr<float>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "reduce_channels_cpu", [&] {
    const scalar_t* src = scores.const_data_ptr<scalar_t>();
    at::parallel_for(0, plan.batch * plan.plane, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t pixel = begin; pixel < end; ++pixel) {
        dst[pixel] = pixel_score(src, plan.channels, plan.plane, pixel, plan.reduce);
      }
    });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) { m.impl("reduce_channels", &roarfast::reduce_channels_cpu); }
