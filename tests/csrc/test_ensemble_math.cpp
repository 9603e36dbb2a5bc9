// The streaming moments of ensemble (ensemble_math.h): Welford and the Chan merge against a
// two-pass computation in double, constant inputs giving exactly zero variance, and finalize.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "ops/ensemble.h"
#include "ops/ensemble_math.h"

namespace {

// Mean and sum of squared deviations of xs, two passes in double.
void two_pass(const std::vector<float>& xs, double& mean, double& m2) {
  mean = 0.0;
  for (float x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  m2 = 0.0;
  for (float x : xs) m2 += (x - mean) * (x - mean);
}

const std::vector<float> kSamples = {1.5f, -2.0f, 0.25f, 3.0f, 3.0f, -0.75f, 10.0f, 0.1f, -4.5f};

TEST(Welford, MatchesTwoPass) {
  float mean = 0.0f, m2 = 0.0f;
  for (size_t i = 0; i < kSamples.size(); ++i) roarfast::welford_step(kSamples[i], static_cast<int64_t>(i), mean, m2);
  double want_mean, want_m2;
  two_pass(kSamples, want_mean, want_m2);
  EXPECT_NEAR(mean, want_mean, 1e-5);
  EXPECT_NEAR(m2, want_m2, 1e-4);
}

TEST(ChanMerge, AnySplitMatchesTwoPass) {
  double want_mean, want_m2;
  two_pass(kSamples, want_mean, want_m2);
  for (size_t split = 0; split <= kSamples.size(); ++split) {
    float mean_a = 0.0f, m2_a = 0.0f, mean_b = 0.0f, m2_b = 0.0f;
    for (size_t i = 0; i < split; ++i) roarfast::welford_step(kSamples[i], static_cast<int64_t>(i), mean_a, m2_a);
    for (size_t i = split; i < kSamples.size(); ++i) {
      roarfast::welford_step(kSamples[i], static_cast<int64_t>(i - split), mean_b, m2_b);
    }
    roarfast::chan_merge(static_cast<int64_t>(split), mean_a, m2_a, static_cast<int64_t>(kSamples.size() - split),
                         mean_b, m2_b);
    EXPECT_NEAR(mean_a, want_mean, 1e-5) << "split " << split;
    EXPECT_NEAR(m2_a, want_m2, 1e-4) << "split " << split;
  }
}

TEST(ChanMerge, ConstantValuesHaveZeroSpread) {
  float mean = 0.0f, m2 = 0.0f, chunk_mean = 0.0f, chunk_m2 = 0.0f;
  for (int i = 0; i < 3; ++i) roarfast::welford_step(1000.1f, i, mean, m2);
  for (int i = 0; i < 5; ++i) roarfast::welford_step(1000.1f, i, chunk_mean, chunk_m2);
  roarfast::chan_merge(3, mean, m2, 5, chunk_mean, chunk_m2);
  EXPECT_EQ(m2, 0.0f);
  EXPECT_EQ(mean, 1000.1f);
}

TEST(EnsembleMoments, SgSqIsSpreadPlusMeanSquared) {
  float sg, sg_sq, var;
  roarfast::ensemble_moments(2.0f, 12.0f, 4, sg, sg_sq, var);
  EXPECT_EQ(sg, 2.0f);
  EXPECT_EQ(var, 3.0f);
  EXPECT_EQ(sg_sq, 7.0f);
}

TEST(EnsembleKernel, UpdateAndFinalizeMatchAten) {
  torch::manual_seed(0);
  const auto grads = torch::randn({7, 2, 3, 4, 4});
  auto mean = torch::zeros({2, 3, 4, 4});
  auto m2 = torch::zeros({2, 3, 4, 4});
  roarfast::ensemble_update_cpu(mean, m2, 0, grads.slice(0, 0, 3));
  roarfast::ensemble_update_cpu(mean, m2, 3, grads.slice(0, 3, 7));
  const auto [sg, sg_sq, var] = roarfast::ensemble_finalize_cpu(mean, m2, 7, "sum_sq");
  const auto g = grads.to(torch::kDouble);
  const auto want_sg = g.mean(0), want_sq = (g * g).mean(0), want_var = (g * g).mean(0) - want_sg * want_sg;
  EXPECT_TRUE(torch::allclose(sg.to(torch::kDouble), (want_sg * want_sg).sum(1), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(sg_sq.to(torch::kDouble), (want_sq * want_sq).sum(1), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(var.to(torch::kDouble), (want_var * want_var).sum(1), 1e-4, 1e-6));
}

}  // namespace
