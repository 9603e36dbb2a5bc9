// CPU ensemble: elements in parallel blocks; within a block the samples are streamed in memory
// order (sample-outer) so each gradient is read once, sequentially.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>

#include "ops/ensemble.h"
#include "ops/ensemble_math.h"

namespace roarfast {
namespace {

constexpr int64_t kBlock = 1024;  // elements whose chunk moments stay in L1 while the samples stream by

template <typename T>
void update_block(const T* grads, int64_t n, int64_t stride, int64_t begin, int64_t end, int64_t count, float* mean,
                  float* m2) {
  std::array<float, kBlock> chunk_mean{}, chunk_m2{};
  const int64_t len = end - begin;
  for (int64_t i = 0; i < n; ++i) {
    const T* row = grads + i * stride + begin;
    for (int64_t j = 0; j < len; ++j) welford_step(static_cast<float>(row[j]), i, chunk_mean[j], chunk_m2[j]);
  }
  for (int64_t j = 0; j < len; ++j) chan_merge(count, mean[begin + j], m2[begin + j], n, chunk_mean[j], chunk_m2[j]);
}

}  // namespace

void ensemble_update_cpu(at::Tensor& mean, at::Tensor& m2, int64_t count, const at::Tensor& grads_in) {
  check_ensemble_update_args(mean, m2, count, grads_in);
  const int64_t n = grads_in.size(0), elems = mean.numel();
  if (n == 0 || elems == 0) return;
  const at::Tensor grads = grads_in.contiguous();
  float* mean_p = mean.data_ptr<float>();
  float* m2_p = m2.data_ptr<float>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grads.scalar_type(), "ensemble_update_cpu", [&] {
    const scalar_t* g = grads.const_data_ptr<scalar_t>();
    at::parallel_for(0, (elems + kBlock - 1) / kBlock, 1, [&](int64_t first, int64_t last) {
      for (int64_t blk = first; blk < last; ++blk) {
        update_block(g, n, elems, blk * kBlock, std::min(elems, (blk + 1) * kBlock), count, mean_p, m2_p);
      }
    });
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ensemble_finalize_cpu(const at::Tensor& mean, const at::Tensor& m2,
                                                                     int64_t count, c10::string_view reduction) {
  const FinalizePlan plan = check_ensemble_finalize_args(mean, m2, count, std::string(reduction));
  at::Tensor sg = at::empty(plan.out_sizes, mean.options());
  at::Tensor sg_sq = at::empty(plan.out_sizes, mean.options());
  at::Tensor var = at::empty(plan.out_sizes, mean.options());
  const float* mean_p = mean.const_data_ptr<float>();
  const float* m2_p = m2.const_data_ptr<float>();
  float* out[3] = {sg.data_ptr<float>(), sg_sq.data_ptr<float>(), var.data_ptr<float>()};
  at::parallel_for(0, plan.units, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      ensemble_finalize_unit(mean_p, m2_p, count, plan.channels, plan.plane, plan.reduce, u, out[0], out[1], out[2]);
    }
  });
  return {sg, sg_sq, var};
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) {
  m.impl("ensemble_update", &roarfast::ensemble_update_cpu);
  m.impl("ensemble_finalize", &roarfast::ensemble_finalize_cpu);
}
