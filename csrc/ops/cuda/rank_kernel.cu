// CUDA rank. Up to kBlockSortMaxUnits units an image is sorted by one block in shared memory
// (cub::BlockRadixSort); larger images go through one device-wide radix sort whose 64-bit keys
// carry the image index above the score key, so every image is sorted in a single pass.
// ROARFAST_RANK_SORT=segmented (read per call; for benchmarks/ops.py) sorts larger images instead by
// cub::DeviceSegmentedRadixSort on 32-bit keys, one segment per image: half the key bytes, but one
// block per image. The default stays the device-wide sort until a GPU measures both.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <cstdlib>
#include <cstring>

#include "ops/rank.h"
#include "ops/rank_math.h"

namespace roarfast {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kMaxItemsPerThread = 16;
constexpr int64_t kBlockSortMaxUnits = int64_t{kBlockThreads} * kMaxItemsPerThread;  // 4096: 64x64 pixels

template <typename scalar_t, typename rank_t, int kItems>
__global__ void rank_block_sort_kernel(const scalar_t* __restrict__ scores, rank_t* __restrict__ ranks,
                                       int64_t units, int64_t channels, int64_t plane, ChannelReduce reduce) {
  using BlockSort = cub::BlockRadixSort<uint32_t, kBlockThreads, kItems, uint32_t>;
  __shared__ typename BlockSort::TempStorage temp;
  const int64_t b = blockIdx.x;
  const scalar_t* image = scores + b * channels * plane;
  uint32_t keys[kItems];
  uint32_t index[kItems];
  // Blocked arrangement: thread t holds units t*kItems ... so the stable sort keeps index order on ties.
  // Padding gets the NaN key and an index past the end, so it sorts after every real unit.
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t u = int64_t{threadIdx.x} * kItems + i;
    index[i] = static_cast<uint32_t>(u);
    keys[i] = u < units ? rank_key(unit_score(image, channels, plane, u, reduce)) : 0xFFFFFFFFu;
  }
  BlockSort(temp).Sort(keys, index);
  rank_t* out = ranks + b * units;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t r = int64_t{threadIdx.x} * kItems + i;
    if (index[i] < units) out[index[i]] = static_cast<rank_t>(r);
  }
}

template <typename scalar_t>
__global__ void rank_keys_kernel(const scalar_t* __restrict__ scores, uint64_t* __restrict__ keys,
                                 int32_t* __restrict__ index, int64_t batch, int64_t units, int64_t channels,
                                 int64_t plane, ChannelReduce reduce) {
  const int64_t total = batch * units;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / units, u = i - b * units;
    const float s = unit_score(scores + b * channels * plane, channels, plane, u, reduce);
    keys[i] = (static_cast<uint64_t>(b) << 32) | rank_key(s);
    index[i] = static_cast<int32_t>(u);
  }
}

template <typename scalar_t>
__global__ void rank_keys32_kernel(const scalar_t* __restrict__ scores, uint32_t* __restrict__ keys,
                                   int32_t* __restrict__ index, int64_t batch, int64_t units, int64_t channels,
                                   int64_t plane, ChannelReduce reduce) {
  const int64_t total = batch * units;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / units, u = i - b * units;
    keys[i] = rank_key(unit_score(scores + b * channels * plane, channels, plane, u, reduce));
    index[i] = static_cast<int32_t>(u);
  }
}

template <typename rank_t>
__global__ void rank_scatter_kernel(const int32_t* __restrict__ sorted_index, rank_t* __restrict__ ranks,
                                    int64_t batch, int64_t units) {
  const int64_t total = batch * units;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / units;
    ranks[b * units + sorted_index[i]] = static_cast<rank_t>(i - b * units);
  }
}

int grid_for(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<int>(std::min<int64_t>(blocks, 65535LL * 32));
}

template <typename scalar_t, typename rank_t>
void launch_block_sort(const scalar_t* scores, rank_t* ranks, const RankPlan& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.batch));
  // Fewest items per thread that cover the image: less padding to sort.
  if (p.units <= kBlockThreads * 4) {
    rank_block_sort_kernel<scalar_t, rank_t, 4><<<grid, kBlockThreads, 0, stream>>>(scores, ranks, p.units, p.channels, p.plane, p.reduce);
  } else if (p.units <= kBlockThreads * 8) {
    rank_block_sort_kernel<scalar_t, rank_t, 8><<<grid, kBlockThreads, 0, stream>>>(scores, ranks, p.units, p.channels, p.plane, p.reduce);
  } else {
    rank_block_sort_kernel<scalar_t, rank_t, 16><<<grid, kBlockThreads, 0, stream>>>(scores, ranks, p.units, p.channels, p.plane, p.reduce);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, typename rank_t>
void launch_device_sort(const at::Tensor& scores, rank_t* ranks, const RankPlan& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.units;
  TORCH_CHECK(total <= INT32_MAX, "scores should have at most 2^31-1 units in one call for the device sort, got ",
              total, "; rank in smaller batches");
  auto opts = scores.options();
  at::Tensor keys = at::empty({total}, opts.dtype(at::kLong));
  at::Tensor keys_out = at::empty({total}, opts.dtype(at::kLong));
  at::Tensor index = at::empty({total}, opts.dtype(at::kInt));
  at::Tensor index_out = at::empty({total}, opts.dtype(at::kInt));
  auto* k_in = reinterpret_cast<uint64_t*>(keys.data_ptr<int64_t>());
  auto* k_out = reinterpret_cast<uint64_t*>(keys_out.data_ptr<int64_t>());
  constexpr int threads = 256;
  rank_keys_kernel<<<grid_for(total, threads), threads, 0, stream>>>(
      scores.const_data_ptr<scalar_t>(), k_in, index.data_ptr<int32_t>(), p.batch, p.units, p.channels, p.plane, p.reduce);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  int end_bit = 32;  // score key bits + ceil(log2(batch)) image bits: no image bit at all for one image
  while (end_bit < 64 && (int64_t{1} << (end_bit - 32)) < p.batch) ++end_bit;
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, index.data_ptr<int32_t>(),
                                                 index_out.data_ptr<int32_t>(), static_cast<int>(total), 0, end_bit,
                                                 stream));
  at::Tensor temp = at::empty({static_cast<int64_t>(temp_bytes)}, opts.dtype(at::kByte));
  C10_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, k_in, k_out, index.data_ptr<int32_t>(),
                                                 index_out.data_ptr<int32_t>(), static_cast<int>(total), 0, end_bit,
                                                 stream));
  rank_scatter_kernel<<<grid_for(total, threads), threads, 0, stream>>>(index_out.data_ptr<int32_t>(), ranks, p.batch, p.units);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The same order as launch_device_sort by a segmented radix sort of 32-bit keys, one segment per image.
