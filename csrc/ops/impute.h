// impute_solve (ROAD's noisy linear imputation, roarfast.ops.impute) and impute_stencil (its matrix,
// for tests). Schemas and checks in impute.cpp.
#pragma once

#include <ATen/core/Tensor.h>

namespace roarfast {

// v [B,C,H,W] (float32/float64) and removed [B,H,W] (bool, same device) as plan_impute checked them, contiguous.
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

// impute_solve's scalars, checked: the conjugate-gradient stop and the noise.
struct ImputeSolveArgs {
  int64_t max_iterations;  // >= 0
  double rtol;             // >= 0: stop once the residual norm is below rtol times its start
  double noise;            // >= 0: std of the noise added to removed pixels
  uint64_t seed;           // the Philox key
};

ImputeSolveArgs check_impute_solve(int64_t max_iterations, double rtol, double noise, int64_t seed);

at::Tensor impute_solve_cpu(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids,
                            int64_t max_iterations, double rtol, double noise, int64_t seed);
at::Tensor impute_stencil_cpu(const at::Tensor& v, const at::Tensor& removed);

}  // namespace roarfast
