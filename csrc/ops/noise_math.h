// Counter-based Gaussian noise for SmoothGrad (DESIGN.md section 2), shared by the CPU and CUDA
// noise kernels so both draw the same numbers: Philox4x32-10 (Salmon et al., SC'11, "Parallel
// random numbers: as easy as 1, 2, 3") gives 4 uniform words per counter, Box-Muller turns each
// pair into two standard normals.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/common.h"

namespace roarfast {

// Philox4x32 multipliers and Weyl key increments (the published constants).
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
constexpr int kPhiloxRounds = 10;

struct Philox4 {
  uint32_t v[4];
};

ROARFAST_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

// One Philox round: two 32x32->64 multiplies, the high halves xored with the other words and the key.
ROARFAST_HD Philox4 philox_round(Philox4 c, uint32_t k0, uint32_t k1) {
  const uint32_t hi0 = mulhi32(kPhiloxM0, c.v[0]), lo0 = kPhiloxM0 * c.v[0];
  const uint32_t hi1 = mulhi32(kPhiloxM1, c.v[2]), lo1 = kPhiloxM1 * c.v[2];
  return Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
}

// Philox4x32-10 of a 128-bit counter under a 64-bit key: 10 rounds, the key bumped between rounds.
ROARFAST_HD Philox4 philox4x32_10(Philox4 counter, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    counter = philox_round(counter, k0, k1);
  }
  return counter;
}

// A uniform in (0, 1] from the top 24 bits of a word: never 0, so its log is finite.
ROARFAST_HD float uniform_open0(uint32_t w) { return static_cast<float>((w >> 8) + 1u) * 5.9604644775390625e-8f; }

// A uniform in [0, 1) from the top 24 bits of a word.
ROARFAST_HD float uniform_open1(uint32_t w) { return static_cast<float>(w >> 8) * 5.9604644775390625e-8f; }

// Box-Muller: two uniform words to two independent N(0,1) values (radius from a, angle from b).
ROARFAST_HD void box_muller(uint32_t a, uint32_t b, float& z0, float& z1) {
  const float radius = sqrtf(-2.0f * logf(uniform_open0(a)));
  const float angle = 6.28318530717958647692f * uniform_open1(b);
  float sine, cosine;
  sincosf(angle, &sine, &cosine);
  z0 = radius * cosine;
  z1 = radius * sine;
}

// The 4 normals of elements 4*group .. 4*group+3 of image `image` in noisy sample `sample`
// (offset included) under `seed`. The counter is (group, image, sample lo, sample hi), so every
// element of every image of every sample has its own Philox block, whatever the chunking.
ROARFAST_HD void noise_normals4(uint64_t seed, uint32_t group, uint32_t image, uint64_t sample, float z[4]) {
  const Philox4 counter{{group, image, static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
  const Philox4 w = philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  box_muller(w.v[0], w.v[1], z[0], z[1]);
  box_muller(w.v[2], w.v[3], z[2], z[3]);
}

// Writes the noisy copies of elements 4*group .. 4*group+3 (fewer at the image's end) of one image:
// dst[e] = src[e] + sigma * z[e], computed in float32.
template <typename T>
ROARFAST_HD void noise_group(const T* src, T* dst, int64_t image_elems, int64_t group, uint32_t image,
                             uint64_t sample, uint64_t seed, float sigma) {
  float z[4];
  noise_normals4(seed, static_cast<uint32_t>(group), image, sample, z);
  const int64_t first = group * 4;
  const int64_t count = image_elems - first < 4 ? image_elems - first : 4;
  for (int64_t j = 0; j < count; ++j) dst[first + j] = static_cast<T>(static_cast<float>(src[first + j]) + sigma * z[j]);
}

}  // namespace roarfast
