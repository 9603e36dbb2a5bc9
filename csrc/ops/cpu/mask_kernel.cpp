// CPU mask and mask_normalize: images in parallel, each output row written in memory order.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "ops/mask.h"
#include "ops/mask_math.h"

namespace roarfast {
namespace {

constexpr int64_t kGrainElements = 32768;  // elements per parallel task: enough to amortize the task

// The rank type a row compares in: uint16 ranks widen to int32 (vectorizes), others stay int64.
template <typename rank_t>
using compare_t = std::conditional_t<std::is_same_v<rank_t, uint16_t>, int32_t, int64_t>;

// One NCHW output row (channel c of image b): branch-free and through local values only, so the
// compiler vectorizes it (a uint8 store through a pointer may alias k, fill or the plan otherwise).
// in_stride is 1 for NCHW images, C for NHWC; ranks is the row's ranks or nullptr.
template <typename in_t, typename out_t, typename rank_t, typename Channel>
void mask_row_nchw(const in_t* __restrict__ in, int64_t in_stride, const rank_t* __restrict__ ranks,
                   out_t* __restrict__ dst, int64_t len, int64_t k, bool keep, const Channel value) {
  if (ranks == nullptr) {
    for (int64_t p = 0; p < len; ++p) dst[p] = value(in[p * in_stride], false);
    return;
  }
  using cmp_t = compare_t<rank_t>;
  // k clamped into cmp_t: every rank_t rank compares with it as with k (uint16 ranks lie in [0, 65535]).
  const int64_t lo = std::is_same_v<cmp_t, int32_t> ? -1 : std::numeric_limits<int64_t>::min();
  const int64_t hi = std::is_same_v<cmp_t, int32_t> ? 65536 : std::numeric_limits<int64_t>::max();
  const cmp_t kk = static_cast<cmp_t>(std::min(std::max(k, lo), hi));
  // is_replaced(rank, k, keep) without a branch on keep.
  if (in_stride == 1) {
    for (int64_t p = 0; p < len; ++p) dst[p] = value(in[p], (static_cast<cmp_t>(ranks[p]) < kk) != keep);
  } else {
    for (int64_t p = 0; p < len; ++p) {
      dst[p] = value(in[p * in_stride], (static_cast<cmp_t>(ranks[p]) < kk) != keep);
    }
  }
}

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
        const rank_t* row_ranks = ranks == nullptr ? nullptr : ranks + rank_offset(s, b, c, 0);
        mask_row_nchw(in + image_offset(s.in_nhwc, s.channels, s.plane, b, c, 0), s.in_nhwc ? s.channels : 1,
                      row_ranks, dst, row_len, k == nullptr ? 0 : k[b], s.keep, value.channel(c));
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
