// CPU impute: each [H,W] plane on its own, planes in parallel (a CIFAR plane's vectors stay in cache
// for the whole solve): start at the kept pixels' mean, conjugate gradients, noise; and the stencil
// alone (removed pixels only, the rest 0).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <vector>

#include "ops/impute.h"
#include "ops/impute_math.h"

namespace roarfast {

namespace {

// out[e] = (A v)[e] on removed pixels, 0 on kept ones, over a whole plane: interior pixels of interior
// rows branch-free (they vectorize), the frame through the bounds-tested stencil. Returns sum v * out.
template <typename T>
double stencil_plane(const T* __restrict__ v, const bool* __restrict__ m, T* __restrict__ out, int64_t height,
                     int64_t width) {
  double dot = 0.0;
  for (int64_t i = 0; i < height; ++i) {
    const int64_t row = i * width;
    if (i == 0 || i == height - 1 || width < 3) {
      for (int64_t j = 0; j < width; ++j) out[row + j] = m[row + j] ? impute_stencil_at(v, height, width, i, j) : T(0);
    } else {
      out[row] = m[row] ? impute_stencil_at(v, height, width, i, int64_t{0}) : T(0);
      for (int64_t j = 1; j < width - 1; ++j) {
        const T value = impute_stencil_interior(v + row + j, width);
        out[row + j] = m[row + j] ? value : T(0);
      }
      out[row + width - 1] = m[row + width - 1] ? impute_stencil_at(v, height, width, i, width - 1) : T(0);
    }
    for (int64_t j = 0; j < width; ++j) dot += static_cast<double>(v[row + j]) * out[row + j];
  }
  return dot;
}

// Imputes one plane (channel c of an image) in place: removed pixels start at the kept pixels' mean
// (0 when none is kept), conjugate gradients until the residual norm falls below rtol times its start
// or max_iterations, then noise * z on the removed pixels. Kept pixels are never written. r, p, ap are
// scratch planes; dots in double, so float32 planes converge as far as their rounding allows.
template <typename T>
void impute_plane(T* x, const bool* m, T* r, T* p, T* ap, int64_t height, int64_t width, int64_t channel,
                  const ImputeSolveArgs& args, uint64_t id) {
  const int64_t pixels = height * width;
  double kept_sum = 0.0;
  int64_t kept = 0;
  for (int64_t e = 0; e < pixels; ++e) {
    kept_sum += m[e] ? 0.0 : static_cast<double>(x[e]);
    kept += m[e] ? 0 : 1;
  }
  const T start = static_cast<T>(kept > 0 ? kept_sum / static_cast<double>(kept) : 0.0);
  for (int64_t e = 0; e < pixels; ++e) x[e] = m[e] ? start : x[e];
  stencil_plane(x, m, ap, height, width);
  double rs = 0.0;
  for (int64_t e = 0; e < pixels; ++e) {
    r[e] = -ap[e];
    p[e] = r[e];
    rs += static_cast<double>(r[e]) * r[e];
  }
  const double target = rs * args.rtol * args.rtol;
  for (int64_t iteration = 0; iteration < args.max_iterations && rs > target; ++iteration) {
    const T alpha = static_cast<T>(impute_ratio(rs, stencil_plane(p, m, ap, height, width)));
    double rs_next = 0.0;
    for (int64_t e = 0; e < pixels; ++e) {
      x[e] = m[e] ? x[e] + alpha * p[e] : x[e];  // a select, not x + 0: kept pixels keep their bits (-0.0 too)
      r[e] -= alpha * ap[e];
      rs_next += static_cast<double>(r[e]) * r[e];
    }
    const T beta = static_cast<T>(impute_ratio(rs_next, rs));
    for (int64_t e = 0; e < pixels; ++e) p[e] = r[e] + beta * p[e];
    rs = rs_next;
  }
  if (args.noise > 0.0) {
    float z[4];
    int64_t cached = -1;  // the Philox block whose normals z holds
    for (int64_t e = 0; e < pixels; ++e) {
      if (!m[e]) continue;
      const int64_t element = channel * pixels + e;
      if (element / 4 != cached) {
        cached = element / 4;
        impute_normals4(args.seed, id, cached, z);
      }
      x[e] += static_cast<T>(args.noise * z[element % 4]);
    }
  }
}

}  // namespace

at::Tensor impute_solve_cpu(const at::Tensor& images, const at::Tensor& removed, const at::Tensor& ids,
                            int64_t max_iterations, double rtol, double noise, int64_t seed) {
  const ImputePlan plan = plan_impute(images, removed, "images");
  const at::Tensor id = check_impute_ids(ids, images);
  const ImputeSolveArgs args = check_impute_solve(max_iterations, rtol, noise, seed);
  at::Tensor out = plan.v.clone();
  const int64_t pixels = plan.height * plan.width;
  if (out.numel() == 0) return out;
  const bool* mask = plan.removed.const_data_ptr<bool>();
  const int64_t* idp = id.const_data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_solve_cpu", [&] {
    scalar_t* dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, plan.planes, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scratch(3 * pixels);
      for (int64_t n = begin; n < end; ++n) {
        const int64_t b = n / plan.channels;
        impute_plane(dst + n * pixels, mask + b * pixels, scratch.data(), scratch.data() + pixels,
                     scratch.data() + 2 * pixels, plan.height, plan.width, n - b * plan.channels, args,
                     static_cast<uint64_t>(idp[b]));
      }
    });
  });
  return out;
}

at::Tensor impute_stencil_cpu(const at::Tensor& v, const at::Tensor& removed) {
  const ImputePlan plan = plan_impute(v, removed, "v");
  at::Tensor out = at::empty_like(plan.v, at::MemoryFormat::Contiguous);
  const int64_t pixels = plan.height * plan.width;
  if (out.numel() == 0) return out;
  const bool* mask = plan.removed.const_data_ptr<bool>();
  AT_DISPATCH_FLOATING_TYPES(plan.v.scalar_type(), "impute_stencil_cpu", [&] {
    const scalar_t* src = plan.v.const_data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, plan.planes, 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        stencil_plane(src + n * pixels, mask + (n / plan.channels) * pixels, dst + n * pixels, plan.height,
                      plan.width);
      }
    });
  });
  return out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) {
  m.impl("impute_solve", &roarfast::impute_solve_cpu);
  m.impl("impute_stencil", &roarfast::impute_stencil_cpu);
}
