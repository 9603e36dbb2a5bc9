// Shared by every op: the host/device qualifier for math that CPU and CUDA both run,
// and the argument-check helpers whose messages name the argument and what came.
// Numerics policy: the *_math.h arithmetic is compiled with no contraction of a*b+c into an FMA on
// either side (-ffp-contract=off for host compilers, -fmad=false for nvcc: setup.py, CMakeLists.txt),
// so every operation rounds alike and CPU and CUDA give the same bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ROARFAST_HD __host__ __device__ __forceinline__
#else
#define ROARFAST_HD inline
#endif

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <cstring>
#include <string>

namespace roarfast {

// The bits of a float and back (rank keys, the noise math's exponent split), on host and device.
ROARFAST_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ROARFAST_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

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
