// Schemas and argument checks of roarfast::impute_solve and roarfast::impute_stencil.
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

ImputeSolveArgs check_impute_solve(int64_t max_iterations, double rtol, double noise, int64_t seed) {
  TORCH_CHECK(max_iterations >= 0, "max_iterations should be >= 0, got ", max_iterations);
  TORCH_CHECK(rtol >= 0.0, "rtol should be >= 0, got ", rtol);
  TORCH_CHECK(noise >= 0.0, "noise should be >= 0 (an absolute std), got ", noise);
  return ImputeSolveArgs{max_iterations, rtol, noise, static_cast<uint64_t>(seed)};
}

at::Tensor check_impute_ids(const at::Tensor& ids, const at::Tensor& v) {
  check_same_device(v, "images", ids, "ids");
  TORCH_CHECK(ids.scalar_type() == at::kLong, "ids should be int64, got ", ids.scalar_type());
  TORCH_CHECK(ids.dim() == 1 && ids.size(0) == v.size(0), "ids should be [B] with B = ", v.size(0),
              " (one noise id per image), got shape ", ids.sizes());
  // The Philox counter holds the element group in one 32-bit word.
  const int64_t image_elems = v.size(1) * v.size(2) * v.size(3);
  TORCH_CHECK(image_elems / 4 < UINT32_MAX, "images should have at most 2^34 elements per image, got ", image_elems);
  return ids.contiguous();
}

}  // namespace roarfast

TORCH_LIBRARY_FRAGMENT(roarfast, m) {
  m.def(
      "impute_solve(Tensor images, Tensor removed, Tensor ids, int max_iterations, float rtol, float noise, int seed) "
      "-> Tensor");
  m.def("impute_stencil(Tensor v, Tensor removed) -> Tensor");
}
