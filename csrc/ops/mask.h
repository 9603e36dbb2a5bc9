// mask and mask_normalize: replace ranked units of images by a fill. Schema and checks in mask.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "ops/mask_math.h"

namespace roarfast {

// What a mask call will do, worked out once from the arguments by check_mask_args.
struct MaskPlan {
  MaskShape shape;
  int64_t batch;
  at::Tensor images;  // contiguous in NCHW, or in NHWC when it came channels_last
  at::Tensor ranks;   // contiguous NCHW; undefined when nothing is masked
  at::Tensor k;       // int64 [B], contiguous; undefined when nothing is masked
  at::Tensor fill;    // [C]: images' dtype for mask, float32 for mask_normalize; undefined when nothing is masked
  at::Tensor mean;    // [C] float32, mask_normalize only
  at::Tensor std;     // [C] float32, mask_normalize only
};

// Checks the arguments of mask; fill comes back in the images' dtype.
MaskPlan plan_mask(const at::Tensor& images, const at::Tensor& ranks, const at::Tensor& k, const at::Tensor& fill,
                   bool keep);

// Checks the arguments of mask_normalize; fill, mean, std come back as float32.
MaskPlan plan_mask_normalize(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                             const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& fill, bool keep,
                             const at::Tensor& mean, const at::Tensor& std, at::ScalarType out_dtype,
                             bool channels_last);

// An uninitialized [B,C,H,W] output in the plan's layout (NHWC or NCHW).
at::Tensor mask_output(const MaskPlan& plan, at::ScalarType dtype);

// Calls f with a typed pointer to the ranks (nullptr of int64_t when there are none).
template <typename F>
inline void with_ranks(const at::Tensor& ranks, const F& f) {
  if (!ranks.defined()) return f(static_cast<const int64_t*>(nullptr));
  switch (ranks.scalar_type()) {
    case at::kUInt16: return f(static_cast<const uint16_t*>(ranks.const_data_ptr()));
    case at::kInt: return f(ranks.const_data_ptr<int32_t>());
    default: return f(ranks.const_data_ptr<int64_t>());
  }
}

at::Tensor mask_cpu(const at::Tensor& images, const at::Tensor& ranks, const at::Tensor& k, const at::Tensor& fill,
                    bool keep);
at::Tensor mask_normalize_cpu(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                              const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& fill, bool keep,
                              const at::Tensor& mean, const at::Tensor& std, at::ScalarType out_dtype,
                              bool channels_last);

}  // namespace roarfast
