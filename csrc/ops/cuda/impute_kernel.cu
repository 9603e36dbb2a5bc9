// CUDA impute: one thread per element for the stencil (grid-stride), one per Philox block of an
// image for the noise; the math is impute_math.h's, as on the CPU.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/impute.h"
#include "ops/impute_math.h"

namespace roarfast {
namespace {

constexpr int kThreads = 256;

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

template <typename scalar_t>
__global__ void impute_noise_kernel(scalar_t* __restrict__ dst, const bool* __restrict__ removed,
                                    const int64_t* __restrict__ ids, int64_t total_groups, int64_t groups,
                                    int64_t pixels, int64_t image_elems, uint64_t seed, float std) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total_groups;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / groups, g = i - b * groups;
    impute_noise_group(dst + b * image_elems, removed + b * pixels, pixels, image_elems, g,
                       static_cast<uint64_t>(ids[b]), seed, std);
  }
}

int grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const int64_t resident = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, resident * 4)));
}

}  // namespace

at::Tensor impute_stencil_cuda(const at::Tensor& v, const at::Tensor& removed) {
  const c10::cuda::CUDAGuard guard(v.device());
  const ImputePlan plan = plan_impute(v, removed, "v");
  at::Tensor out = at::zeros_like(plan.v, at::MemoryFormat::Contiguous);
  const int64_t total = out.numel();
  if (total == 0) return out;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_stencil_cuda", [&] {
    impute_stencil_kernel<<<grid_for(total), kThreads, 0, stream>>>(
        plan.v.const_data_ptr<scalar_t>(), plan.removed.const_data_ptr<bool>(), out.data_ptr<scalar_t>(), total,
        plan.channels, plan.height, plan.width);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor impute_noise_cuda(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids, double std,
                             int64_t seed) {
  const c10::cuda::CUDAGuard guard(images.device());
  const ImputePlan plan = plan_impute(images, removed, "images");
  const at::Tensor id = check_impute_ids(ids, images);
  at::Tensor out = plan.v.clone();
  if (out.numel() == 0) return out;
  const int64_t pixels = plan.height * plan.width, image_elems = plan.channels * pixels;
  const int64_t groups = (image_elems + 3) / 4, total_groups = images.size(0) * groups;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_noise_cuda", [&] {
    impute_noise_kernel<<<grid_for(total_groups), kThreads, 0, stream>>>(
        out.data_ptr<scalar_t>(), plan.removed.const_data_ptr<bool>(), id.const_data_ptr<int64_t>(), total_groups,
        groups, pixels, image_elems, static_cast<uint64_t>(seed), static_cast<float>(std));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) {
  m.impl("impute_stencil", &roarfast::impute_stencil_cuda);
  m.impl("impute_noise", &roarfast::impute_noise_cuda);
}
