// CPU rank: images in parallel, each sorted by a stable LSD radix sort on rank_key.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <vector>

#include "ops/rank.h"
#include "ops/rank_math.h"

namespace roarfast {
namespace {

constexpr int kRadixBits = 8;
constexpr int kBuckets = 1 << kRadixBits;

// Stable LSD radix sort of (key, index) pairs; a pass whose digit is the same for every key
// is skipped (the high bytes of scores from one image often are). Result lands in keys/index.
void radix_sort_pairs(std::vector<uint32_t>& keys, std::vector<uint32_t>& index, std::vector<uint32_t>& keys_tmp,
                      std::vector<uint32_t>& index_tmp) {
  const size_t n = keys.size();
  for (int shift = 0; shift < 32; shift += kRadixBits) {
    std::array<size_t, kBuckets> count{};
    for (size_t i = 0; i < n; ++i) ++count[(keys[i] >> shift) & (kBuckets - 1)];
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;
    size_t offset = 0;
    for (auto& c : count) {
      const size_t here = c;
      c = offset;
      offset += here;
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t dst = count[(keys[i] >> shift) & (kBuckets - 1)]++;
      keys_tmp[dst] = keys[i];
      index_tmp[dst] = index[i];
    }
    keys.swap(keys_tmp);
    index.swap(index_tmp);
  }
}

template <typename scalar_t, typename rank_t>
void rank_images(const scalar_t* scores, rank_t* ranks, const RankPlan& plan) {
  const int64_t image_elems = plan.channels * plan.plane;
  const int64_t units = plan.units;
  at::parallel_for(0, plan.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> keys(units), index(units), keys_tmp(units), index_tmp(units);
    for (int64_t b = begin; b < end; ++b) {
      const scalar_t* image = scores + b * image_elems;
      for (int64_t u = 0; u < units; ++u) {
        keys[u] = rank_key(unit_score(image, plan.channels, plan.plane, u, plan.reduce));
        index[u] = static_cast<uint32_t>(u);
      }
      radix_sort_pairs(keys, index, keys_tmp, index_tmp);
      rank_t* out = ranks + b * units;
      for (int64_t r = 0; r < units; ++r) out[index[r]] = static_cast<rank_t>(r);
    }
  });
}

}  // namespace

at::Tensor rank_cpu(const at::Tensor& scores_in, c10::string_view reduction) {
  const RankPlan plan = check_rank_args(scores_in, std::string(reduction));
  const at::Tensor scores = scores_in.contiguous();
  at::Tensor ranks = at::empty(plan.out_sizes, scores.options().dtype(plan.out_dtype));
  if (plan.batch == 0 || plan.units == 0) return ranks;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "rank_cpu", [&] {
    if (plan.out_dtype == at::kUInt16) {
      rank_images(scores.const_data_ptr<scalar_t>(), static_cast<uint16_t*>(ranks.data_ptr()), plan);
    } else {
      rank_images(scores.const_data_ptr<scalar_t>(), static_cast<int32_t*>(ranks.data_ptr()), plan);
    }
  });
  return ranks;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) { m.impl("rank", &roarfast::rank_cpu); }
