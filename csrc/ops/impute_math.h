// Noisy linear imputation (ROAD, Rong et al. ICML 2022; DESIGN.md section 11), shared by the CPU and
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

// The Philox counter of impute's noise: (element group, image id lo, image id hi, a tag), so the
// noise of an image depends on its id and the seed only, and differs from ops.noise's streams.
constexpr uint32_t kImputeNoiseTag = 0x524F4144u;  // "ROAD"

// Adds std * z to the removed elements 4*group .. 4*group+3 (fewer at the image's end) of one image.
template <typename T>
ROARFAST_HD void impute_noise_group(T* image, const bool* removed, int64_t plane, int64_t image_elems, int64_t group,
                                    uint64_t id, uint64_t seed, float std) {
  const Philox4 counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32),
                         kImputeNoiseTag}};
  const Philox4 w = philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  float z[4];
  box_muller(w.v[0], w.v[1], z[0], z[1]);
  box_muller(w.v[2], w.v[3], z[2], z[3]);
  const int64_t first = group * 4;
  const int64_t count = image_elems - first < 4 ? image_elems - first : 4;
  for (int64_t e = 0; e < count; ++e) {
    const int64_t element = first + e;
    if (removed[element % plane]) image[element] += static_cast<T>(std * z[e]);
  }
}

}  // namespace roarfast
