// CPU mask and mask_normalize: images in parallel, each output row written in memory order.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "ops/mask.h"
#include "ops/mask_math.h"

namespace roarfast {
namespace {

constexpr int64_t kGrainElements = 32768;  // elements per parallel task: enough to amortize the task

// Output rows in memory order: NCHW rows are one channel plane, NHWC rows one pixel's channels.
template <typename in_t, typename out_t, typename rank_t, typename Value>
void mask_loop(const MaskPlan& plan, const rank_t* ranks, out_t* out, const Value& value) {
  const MaskShape s = plan.shape;
  const in_t* in = plan.images.const_data_ptr<in_t>();
  const int64_t* k = plan.k.defined() ? plan.k.const_data_ptr<int64_t>() : nullptr;
  const int64_t rows = s.out_nhwc ? plan.batch * s.plane : plan.batch * s.channels;
  const int64_t row_len = s.out_nhwc ? s.channels : s.plane;
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, row_len)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      out_t* dst = out + row * row_len;
      if (s.out_nhwc) {
        const int64_t b = row / s.plane, p = row - b * s.plane;
        for (int64_t c = 0; c < row_len; ++c) dst[c] = mask_element(in, ranks, k, s, b, c, p, value);
      } else {
        const int64_t b = row / s.channels, c = row - b * s.channels;
        for (int64_t p = 0; p < row_len; ++p) dst[p] = mask_element(in, ranks, k, s, b, c, p, value);
      }
    }
  });
}

}  // namespace

at::Tensor mask_cpu(const at::Tensor& images, const at::Tensor& ranks, const at::Tensor& k, const at::Tensor& fill,
                    bool keep) {
  const MaskPlan plan = plan_mask(images, ranks, k, fill, keep);
  at::Tensor out = mask_output(plan, images.scalar_type());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND3(at::kByte, at::kHalf, at::kBFloat16, images.scalar_type(), "mask_cpu", [&] {
    with_ranks(plan.ranks, [&](const auto* r) {
      mask_loop<scalar_t>(plan, r, out.data_ptr<scalar_t>(), CopyOrFill<scalar_t>{plan.fill.const_data_ptr<scalar_t>()});
    });
  });
  return out;
}

at::Tensor mask_normalize_cpu(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                              const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& fill, bool keep,
                              const at::Tensor& mean, const at::Tensor& std, at::ScalarType out_dtype,
                              bool channels_last) {
  const MaskPlan plan = plan_mask_normalize(images, ranks, k, fill, keep, mean, std, out_dtype, channels_last);
  at::Tensor out = mask_output(plan, out_dtype);
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out_dtype, "mask_normalize_cpu", [&] {
    const NormalizeOrFill<scalar_t> value{plan.fill.defined() ? plan.fill.const_data_ptr<float>() : nullptr,
                                          plan.mean.const_data_ptr<float>(), plan.std.const_data_ptr<float>()};
    with_ranks(plan.ranks, [&](const auto* r) { mask_loop<uint8_t>(plan, r, out.data_ptr<scalar_t>(), value); });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) {
  m.impl("mask", &roarfast::mask_cpu);
  m.impl("mask_normalize", &roarfast::mask_normalize_cpu);
}
