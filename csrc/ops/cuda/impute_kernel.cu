// CUDA impute: one thread block per [H,W] plane (planes are independent systems, so a block runs its
// whole solve with no host sync; block-wide dot products): start at the kept pixels' mean, conjugate
// gradients, noise; one thread per element for the stencil alone. The math is impute_math.h's, as on
// the CPU.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/impute.h"
#include "ops/impute_math.h"

namespace roarfast {
namespace {

constexpr int kImputeThreads = 256;
constexpr int kSolveThreads = 256;  // one block per plane; a multiple of the warp size

// The sum of every thread's v, returned to every thread of the block (same order everywhere, so the
// block's threads take the same branches after it). `partial` holds one value per warp.
__device__ double block_sum(double v, double* partial) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  __syncthreads();  // the previous call's readers are done with `partial`
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kSolveThreads / 32; ++w) total += partial[w];
  return total;
}

// (A v) at pixel e of a plane: the interior form where all 8 neighbours are in bounds.
template <typename T>
__device__ T stencil_pixel(const T* v, int64_t height, int64_t width, int64_t e) {
  const int64_t i = e / width, j = e - i * width;
  if (i > 0 && i < height - 1 && j > 0 && j < width - 1) return impute_stencil_interior(v + e, width);
  return impute_stencil_at(v, height, width, i, j);
}

// One plane per block (grid-stride over planes): x in place (kept pixels never written), r / p / ap
// scratch planes; the same steps as impute_plane in cpu/impute_kernel.cpp.
template <typename T>
__global__ void impute_solve_kernel(T* __restrict__ x, const bool* __restrict__ removed,
                                    const int64_t* __restrict__ ids, T* __restrict__ r, T* __restrict__ p,
                                    T* __restrict__ ap, int64_t planes, int64_t channels, int64_t height,
                                    int64_t width, ImputeSolveArgs args) {
  __shared__ double partial[kSolveThreads / 32];
  const int64_t pixels = height * width;
  for (int64_t n = blockIdx.x; n < planes; n += gridDim.x) {
    const int64_t b = n / channels;
    T* xn = x + n * pixels;
    T* rn = r + n * pixels;
    T* pn = p + n * pixels;
    T* apn = ap + n * pixels;
    const bool* m = removed + b * pixels;
    double kept_sum = 0.0, kept = 0.0;
    for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
      kept_sum += m[e] ? 0.0 : static_cast<double>(xn[e]);
      kept += m[e] ? 0.0 : 1.0;
    }
    kept_sum = block_sum(kept_sum, partial);
    kept = block_sum(kept, partial);
    const T start = static_cast<T>(kept > 0.0 ? kept_sum / kept : 0.0);
    for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
      if (m[e]) xn[e] = start;
    }
    __syncthreads();  // the start complete before the stencil reads neighbours
    double local = 0.0;
    for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
      const T value = m[e] ? -stencil_pixel(xn, height, width, e) : T(0);
      rn[e] = value;
      pn[e] = value;
      local += static_cast<double>(value) * value;
    }
    double rs = block_sum(local, partial);  // its __syncthreads also publishes p to the whole block
    const double target = rs * args.rtol * args.rtol;
    for (int64_t iteration = 0; iteration < args.max_iterations && rs > target; ++iteration) {
      local = 0.0;
      for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
        const T value = m[e] ? stencil_pixel(pn, height, width, e) : T(0);
        apn[e] = value;
        local += static_cast<double>(pn[e]) * value;
      }
      const T alpha = static_cast<T>(impute_ratio(rs, block_sum(local, partial)));
      local = 0.0;
      for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
        if (m[e]) xn[e] += alpha * pn[e];
        rn[e] -= alpha * apn[e];
        local += static_cast<double>(rn[e]) * rn[e];
      }
      const double rs_next = block_sum(local, partial);
      const T beta = static_cast<T>(impute_ratio(rs_next, rs));
      for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) pn[e] = rn[e] + beta * pn[e];
      __syncthreads();  // p complete before the next stencil reads neighbours
      rs = rs_next;
    }
    if (args.noise > 0.0) {
      const int64_t channel = n - b * channels;
      for (int64_t e = threadIdx.x; e < pixels; e += kSolveThreads) {
        if (!m[e]) continue;
        const int64_t element = channel * pixels + e;
        float z[4];
        impute_normals4(args.seed, static_cast<uint64_t>(ids[b]), element / 4, z);
        xn[e] += static_cast<T>(args.noise * z[element % 4]);
      }
    }
    __syncthreads();  // the next plane reuses `partial`
  }
}

template <typename scalar_t>
__global__ void impute_stencil_kernel(const scalar_t* __restrict__ src, const bool* __restrict__ removed,
                                      scalar_t* __restrict__ dst, int64_t total, int64_t channels, int64_t height,
                                      int64_t width) {
  const int64_t pixels = height * width;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = e / pixels, p = e - n * pixels;
    if (!removed[(n / channels) * pixels + p]) continue;
    const int64_t i = p / width;
    dst[e] = impute_stencil_at(src + n * pixels, height, width, i, p - i * width);
  }
}

int64_t resident_blocks(int threads) {
  return int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / threads;
}

}  // namespace

at::Tensor impute_solve_cuda(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids,
                             int64_t max_iterations, double rtol, double noise, int64_t seed) {
  const c10::cuda::CUDAGuard guard(images.device());
  const ImputePlan plan = plan_impute(images, removed, "images");
  const at::Tensor id = check_impute_ids(ids, images);
  const ImputeSolveArgs args = check_impute_solve(max_iterations, rtol, noise, seed);
  at::Tensor out = plan.v.clone();
  if (out.numel() == 0) return out;
  at::Tensor scratch = at::empty({3, out.numel()}, out.options());
  const int grid = static_cast<int>(std::min(plan.planes, resident_blocks(kSolveThreads) * 4));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_solve_cuda", [&] {
    scalar_t* s = scratch.data_ptr<scalar_t>();
    impute_solve_kernel<<<grid, kSolveThreads, 0, stream>>>(
        out.data_ptr<scalar_t>(), plan.removed.const_data_ptr<bool>(), id.const_data_ptr<int64_t>(), s,
        s + out.numel(), s + 2 * out.numel(), plan.planes, plan.channels, plan.height, plan.width, args);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor impute_stencil_cuda(const at::Tensor& v, const at::Tensor& removed) {
  const c10::cuda::CUDAGuard guard(v.device());
  const ImputePlan plan = plan_impute(v, removed, "v");
  at::Tensor out = at::zeros_like(plan.v, at::MemoryFormat::Contiguous);
  const int64_t total = out.numel();
  if (total == 0) return out;
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min((total + kImputeThreads - 1) / kImputeThreads,
                                                                  resident_blocks(kImputeThreads) * 4)));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_stencil_cuda", [&] {
    impute_stencil_kernel<<<grid, kImputeThreads, 0, stream>>>(plan.v.const_data_ptr<scalar_t>(),
                                                         plan.removed.const_data_ptr<bool>(),
                                                         out.data_ptr<scalar_t>(), total, plan.channels,
                                                         plan.height, plan.width);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) {
  m.impl("impute_solve", &roarfast::impute_solve_cuda);
  m.impl("impute_stencil", &roarfast::impute_stencil_cuda);
}
