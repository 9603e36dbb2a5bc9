// Shared by every op: the host/device qualifier for math that CPU and CUDA both run,
// and the argument-check helpers whose messages name the argument and what came.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ROARFAST_HD __host__ __device__ __forceinline__
#else
#define ROARFAST_HD inline
#endif

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <string>

namespace roarfast {

// "scores" should be on cpu, got cuda:0 -> one place for the wording.
inline void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK(a.device() == b.device(), b_name, " should be on the same device as ", a_name, " (", a.device(),
              "), got ", b.device());
}

inline void check_dim(const at::Tensor& t, const char* name, int64_t dim, const char* layout) {
  TORCH_CHECK(t.dim() == dim, name, " should be ", layout, " (", dim, "D), got ", t.dim(), "D with shape ",
              t.sizes());
}

}  // namespace roarfast
