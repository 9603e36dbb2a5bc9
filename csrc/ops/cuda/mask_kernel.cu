// CUDA mask and mask_normalize. A 2-D grid: y walks the images, x groups of V consecutive pixels of
// one image, so no element index is ever divided. NCHW in and out: each thread moves its V pixels of
// every channel with one 16-byte load of the images (V = 16 / sizeof(in_t)) and vector stores where
// the row is aligned, element by element at a row's unaligned start or short end. Any NHWC side: one
// pixel per thread, its channels element by element (a warp still covers a contiguous span).
// mask_normalize reads uint8 -> normalized values from a per-channel 256-entry table in shared
// memory, built with the CPU's own normalize_u8: the same bits without two divisions per element.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "ops/mask.h"
#include "ops/mask_math.h"

namespace roarfast {
namespace {

constexpr int kMaskThreads = 256;
constexpr int64_t kMaxLutChannels = 32;  // 32 tables of 256 floats: 32 KiB, under the 48 KiB default

// V elements of T moved by one aligned vector access (16 bytes of uint8 images; ranks and outputs follow).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ bool vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

// Fused normalize by table: lut[x] is normalize_u8(x, mean[c], std[c]) for this channel.
template <typename T>
struct LutChannel {
  const float* lut;
  float fill;
  ROARFAST_HD T operator()(uint8_t x, bool replaced) const {
    return static_cast<T>(replaced ? fill : lut[x]);
  }
};

template <typename T>
struct LutOrFill {
  const float* lut;   // [C][256] in shared memory
  const float* fill;  // nullptr when nothing is masked
  ROARFAST_HD LutChannel<T> channel(int64_t c) const {
    return {lut + c * 256, fill != nullptr ? fill[c] : 0.0f};
  }
  ROARFAST_HD T operator()(uint8_t x, int64_t c, bool replaced) const {
    return channel(c)(x, replaced);
  }
};

// One image's group of V pixels (p0 .. p0+V-1, fewer at the plane's end), NCHW in and out.
template <int V, typename in_t, typename out_t, typename rank_t, typename Value>
__device__ __forceinline__ void mask_group_nchw(const in_t* __restrict__ in, const rank_t* __restrict__ ranks,
                                                int64_t kb, out_t* __restrict__ out, const MaskShape& s, int64_t b,
                                                int64_t p0, const Value& value) {
  const int64_t count = s.plane - p0 < V ? s.plane - p0 : V;
  bool replaced[V];
  const rank_t* pixel_ranks = ranks == nullptr || s.value_units ? nullptr : ranks + b * s.plane + p0;
  if (pixel_ranks != nullptr) {  // pixel units: one rank per pixel for every channel
    if (count == V && vec_aligned<rank_t, V>(pixel_ranks)) {
      const Vec<rank_t, V> r = *reinterpret_cast<const Vec<rank_t, V>*>(pixel_ranks);
#pragma unroll
      for (int j = 0; j < V; ++j) replaced[j] = is_replaced(static_cast<int64_t>(r.v[j]), kb, s.keep);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) replaced[j] = j < count && is_replaced(static_cast<int64_t>(pixel_ranks[j]), kb, s.keep);
    }
  } else if (ranks == nullptr) {
#pragma unroll
    for (int j = 0; j < V; ++j) replaced[j] = false;
  }
  for (int64_t c = 0; c < s.channels; ++c) {
    const int64_t offset = (b * s.channels + c) * s.plane + p0;
    const in_t* src = in + offset;
    out_t* dst = out + offset;
    const auto ch = value.channel(c);
    if (s.value_units && ranks != nullptr) {  // value units: this channel's own ranks
      const rank_t* r = ranks + offset;
      if (count == V && vec_aligned<rank_t, V>(r)) {
        const Vec<rank_t, V> rv = *reinterpret_cast<const Vec<rank_t, V>*>(r);
#pragma unroll
        for (int j = 0; j < V; ++j) replaced[j] = is_replaced(static_cast<int64_t>(rv.v[j]), kb, s.keep);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) replaced[j] = j < count && is_replaced(static_cast<int64_t>(r[j]), kb, s.keep);
      }
    }
    if (count == V && vec_aligned<in_t, V>(src) && vec_aligned<out_t, V>(dst)) {
      const Vec<in_t, V> x = *reinterpret_cast<const Vec<in_t, V>*>(src);
      Vec<out_t, V> y;
#pragma unroll
      for (int j = 0; j < V; ++j) y.v[j] = ch(x.v[j], replaced[j]);
      *reinterpret_cast<Vec<out_t, V>*>(dst) = y;
    } else {
      for (int64_t j = 0; j < count; ++j) dst[j] = ch(src[j], replaced[j]);
    }
  }
}

// The grid walk shared by both kernels: images along y, groups of V pixels along x, grid-stride in both.
// V == 1 serves any NHWC side through the layout-aware mask_element.
template <int V, typename in_t, typename out_t, typename rank_t, typename Value>
__device__ __forceinline__ void mask_grid(const in_t* __restrict__ in, const rank_t* __restrict__ ranks,
                                          const int64_t* __restrict__ k, out_t* __restrict__ out, const MaskShape& s,
                                          int64_t batch, const Value& value) {
  const int64_t groups = (s.plane + V - 1) / V;
  const int64_t x_step = int64_t{gridDim.x} * blockDim.x, y_step = int64_t{gridDim.y} * blockDim.y;
  for (int64_t b = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; b < batch; b += y_step) {
    const int64_t kb = ranks != nullptr ? k[b] : 0;
    for (int64_t g = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups; g += x_step) {
      if constexpr (V > 1) {
        mask_group_nchw<V>(in, ranks, kb, out, s, b, g * V, value);
      } else {
        for (int64_t c = 0; c < s.channels; ++c) {
          out[image_offset(s.out_nhwc, s.channels, s.plane, b, c, g)] = mask_element(in, ranks, k, s, b, c, g, value);
        }
      }
    }
  }
}

