// CUDA noise: one thread per Philox block (4 consecutive elements of one output image), grid-stride
// over all samples x images x blocks; compute-bound on Philox, so the 4 writes stay scalar.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/noise.h"
#include "ops/noise_math.h"

namespace roarfast {
namespace {

constexpr int kNoiseThreads = 256;

template <typename scalar_t>
__global__ void noise_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst,
                             const float* __restrict__ sigma, const int64_t* __restrict__ seeds, int64_t batch,
                             int64_t image_elems, int64_t groups, int64_t total_groups, uint64_t seed,
                             uint64_t offset) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total_groups;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / groups, g = i - row * groups;
    const int64_t s = row / batch, b = row - s * batch;
    uint64_t key;
    uint32_t image;
    noise_key(seeds, seed, b, key, image);
    noise_group(src + b * image_elems, dst + row * image_elems, image_elems, g, image,
                offset + static_cast<uint64_t>(s), key, sigma[b]);
  }
}

}  // namespace

at::Tensor noise_cuda(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset,
                      const std::optional<at::Tensor>& seeds) {
  const c10::cuda::CUDAGuard guard(x.device());
  NoisePlan plan = plan_noise(x, n, noise_level, seed, offset, seeds);
  if (plan.out.numel() == 0) return plan.out;
  const int64_t total_groups = n * plan.batch * plan.groups;
  const int64_t resident = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kNoiseThreads;
  const int grid = static_cast<int>(std::min((total_groups + kNoiseThreads - 1) / kNoiseThreads, resident * 4));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "noise_cuda", [&] {
    noise_kernel<<<grid, kNoiseThreads, 0, stream>>>(plan.x.const_data_ptr<scalar_t>(), plan.out.data_ptr<scalar_t>(),
                                                plan.sigma.const_data_ptr<float>(),
                                                plan.seeds.defined() ? plan.seeds.const_data_ptr<int64_t>() : nullptr,
                                                plan.batch, plan.image_elems,
                                                plan.groups, total_groups, plan.seed, plan.offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return plan.out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) { m.impl("noise", &roarfast::noise_cuda); }
