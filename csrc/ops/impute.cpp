// Schemas and argument checks of roarfast::impute_stencil and roarfast::impute_noise.
// Kernels: cpu/impute_kernel.cpp, cuda/impute_kernel.cu.
#include "ops/impute.h"

#include <torch/library.h>

#include "ops/common.h"

namespace roarfast {

ImputePlan plan_impute(const at::Tensor& v, const at::Tensor& removed, const char* v_name) {
  check_dim(v, v_name, 4, "[B,C,H,W]");
  TORCH_CHECK(v.scalar_type() == at::kFloat || v.scalar_type() == at::kDouble, v_name,
              " should be float32 or float64, got ", v.scalar_type());
  check_same_device(v, v_name, removed, "removed");
  TORCH_CHECK(removed.scalar_type() == at::kBool, "removed should be bool, got ", removed.scalar_type());
  TORCH_CHECK(removed.dim() == 3 && removed.size(0) == v.size(0) && removed.size(1) == v.size(2) &&
                  removed.size(2) == v.size(3),
              "removed should be [B,H,W] matching ", v_name, " ", v.sizes(), ", got ", removed.sizes());
  ImputePlan plan;
  plan.v = v.contiguous();
  plan.removed = removed.contiguous();
  plan.channels = v.size(1);
  plan.planes = v.size(0) * v.size(1);
  plan.height = v.size(2);
  plan.width = v.size(3);
  return plan;
}

at::Tensor check_impute_ids(const at::Tensor& ids, const at::Tensor& v) {
  check_same_device(v, "images", ids, "ids");
  TORCH_CHECK(ids.scalar_type() == at::kLong, "ids should be int64, got ", ids.scalar_type());
  TORCH_CHECK(ids.dim() == 1 && ids.size(0) == v.size(0), "ids should be [B] with B = ", v.size(0),
              " (one noise id per image), got shape ", ids.sizes());
  // The Philox counter holds the element group in one 32-bit word.
  TORCH_CHECK(v.size(1) * v.size(2) * v.size(3) / 4 < UINT32_MAX, "images should have at most 2^34 elements per image, got ",
              v.size(1) * v.size(2) * v.size(3));
  return ids.contiguous();
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def("impute_stencil(Tensor v, Tensor removed) -> Tensor");
  m.def("impute_noise(Tensor images, Tensor removed, Tensor ids, float std, int seed) -> Tensor");
}