template <typename scalar_t, typename rank_t>
void launch_segmented_sort(const at::Tensor& scores, rank_t* ranks, const RankPlan& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.units;
  TORCH_CHECK(total <= INT32_MAX, "scores should have at most 2^31-1 units in one call for the segmented sort, got ",
              total, "; rank in smaller batches");
  auto opts = scores.options();
  at::Tensor keys = at::empty({total}, opts.dtype(at::kInt));
  at::Tensor keys_out = at::empty({total}, opts.dtype(at::kInt));
  at::Tensor index = at::empty({total}, opts.dtype(at::kInt));
  at::Tensor index_out = at::empty({total}, opts.dtype(at::kInt));
  // segment b is [offsets[b], offsets[b+1])
  at::Tensor offsets = at::arange(0, total + 1, p.units, opts.dtype(at::kInt));
  auto* k_in = reinterpret_cast<uint32_t*>(keys.data_ptr<int32_t>());
  auto* k_out = reinterpret_cast<uint32_t*>(keys_out.data_ptr<int32_t>());
  const int32_t* seg = offsets.const_data_ptr<int32_t>();
  constexpr int threads = 256;
  rank_keys32_kernel<<<grid_for(total, threads), threads, 0, stream>>>(
      scores.const_data_ptr<scalar_t>(), k_in, index.data_ptr<int32_t>(), p.batch, p.units, p.channels, p.plane, p.reduce);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int items = static_cast<int>(total), segments = static_cast<int>(p.batch);
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, index.data_ptr<int32_t>(),
                                                          index_out.data_ptr<int32_t>(), items, segments, seg, seg + 1,
                                                          0, 32, stream));
  at::Tensor temp = at::empty({static_cast<int64_t>(temp_bytes)}, opts.dtype(at::kByte));
  C10_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(temp.data_ptr(), temp_bytes, k_in, k_out,
                                                          index.data_ptr<int32_t>(), index_out.data_ptr<int32_t>(),
                                                          items, segments, seg, seg + 1, 0, 32, stream));
  rank_scatter_kernel<<<grid_for(total, threads), threads, 0, stream>>>(index_out.data_ptr<int32_t>(), ranks, p.batch, p.units);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ROARFAST_RANK_SORT: "device" (default) or "segmented", the sort of images above kBlockSortMaxUnits.
bool segmented_sort_requested() {
  const char* choice = std::getenv("ROARFAST_RANK_SORT");
  if (choice == nullptr || *choice == '\0' || std::strcmp(choice, "device") == 0) return false;
  TORCH_CHECK(std::strcmp(choice, "segmented") == 0, "ROARFAST_RANK_SORT should be device or segmented, got '",
              choice, "'");
  return true;
}

template <typename scalar_t, typename rank_t>
void launch_large_sort(const at::Tensor& scores, rank_t* ranks, const RankPlan& p, cudaStream_t stream) {
  if (segmented_sort_requested()) {
    launch_segmented_sort<scalar_t>(scores, ranks, p, stream);
  } else {
    launch_device_sort<scalar_t>(scores, ranks, p, stream);
  }
}

}  // namespace

at::Tensor rank_cuda(const at::Tensor& scores_in, c10::string_view reduction) {
  const RankPlan plan = check_rank_args(scores_in, std::string(reduction));
  const c10::cuda::CUDAGuard guard(scores_in.device());
  const at::Tensor scores = scores_in.contiguous();
  at::Tensor ranks = at::empty(plan.out_sizes, scores.options().dtype(plan.out_dtype));
  if (plan.batch == 0 || plan.units == 0) return ranks;
  TORCH_CHECK(plan.batch < (int64_t{1} << 31), "scores should have fewer than 2^31 images, got ", plan.batch);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "rank_cuda", [&] {
    const bool small = plan.units <= kBlockSortMaxUnits;
    if (plan.out_dtype == at::kUInt16) {
      auto* out = static_cast<uint16_t*>(ranks.data_ptr());
      small ? launch_block_sort(scores.const_data_ptr<scalar_t>(), out, plan, stream)
            : launch_large_sort<scalar_t>(scores, out, plan, stream);
    } else {
      auto* out = static_cast<int32_t*>(ranks.data_ptr());
      small ? launch_block_sort(scores.const_data_ptr<scalar_t>(), out, plan, stream)
            : launch_large_sort<scalar_t>(scores, out, plan, stream);
    }
  });
  return ranks;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CUDA, m) { m.impl("rank", &roarfast::rank_cuda); }
