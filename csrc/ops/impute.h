// impute_stencil and impute_noise: the pieces of ROAD's noisy linear imputation that run as kernels
// (the conjugate-gradient loop over them is roarfast.ops.impute). Schemas and checks in impute.cpp.
#pragma once

#include <ATen/core/Tensor.h>

namespace roarfast {

// Checks v [B,C,H,W] (float32/float64) against removed [B,H,W] (bool, same device); both contiguous.
struct ImputePlan {
  at::Tensor v;
  at::Tensor removed;
  int64_t planes;  // B*C
  int64_t channels;
  int64_t height;
  int64_t width;
};

ImputePlan plan_impute(const at::Tensor& v, const at::Tensor& removed, const char* v_name);

// ids: int64 [B] on v's device, the noise counter of each image.
at::Tensor check_impute_ids(const at::Tensor& ids, const at::Tensor& v);

at::Tensor impute_stencil_cpu(const at::Tensor& v, const at::Tensor& removed);
at::Tensor impute_noise_cpu(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids, double std,
                            int64_t seed);

}  // namespace roarfast
