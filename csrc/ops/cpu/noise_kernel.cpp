// CPU noise: output images (sample-major) in parallel, each filled 4 elements per Philox block.
// On x86-64 with AVX2, 8 blocks at a time; elsewhere (aarch64, older x86) block by block. Both paths
// give the same bits: the build contracts no a*b+c into an FMA (-ffp-contract=off, setup.py).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#define ROARFAST_NOISE_AVX2 1
#include <immintrin.h>
#endif

#include "ops/noise.h"
#include "ops/noise_math.h"

namespace roarfast {

namespace {

// Whether the 8-block AVX2 path runs: where the CPU has AVX2, unless ROARFAST_NOISE_SCALAR=1 forces
// the block-by-block path (tests compare the two). Read once per process.
bool use_avx2() {
#if defined(ROARFAST_NOISE_AVX2)
  static const bool avx2 = [] {
    const char* forced = std::getenv("ROARFAST_NOISE_SCALAR");
    return !(forced != nullptr && std::strcmp(forced, "1") == 0) && __builtin_cpu_supports("avx2");
  }();
  return avx2;
#else
  return false;
#endif
}

#if defined(ROARFAST_NOISE_AVX2)
constexpr int kLanes = 8;  // Philox blocks per AVX2 batch (8 x 32-bit lanes)

// High halves of the 8 lane products a * m: even lanes from one 32x32->64 multiply, odd from another.
__attribute__((target("avx2"))) inline __m256i mulhi8(__m256i a, __m256i m) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// philox4x32_10 of the counters (g0 + i, image, sample lo, sample hi), i < 8, one block per lane:
// the same integer rounds as noise_math.h, 8 at a time (mulhi from the even/odd 32x32->64 products).
__attribute__((target("avx2"))) void philox8_avx2(uint32_t g0, uint32_t image, uint64_t sample, uint64_t seed,
                                                   uint32_t w[4][kLanes]) {
  __m256i v0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(g0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i v1 = _mm256_set1_epi32(static_cast<int>(image));
  __m256i v2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(sample)));
  __m256i v3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(sample >> 32)));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0)), m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const __m256i hi0 = mulhi8(v0, m0), lo0 = _mm256_mullo_epi32(v0, m0);
    const __m256i hi1 = mulhi8(v2, m1), lo1 = _mm256_mullo_epi32(v2, m1);
    v0 = _mm256_xor_si256(_mm256_xor_si256(hi1, v1), _mm256_set1_epi32(static_cast<int>(k0)));
    v1 = lo1;
    v2 = _mm256_xor_si256(_mm256_xor_si256(hi0, v3), _mm256_set1_epi32(static_cast<int>(k1)));
    v3 = lo0;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[0]), v0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[1]), v1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2]), v2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[3]), v3);
}

// The 32 normals of 8 Philox blocks, element order: the Box-Muller math inlined into an AVX2
// function, lane i of each half-pair in its own array, so the compiler runs the 8 blocks as vectors.
__attribute__((target("avx2"))) void normals8_avx2(const uint32_t w[4][kLanes], float z[4 * kLanes]) {
  float a0[kLanes], a1[kLanes], b0[kLanes], b1[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    box_muller(w[0][i], w[1][i], a0[i], a1[i]);
    box_muller(w[2][i], w[3][i], b0[i], b1[i]);
  }
  for (int i = 0; i < kLanes; ++i) {
    z[4 * i] = a0[i];
    z[4 * i + 1] = a1[i];
    z[4 * i + 2] = b0[i];
    z[4 * i + 3] = b1[i];
  }
}
#endif

// One noisy image: batches of 8 Philox blocks (32 elements) on AVX2, the rest group by group.
// The normals go through a local array so the add loop vectorizes and nothing aliases.
template <typename T>
void noise_image(const T* __restrict__ src, T* __restrict__ dst, int64_t image_elems, int64_t groups, uint32_t image,
                 uint64_t sample, uint64_t seed, float sigma, bool avx2) {
  int64_t g = 0;
#if defined(ROARFAST_NOISE_AVX2)
  if (avx2) {
    uint32_t w[4][kLanes];
    float z[4 * kLanes];
    for (; (g + kLanes) * 4 <= image_elems; g += kLanes) {
      philox8_avx2(static_cast<uint32_t>(g), image, sample, seed, w);
      normals8_avx2(w, z);
      const T* s = src + g * 4;
      T* d = dst + g * 4;
      for (int j = 0; j < 4 * kLanes; ++j) d[j] = static_cast<T>(static_cast<float>(s[j]) + sigma * z[j]);
    }
  }
#endif
  for (; g < groups; ++g) noise_group(src, dst, image_elems, g, image, sample, seed, sigma);
}

}  // namespace

at::Tensor noise_cpu(const at::Tensor& x, int64_t n, double noise_level, int64_t seed, int64_t offset,
                     const std::optional<at::Tensor>& seeds) {
  NoisePlan plan = plan_noise(x, n, noise_level, seed, offset, seeds);
  if (plan.out.numel() == 0) return plan.out;
  const float* sigma = plan.sigma.const_data_ptr<float>();
  const int64_t* keys = plan.seeds.defined() ? plan.seeds.const_data_ptr<int64_t>() : nullptr;
  const bool avx2 = use_avx2();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "noise_cpu", [&] {
    const scalar_t* src = plan.x.const_data_ptr<scalar_t>();
    scalar_t* dst = plan.out.data_ptr<scalar_t>();
    at::parallel_for(0, n * plan.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t s = row / plan.batch, b = row - s * plan.batch;
        uint64_t key;
        uint32_t image;
        noise_key(keys, plan.seed, b, key, image);
        noise_image(src + b * plan.image_elems, dst + row * plan.image_elems, plan.image_elems, plan.groups, image,
                    plan.offset + static_cast<uint64_t>(s), key, sigma[b], avx2);
      }
    });
  });
  return plan.out;
}

}  // namespace roarfast

TORCH_LIBRARY_IMPL(roarfast, CPU, m) { m.impl("noise", &roarfast::noise_cpu); }