template <int V, typename in_t, typename out_t, typename rank_t, typename Value>
__global__ void mask_kernel(const in_t* __restrict__ in, const rank_t* __restrict__ ranks,
                            const int64_t* __restrict__ k, out_t* __restrict__ out, MaskShape s, int64_t batch,
                            Value value) {
  mask_grid<V>(in, ranks, k, out, s, batch, value);
}

// mask_normalize by table: every block first fills its [C][256] table in shared memory.
template <int V, typename out_t, typename rank_t>
__global__ void mask_normalize_lut_kernel(const uint8_t* __restrict__ in, const rank_t* __restrict__ ranks,
                                          const int64_t* __restrict__ k, out_t* __restrict__ out, MaskShape s,
                                          int64_t batch, NormalizeOrFill<out_t> value) {
  extern __shared__ float lut[];
  const int threads = blockDim.x * blockDim.y;
  for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < s.channels * 256; i += threads) {
    lut[i] = normalize_u8(static_cast<uint8_t>(i & 255), value.mean[i >> 8], value.std[i >> 8]);
  }
  __syncthreads();
  mask_grid<V>(in, ranks, k, out, s, batch, LutOrFill<out_t>{lut, value.fill});
}

struct Launch {
  dim3 grid;
  dim3 block;
};

// Blocks of kMaskThreads shaped to the image: x covers an image's groups (a warp's multiple), y the
// images (several small images per block); at most 4 waves of resident blocks, grid-stride beyond.
Launch launch_for(int64_t groups, int64_t batch) {
  const int64_t bx = groups >= kMaskThreads ? kMaskThreads : std::max<int64_t>(32, (groups + 31) / 32 * 32);
  const int64_t by = kMaskThreads / bx;
  const int64_t cap = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 2048 / kMaskThreads * 4;
  const int64_t gx = std::min((groups + bx - 1) / bx, cap);
  const int64_t gy = std::max<int64_t>(1, std::min({(batch + by - 1) / by, int64_t{65535}, std::max<int64_t>(1, cap / gx)}));
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(static_cast<unsigned>(bx), static_cast<unsigned>(by))};
}

// NCHW in and out take the vector path; any NHWC side one pixel per thread.
template <typename in_t>
constexpr int kVectorPixels = 16 / static_cast<int>(sizeof(in_t));

template <typename in_t, typename out_t, typename rank_t, typename Value>
void launch_mask(const MaskPlan& plan, const rank_t* ranks, out_t* out, const Value& value) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const in_t* in = plan.images.const_data_ptr<in_t>();
  const int64_t* k = plan.k.defined() ? plan.k.const_data_ptr<int64_t>() : nullptr;
  const MaskShape& s = plan.shape;
  if (!s.in_nhwc && !s.out_nhwc) {
    constexpr int V = kVectorPixels<in_t>;
    const Launch l = launch_for((s.plane + V - 1) / V, plan.batch);
    mask_kernel<V><<<l.grid, l.block, 0, stream>>>(in, ranks, k, out, s, plan.batch, value);
  } else {
    const Launch l = launch_for(s.plane, plan.batch);
    mask_kernel<1><<<l.grid, l.block, 0, stream>>>(in, ranks, k, out, s, plan.batch, value);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename out_t, typename rank_t>
void launch_mask_normalize(const MaskPlan& plan, const rank_t* ranks, out_t* out, const NormalizeOrFill<out_t>& value) {
  const MaskShape& s = plan.shape;
  if (s.channels > kMaxLutChannels) return launch_mask<uint8_t>(plan, ranks, out, value);  // no room for tables
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const uint8_t* in = plan.images.const_data_ptr<uint8_t>();
  const int64_t* k = plan.k.defined() ? plan.k.const_data_ptr<int64_t>() : nullptr;
  const size_t lut_bytes = static_cast<size_t>(s.channels) * 256 * sizeof(float);
  if (!s.in_nhwc && !s.out_nhwc) {
    constexpr int V = kVectorPixels<uint8_t>;
    const Launch l = launch_for((s.plane + V - 1) / V, plan.batch);
    mask_normalize_lut_kernel<V><<<l.grid, l.block, lut_bytes, stream>>>(in, ranks, k, out, s, plan.batch, value);
  } else {
    const Launch l = launch_for(s.plane, plan.batch);
    mask_normalize_lut_kernel<1><<<l.grid, l.block, lut_bytes, stream>>>(in, ranks, k, out, s, plan.batch, value);
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
      launch_mask<scalar_t>(plan, r, out.data_ptr<scalar_t>(), CopyOrFill<scalar_t>{plan.fill.const_data_ptr<scalar_t>()});
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
    with_ranks(plan.ranks, [&](const auto* r) { launch_mask_normalize(plan, r, out.data_ptr<scalar_t>(), value); });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) {
  m.impl("mask", &roarfast::mask_cuda);
  m.impl("mask_normalize", &roarfast::mask_normalize_cuda);
}
