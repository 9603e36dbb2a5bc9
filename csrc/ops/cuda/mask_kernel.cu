// CUDA mask and mask_normalize: one grid-stride pass over the output in its memory order
// (coalesced writes; reads are coalesced per channel plane).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ops/mask.h"
#include "ops/mask_math.h"

namespace roarfast {
namespace {

constexpr int kThreads = 256;

template <typename index_t, typename in_t, typename out_t, typename rank_t, typename Value>
__global__ void mask_kernel(const in_t* __restrict__ in, const rank_t* __restrict__ ranks,
                            const int64_t* __restrict__ k, out_t* __restrict__ out, MaskShape s, index_t total,
                            Value value) {
  const index_t step = static_cast<index_t>(gridDim.x) * static_cast<index_t>(blockDim.x);
  for (index_t i = static_cast<index_t>(blockIdx.x) * static_cast<index_t>(blockDim.x) + static_cast<index_t>(threadIdx.x);
       i < total; i += step) {
    index_t b, c, p;
    output_coords(s, i, b, c, p);
    out[i] = mask_element(in, ranks, k, s, int64_t{b}, int64_t{c}, int64_t{p}, value);
  }
}

int grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const int64_t resident = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, resident * 4)));
}

template <typename in_t, typename out_t, typename rank_t, typename Value>
void launch_mask(const MaskPlan& plan, const rank_t* ranks, out_t* out, int64_t total, const Value& value) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const in_t* in = plan.images.const_data_ptr<in_t>();
  const int64_t* k = plan.k.defined() ? plan.k.const_data_ptr<int64_t>() : nullptr;
  const int grid = grid_for(total);
  // 32-bit indices only where the last grid-stride step cannot overflow them.
  if (total + int64_t{grid} * kThreads <= INT32_MAX) {
    mask_kernel<int32_t><<<grid, kThreads, 0, stream>>>(in, ranks, k, out, plan.shape, static_cast<int32_t>(total),
                                                        value);
  } else {
    mask_kernel<int64_t><<<grid, kThreads, 0, stream>>>(in, ranks, k, out, plan.shape, total, value);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

at::Tensor mask_cuda(const at::Tensor& images, const at::Tensor& ranks, const at::Tensor& k, const at::Tensor& fill,
                     bool keep) {
  const c10::cuda::CUDAGuard guard(images.device());
  const MaskPlan plan = plan_mask(images, ranks, k, fill, keep);
  at::Tensor out = mask_output(plan, images.scalar_type());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND3(at::kByte, at::kHalf, at::kBFloat16, images.scalar_type(), "mask_cuda", [&] {
    with_ranks(plan.ranks, [&](const auto* r) {
      launch_mask<scalar_t>(plan, r, out.data_ptr<scalar_t>(), out.numel(),
                            CopyOrFill<scalar_t>{plan.fill.const_data_ptr<scalar_t>()});
    });
  });
  return out;
}

at::Tensor mask_normalize_cuda(const at::Tensor& images, const std::optional<at::Tensor>& ranks,
                               const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& fill, bool keep,
                               const at::Tensor& mean, const at::Tensor& std, at::ScalarType out_dtype,
                               bool channels_last) {
  const c10::cuda::CUDAGuard guard(images.device());
  const MaskPlan plan = plan_mask_normalize(images, ranks, k, fill, keep, mean, std, out_dtype, channels_last);
  at::Tensor out = mask_output(plan, out_dtype);
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out_dtype, "mask_normalize_cuda", [&] {
    const NormalizeOrFill<scalar_t> value{plan.fill.defined() ? plan.fill.const_data_ptr<float>() : nullptr,
                                          plan.mean.const_data_ptr<float>(), plan.std.const_data_ptr<float>()};
    with_ranks(plan.ranks, [&](const auto* r) {
      launch_mask<uint8_t>(plan, r, out.data_ptr<scalar_t>(), out.numel(), value);
    });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) {
  m.impl("mask", &roarfast::mask_cuda);
  m.impl("mask_normalize", &roarfast::mask_normalize_cuda);
}
