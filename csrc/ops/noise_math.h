// Counter-based Gaussian noise for SmoothGrad (README, "Semantics"), shared by the CPU and CUDA
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

// A uniform in (0, 1] from the top 24 bits of a word: never 0, so its log is finite. (Through int32:
// the value fits, and signed conversion vectorizes where unsigned does not.)
ROARFAST_HD float uniform_open0(uint32_t w) {
  return static_cast<float>(static_cast<int32_t>((w >> 8) + 1u)) * 5.9604644775390625e-8f;
}

// A uniform in [0, 1) from the top 24 bits of a word.
ROARFAST_HD float uniform_open1(uint32_t w) {
  return static_cast<float>(static_cast<int32_t>(w >> 8)) * 5.9604644775390625e-8f;
}

// Natural log of a positive normal float, to about 1 ulp, in plain branch-free arithmetic: no libm
// call and no data-dependent branch, so the CPU loop over 8 blocks vectorizes, and CPU and GPU
// evaluate the same polynomial. u = m * 2^e with m in [sqrt(1/2), sqrt(2)), split by integer
// arithmetic on the bits (offsetting by sqrt(1/2)'s bits puts the exponent boundary there);
// ln(m) = x - x^2/2 + x^3 P(x), x = m - 1, with Cephes' single-precision minimax coefficients;
// ln 2 split in two parts so that e * ln 2 adds no rounding of its own.
ROARFAST_HD float log_positive(float u) {
  constexpr uint32_t kSqrtHalfBits = 0x3F3504F3u;
  const int32_t shifted = static_cast<int32_t>(float_bits(u) - kSqrtHalfBits);
  const float e = static_cast<float>(shifted >> 23);  // arithmetic shift: floor
  const float x = bits_float((static_cast<uint32_t>(shifted) & 0x007FFFFFu) + kSqrtHalfBits) - 1.0f;
  const float z = x * x;
  float p = 7.0376836292e-2f;
  p = p * x - 1.1514610310e-1f;
  p = p * x + 1.1676998740e-1f;
  p = p * x - 1.2420140846e-1f;
  p = p * x + 1.4249322787e-1f;
  p = p * x - 1.6668057665e-1f;
  p = p * x + 2.0000714765e-1f;
  p = p * x - 2.4999993993e-1f;
  p = p * x + 3.3333331174e-1f;
  const float y = x * z * p + e * -2.12194440e-4f - 0.5f * z;
  return x + y + e * 0.693359375f;
}

// sin and cos of 2*pi*t for t in [0, 1), branch-free like log_positive. The reduction is in quarter
// turns: 4t = q + f exactly on t's 24-bit grid, so the only rounding is f * pi/2; sine and cosine of
// f * pi/2 in [-pi/4, pi/4] by Cephes' single-precision polynomials, then rotated by q quarters
// with bit operations (an odd q swaps the two, q's bits pick the signs).
ROARFAST_HD void sincos_turns(float t, float& sine, float& cosine) {
  const float r = 4.0f * t;
  const int32_t q = static_cast<int32_t>(r + 0.5f);  // nearest quarter (r >= 0: truncation is floor)
  const float x = (r - static_cast<float>(q)) * 1.57079632679489662f;
  const float x2 = x * x;
  const float s = x + x * x2 * (-1.6666654611e-1f + x2 * (8.3321608736e-3f + x2 * -1.9515295891e-4f));
  const float c = 1.0f - 0.5f * x2 +
                  x2 * x2 * (4.166664568298827e-2f + x2 * (-1.388731625493765e-3f + x2 * 2.443315711809948e-5f));
  const uint32_t swap = 0u - static_cast<uint32_t>(q & 1);  // all ones for odd quarters
  const uint32_t s_bits = float_bits(s), c_bits = float_bits(c);
  const uint32_t sin_bits = (c_bits & swap) | (s_bits & ~swap);
  const uint32_t cos_bits = (s_bits & swap) | (c_bits & ~swap);
  // sin(q pi/2 + x) is negative for quarters 2, 3 and cos(q pi/2 + x) for quarters 1, 2
  sine = bits_float(sin_bits ^ (static_cast<uint32_t>(q & 2) << 30));
  cosine = bits_float(cos_bits ^ (static_cast<uint32_t>((q + 1) & 2) << 30));
}

// Box-Muller: two uniform words to two independent N(0,1) values (radius from a, angle from b).
ROARFAST_HD void box_muller(uint32_t a, uint32_t b, float& z0, float& z1) {
  const float radius = sqrtf(-2.0f * log_positive(uniform_open0(a)));
  float sine, cosine;
  sincos_turns(uniform_open1(b), sine, cosine);
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

// The key and the counter's image word of image b: a call's one seed and b, or with a key per image
// (seeds != nullptr) that key and 0, so image b's noise is what a call on it alone under seeds[b] draws.
ROARFAST_HD void noise_key(const int64_t* seeds, uint64_t seed, int64_t b, uint64_t& key, uint32_t& image) {
  key = seeds != nullptr ? static_cast<uint64_t>(seeds[b]) : seed;
  image = seeds != nullptr ? 0u : static_cast<uint32_t>(b);
}

}  // namespace roarfast
