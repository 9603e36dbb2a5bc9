// CUDA reduce_channels: one thread per pixel, grid-stride; reads are coalesced per channel plane.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/channel_reduce.h"

namespace roarfast {
namespace {

constexpr int kReduceThreads = 256;

template <typename scalar_t>
__global__ void reduce_channels_kernel(const scalar_t* __restrict__ scores, float* __restrict__ out, int64_t units,
                                       int64_t channels, int64_t plane, ChannelReduce reduce) {
  for (int64_t pixel = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; pixel < units;
       pixel += int64_t{gridDim.x} * blockDim.x) {
    out[pixel] = pixel_score(scores, channels, plane, pixel, reduce);
  }
}

}  // namespace

at::Tensor reduce_channels_cuda(const at::Tensor& scores_in, c10::string_view reduction) {
  const ReducePlan plan = check_reduce_channels_args(scores_in, std::string(reduction));
  const c10::cuda::CUDAGuard guard(scores_in.device());
  const at::Tensor scores = scores_in.contiguous();
  at::Tensor out = at::empty(plan.out_sizes, scores.options().dtype(at::kFloat));
  const int64_t units = plan.batch * plan.plane;
  if (units == 0) return out;
  const int64_t resident = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kReduceThreads;
  const int grid = static_cast<int>(std::min((units + kReduceThreads - 1) / kReduceThreads, resident * 4));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "reduce_channels_cuda", [&] {
    reduce_channels_kernel<<<grid, kReduceThreads, 0, stream>>>(scores.const_data_ptr<scalar_t>(), out.data_ptr<float>(),
                                                          units, plan.channels, plan.plane, plan.reduce);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) { m.impl("reduce_channels", &roarfast::reduce_channels_cuda); }
