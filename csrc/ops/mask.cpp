// Schema and argument checks of roarfast::mask and roarfast::mask_normalize.
// Kernels: cpu/mask_kernel.cpp, cuda/mask_kernel.cu.
#include "ops/mask.h"

#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/round.h>
#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {
namespace {

// channels_last and not also plain-contiguous (C == 1 or H*W == 1 are both): read as NHWC.
bool is_nhwc(const at::Tensor& t) {
  return !t.is_contiguous() && t.is_contiguous(at::MemoryFormat::ChannelsLast);
}

// ranks: same device, an integer rank dtype, one rank per pixel or per value of images.
void check_ranks(const at::Tensor& ranks, const at::Tensor& images) {
  check_same_device(images, "images", ranks, "ranks");
  const auto dtype = ranks.scalar_type();
  TORCH_CHECK(dtype == at::kUInt16 || dtype == at::kInt || dtype == at::kLong,
              "ranks should be uint16, int32 or int64, got ", dtype);
  const bool pixel_shape = ranks.dim() == 3 && ranks.size(0) == images.size(0) &&
                           ranks.size(1) == images.size(2) && ranks.size(2) == images.size(3);
  TORCH_CHECK(pixel_shape || ranks.sizes() == images.sizes(),
              "ranks should be [B,H,W] (pixel units) or [B,C,H,W] (value units) matching images ", images.sizes(),
              ", got ", ranks.sizes());
}

// k: int64 [B] on the images' device, each in [0, units].
void check_k(const at::Tensor& k, const at::Tensor& images, int64_t units) {
  check_same_device(images, "images", k, "k");
  TORCH_CHECK(k.scalar_type() == at::kLong, "k should be int64, got ", k.scalar_type());
  TORCH_CHECK(k.dim() == 1 && k.size(0) == images.size(0), "k should be [B] with B = ", images.size(0),
              " (one count per image), got shape ", k.sizes());
  // A range check on a GPU tensor would stall the stream; the wrappers check what they build.
  if (k.is_cpu()) {
    const int64_t* kp = k.const_data_ptr<int64_t>();
    for (int64_t b = 0; b < k.numel(); ++b) {
      TORCH_CHECK(kp[b * k.stride(0)] >= 0 && kp[b * k.stride(0)] <= units, "k should be in [0, ", units,
                  "] (units per image), got ", kp[b * k.stride(0)], " for image ", b);
    }
  }
}

// The checks mask and mask_normalize share; ranks and k are both given or both absent.
MaskPlan check_mask_args(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                         const std::optional<at::Tensor>& k, bool keep) {
  check_dim(images, "images", 4, "[B,C,H,W]");
  TORCH_CHECK(ranks.has_value() == k.has_value(), "ranks and k should be given together, got ",
              ranks.has_value() ? "ranks without k" : "k without ranks");
  MaskPlan plan;
  plan.batch = images.size(0);
  plan.shape.channels = images.size(1);
  plan.shape.plane = images.size(2) * images.size(3);
  plan.shape.keep = keep;
  plan.shape.in_nhwc = is_nhwc(images);
  plan.shape.out_nhwc = plan.shape.in_nhwc;
  plan.shape.value_units = false;
  plan.images = images.contiguous(plan.shape.in_nhwc ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  if (ranks.has_value()) {
    check_ranks(*ranks, images);
    plan.shape.value_units = ranks->dim() == 4;
    check_k(*k, images, plan.shape.value_units ? plan.shape.channels * plan.shape.plane : plan.shape.plane);
    plan.ranks = ranks->contiguous();
    plan.k = k->contiguous();
  }
  return plan;
}

// A per-channel vector (fill, mean, std): 1D, C long, floating, on the images' device; as float32.
at::Tensor check_per_channel(const at::Tensor& t, const char* name, const at::Tensor& images) {
  check_same_device(images, "images", t, name);
  TORCH_CHECK(t.dim() == 1 && t.size(0) == images.size(1), name, " should have one value per channel ([",
              images.size(1), "]), got shape ", t.sizes());
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), name, " should be a floating tensor, got ", t.scalar_type());
  return t.to(at::kFloat).contiguous();
}

// fill in the images' dtype: uint8 rounds to nearest and saturates to [0,255].
at::Tensor fill_as(const at::Tensor& fill, at::ScalarType dtype) {
  if (dtype == at::kByte) return at::clamp(at::round(fill), 0, 255).to(at::kByte);
  return fill.to(dtype).contiguous();
}

}  // namespace

MaskPlan plan_mask(const at::Tensor& images, const at::Tensor& ranks, const at::Tensor& k, const at::Tensor& fill,
                   bool keep) {
  MaskPlan plan = check_mask_args(images, ranks, k, keep);
  const auto dtype = images.scalar_type();
  TORCH_CHECK(dtype == at::kByte || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "images should be uint8, float32, float16 or bfloat16, got ", dtype);
  plan.fill = fill_as(check_per_channel(fill, "fill", images), dtype);
  return plan;
}

MaskPlan plan_mask_normalize(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                             const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& fill, bool keep,
                             const at::Tensor& mean, const at::Tensor& std, at::ScalarType out_dtype,
                             bool channels_last) {
  MaskPlan plan = check_mask_args(images, ranks, k, keep);
  TORCH_CHECK(images.scalar_type() == at::kByte, "images should be uint8 for mask_normalize, got ",
              images.scalar_type());
  TORCH_CHECK(out_dtype == at::kFloat || out_dtype == at::kHalf || out_dtype == at::kBFloat16,
              "out_dtype should be float32, float16 or bfloat16, got ", out_dtype);
  TORCH_CHECK(!ranks.has_value() || fill.has_value(), "fill should be given when ranks are (the replacement value)");
  plan.shape.out_nhwc = channels_last;
  if (ranks.has_value()) plan.fill = check_per_channel(*fill, "fill", images);
  plan.mean = check_per_channel(mean, "mean", images);
  plan.std = check_per_channel(std, "std", images);
  return plan;
}

at::Tensor mask_output(const MaskPlan& plan, at::ScalarType dtype) {
  const auto& in = plan.images;
  return at::empty({in.size(0), in.size(1), in.size(2), in.size(3)},
                   in.options().dtype(dtype).memory_format(plan.shape.out_nhwc ? at::MemoryFormat::ChannelsLast
                                                                               : at::MemoryFormat::Contiguous));
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("mask(Tensor images, Tensor ranks, Tensor k, Tensor fill, bool keep=False) -> Tensor");
  m.def(
      "mask_normalize(Tensor images, Tensor? ranks, Tensor? k, Tensor? fill, bool keep, Tensor mean, Tensor std, "
      "ScalarType out_dtype, bool channels_last) -> Tensor");
}
