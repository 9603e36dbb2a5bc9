// Noisy linear imputation (ROAD, Rong et al. ICML 2022), shared by the CPU and
// CUDA impute kernels: the 8-neighbour stencil of the linear system and the Philox noise.
#pragma once

#include <cstdint>

#include "ops/common.h"
#include "ops/noise_math.h"

namespace roarfast {

// Weights of the 4 edge and the 4 diagonal neighbours (the ROAD paper's 1/6 and 1/12).
constexpr double kImputeEdge = 1.0 / 6.0;
constexpr double kImputeDiagonal = 1.0 / 12.0;

// (A v)_p at pixel (i, j) of one [H, W] plane: sum over in-bounds neighbours q of w_pq (v_p - v_q).
// A removed pixel's equation is (A v)_p = 0 (it equals the weighted mean of its neighbours); for a
// vector that is zero on the kept pixels this is the system's matrix, symmetric and diagonally
// dominant; for the full image it is minus the residual. Differences, not W_p v_p - sum w v_q, so a
// constant region gives exactly 0 (a region with no kept neighbour stays at its start value).
template <typename T>
ROARFAST_HD T impute_stencil_at(const T* plane, int64_t height, int64_t width, int64_t i, int64_t j) {
  const T centre = plane[i * width + j];
  T edge = 0, diagonal = 0;
  for (int64_t di = -1; di <= 1; ++di) {
    const int64_t y = i + di;
    if (y < 0 || y >= height) continue;
    for (int64_t dj = -1; dj <= 1; ++dj) {
      const int64_t x = j + dj;
      if (x < 0 || x >= width || (di == 0 && dj == 0)) continue;
      const T d = centre - plane[y * width + x];
      if (di == 0 || dj == 0) {
        edge += d;
      } else {
        diagonal += d;
      }
    }
  }
  return static_cast<T>(kImputeEdge) * edge + static_cast<T>(kImputeDiagonal) * diagonal;
}

// impute_stencil_at for a pixel whose 8 neighbours are all in bounds (c points at it), without the
// bounds tests so that rows of them vectorize; same sums in the same order, so the same bits.
template <typename T>
ROARFAST_HD T impute_stencil_interior(const T* c, int64_t width) {
  const T centre = c[0];
  const T edge = (centre - c[-width]) + (centre - c[-1]) + (centre - c[1]) + (centre - c[width]);
  const T diagonal =
      (centre - c[-width - 1]) + (centre - c[-width + 1]) + (centre - c[width - 1]) + (centre - c[width + 1]);
  return static_cast<T>(kImputeEdge) * edge + static_cast<T>(kImputeDiagonal) * diagonal;
}

// Conjugate-gradient step sizes, 0 where the denominator is 0 (a plane with nothing left to solve).
template <typename A>
ROARFAST_HD A impute_ratio(A numerator, A denominator) {
  return denominator > A(0) ? numerator / denominator : A(0);
}

// The Philox counter of impute's noise: (element group, image id lo, image id hi, a tag), so the
// noise of an image depends on its id and the seed only, and differs from ops.noise's streams.
constexpr uint32_t kImputeNoiseTag = 0x524F4144u;  // "ROAD"

// The 4 normals of Philox block `group` (elements 4*group .. 4*group+3 of an image, channel-major) of
// the image with noise id `id` under `seed`.
ROARFAST_HD void impute_normals4(uint64_t seed, uint64_t id, int64_t group, float z[4]) {
  const Philox4 counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32),
                         kImputeNoiseTag}};
  const Philox4 w = philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  box_muller(w.v[0], w.v[1], z[0], z[1]);
  box_muller(w.v[2], w.v[3], z[2], z[3]);
}

}  // namespace roarfast
