// CUDA ensemble: one thread per element, grid-stride; the loop over samples reads one coalesced
// row of grads per sample, so the chunk is read exactly once.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/ensemble.h"
#include "ops/ensemble_math.h"

namespace roarfast {
namespace {

constexpr int kEnsembleThreads = 256;

template <typename scalar_t>
__global__ void ensemble_update_kernel(const scalar_t* __restrict__ grads, int64_t n, int64_t elems, int64_t count,
                                       float* __restrict__ mean, float* __restrict__ m2) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elems; e += int64_t{gridDim.x} * blockDim.x) {
    ensemble_update_element(grads, n, elems, e, count, mean, m2);
  }
}

__global__ void ensemble_finalize_kernel(const float* __restrict__ mean, const float* __restrict__ m2, int64_t count,
                                         int64_t units, int64_t channels, int64_t plane, ChannelReduce reduce,
                                         float* __restrict__ sg, float* __restrict__ sg_sq, float* __restrict__ var) {
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units; u += int64_t{gridDim.x} * blockDim.x) {
    ensemble_finalize_unit(mean, m2, count, channels, plane, reduce, u, sg, sg_sq, var);
  }
}

int grid_for(int64_t total) {
  const int64_t resident = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kEnsembleThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min((total + kEnsembleThreads - 1) / kEnsembleThreads, resident * 4)));
}

}  // namespace

void ensemble_update_cuda(at::Tensor& mean, at::Tensor& m2, int64_t count, const at::Tensor& grads_in) {
  check_ensemble_update_args(mean, m2, count, grads_in);
  const c10::cuda::CUDAGuard guard(mean.device());
  const int64_t n = grads_in.size(0), elems = mean.numel();
  if (n == 0 || elems == 0) return;
  const at::Tensor grads = grads_in.contiguous();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grads.scalar_type(), "ensemble_update_cuda", [&] {
    ensemble_update_kernel<<<grid_for(elems), kEnsembleThreads, 0, stream>>>(grads.const_data_ptr<scalar_t>(), n, elems, count,
                                                                      mean.data_ptr<float>(), m2.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ensemble_finalize_cuda(const at::Tensor& mean, const at::Tensor& m2,
                                                                      int64_t count, c10::string_view reduction) {
  const FinalizePlan plan = check_ensemble_finalize_args(mean, m2, count, std::string(reduction));
  const c10::cuda::CUDAGuard guard(mean.device());
  at::Tensor sg = at::empty(plan.out_sizes, mean.options());
  at::Tensor sg_sq = at::empty(plan.out_sizes, mean.options());
  at::Tensor var = at::empty(plan.out_sizes, mean.options());
  if (plan.units == 0) return {sg, sg_sq, var};
  ensemble_finalize_kernel<<<grid_for(plan.units), kEnsembleThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      mean.const_data_ptr<float>(), m2.const_data_ptr<float>(), count, plan.units, plan.channels, plan.plane,
      plan.reduce, sg.data_ptr<float>(), sg_sq.data_ptr<float>(), var.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {sg, sg_sq, var};
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) {
  m.impl("ensemble_update", &roarfast::ensemble_update_cuda);
  m.impl("ensemble_finalize", &roarfast::ensemble_finalize_cuda);
}
