// The counter-based generator of noise (noise_math.h): Philox4x32-10 known answers, the uniform
// and normal transforms, and the noise op's CPU kernel against an ATen formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "ops/noise.h"
#include "ops/noise_math.h"

namespace {

using roarfast::Philox4;

struct PhiloxKat {
  Philox4 counter;
  uint32_t k0, k1;
  Philox4 expected;
};

// Random123's published known-answer vectors (kat_vectors, philox4x32 10).
TEST(Philox, Random123KnownAnswers) {
  const PhiloxKat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const auto& kat : kats) {
    const Philox4 out = roarfast::philox4x32_10(kat.counter, kat.k0, kat.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], kat.expected.v[i]) << "word " << i;
  }
}

TEST(Uniform, EndpointsStayInRange) {
  EXPECT_GT(roarfast::uniform_open0(0u), 0.0f);
  EXPECT_EQ(roarfast::uniform_open0(0xffffffffu), 1.0f);
  EXPECT_EQ(roarfast::uniform_open1(0u), 0.0f);
  EXPECT_LT(roarfast::uniform_open1(0xffffffffu), 1.0f);
}

// log_positive on every uniform the generator can produce (k * 2^-24, k = 1 .. 2^24) against the
// double-precision log: within 1 ulp of the float result (0.83 measured).
TEST(NoiseMath, LogIsAccurateOnTheWholeUniformGrid) {
  double worst = 0.0;
  for (uint32_t k = 1; k <= (1u << 24); ++k) {
    const float u = static_cast<float>(k) * 5.9604644775390625e-8f;
    const double exact = std::log(static_cast<double>(u));
    const double ulp = exact == 0.0 ? 0.0 : std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
    const double err = std::fabs(roarfast::log_positive(u) - exact);
    if (exact == 0.0) {
      ASSERT_EQ(roarfast::log_positive(u), 0.0f);
    } else {
      worst = std::max(worst, err / ulp);
    }
  }
  EXPECT_LE(worst, 1.0);
}

// sincos_turns on every angle the generator can produce (t = k * 2^-24) against double sin/cos of
// 2 pi t: absolute error below 2^-23 (1.07e-7 measured; the values are at most 1).
TEST(NoiseMath, SinCosAreAccurateOnTheWholeAngleGrid) {
  double worst = 0.0;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const float t = static_cast<float>(k) * 5.9604644775390625e-8f;
    float s, c;
    roarfast::sincos_turns(t, s, c);
    const double angle = 6.283185307179586476925 * static_cast<double>(t);
    worst = std::max({worst, std::fabs(s - std::sin(angle)), std::fabs(c - std::cos(angle))});
  }
  EXPECT_LE(worst, std::ldexp(1.0, -23));
}

TEST(BoxMuller, RadiusAndAngle) {
  float z0, z1;
  // u1 = 1 -> radius 0; the top word of u1 = 2^-24 gives the largest radius sqrt(2 * 24 ln 2).
  roarfast::box_muller(0xffffffffu, 0x40000000u, z0, z1);
  EXPECT_EQ(z0, 0.0f);
  EXPECT_EQ(z1, 0.0f);
  roarfast::box_muller(0u, 0u, z0, z1);  // angle 0: all on the cosine
  EXPECT_NEAR(z0, std::sqrt(48.0 * std::log(2.0)), 1e-4);
  EXPECT_EQ(z1, 0.0f);
}

TEST(NoiseNormals, DistinctCountersGiveDistinctNormals) {
  float a[4], b[4], c[4], d[4];
  roarfast::noise_normals4(1, 0, 0, 0, a);
  roarfast::noise_normals4(1, 0, 0, 1, b);  // next sample
  roarfast::noise_normals4(1, 0, 1, 0, c);  // next image
  roarfast::noise_normals4(2, 0, 0, 0, d);  // next seed
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(a[i], b[i]);
    EXPECT_NE(a[i], c[i]);
    EXPECT_NE(a[i], d[i]);
  }
}

TEST(NoiseKernel, SigmaIsNoiseLevelTimesImageRange) {
  // z of one image is the same whatever the other images hold, so sigma alone scales it.
  auto x = torch::zeros({2, 1, 3, 3});
  x[0][0][0][0] = 2.0f;  // range 2
  x[1][0][1][1] = -0.5f;  // range 0.5
  const auto out = roarfast::noise_cpu(x, 1, 0.1, 42, 0, std::nullopt);
  auto unit = torch::zeros({2, 1, 3, 3});
  unit[0][0][0][0] = 1.0f;
  unit[1][0][0][0] = 1.0f;
  const auto z = roarfast::noise_cpu(unit, 1, 1.0, 42, 0, std::nullopt) - unit;
  EXPECT_TRUE(torch::allclose(out[0] - x[0], 0.2 * z[0], 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(out[1] - x[1], 0.05 * z[1], 1e-5, 1e-6));
}

TEST(NoiseKernel, AKeyPerImageDrawsEachImageAsAlone) {
  // with a key per image, image b's noise is that of a call on it alone under its key: bit for bit
  const auto x = torch::randn({3, 2, 5, 3});
  const auto keys = torch::tensor({int64_t{7}, int64_t{-3}, int64_t{1} << 40});
  const auto keyed = roarfast::noise_cpu(x, 2, 0.3, 0, 4, keys).view({2, 3, 2, 5, 3});
  for (int64_t b = 0; b < 3; ++b) {
    const auto alone = roarfast::noise_cpu(x.narrow(0, b, 1), 2, 0.3, keys[b].item<int64_t>(), 4, std::nullopt);
    EXPECT_TRUE(torch::equal(keyed.select(1, b), alone)) << "image " << b;
  }
  uint64_t key = 0;
  uint32_t image = 9;
  const int64_t seeds[] = {11, 12};
  roarfast::noise_key(seeds, 5, 1, key, image);
  EXPECT_EQ(key, 12u);
  EXPECT_EQ(image, 0u);
  roarfast::noise_key(nullptr, 5, 1, key, image);
  EXPECT_EQ(key, 5u);
  EXPECT_EQ(image, 1u);
}

}  // namespace
