// The ordering math of rank (rank_math.h) and the rank op's CPU kernel against an ATen reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "ops/rank.h"
#include "ops/rank_math.h"

namespace {

using roarfast::rank_key;

TEST(RankKey, HigherScoreGetsSmallerKey) {
  const float scores[] = {std::numeric_limits<float>::infinity(), 1e30f, 2.5f, 1.0f, 1e-30f, 0.0f,
                          -1e-30f, -1.0f, -1e30f, -std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i + 1 < sizeof(scores) / sizeof(scores[0]); ++i) {
    EXPECT_LT(rank_key(scores[i]), rank_key(scores[i + 1])) << scores[i] << " vs " << scores[i + 1];
  }
}

TEST(RankKey, NanRanksAfterMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_GT(rank_key(nan), rank_key(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(rank_key(nan), rank_key(-nan));
}

TEST(RankKey, SignedZerosTie) { EXPECT_EQ(rank_key(0.0f), rank_key(-0.0f)); }

TEST(UnitScore, SumOfSquaresOverChannels) {
  // Two channels of a 1x2 image: pixel 0 = (3, 4), pixel 1 = (1, -2).
  const float image[] = {3.0f, 1.0f, 4.0f, -2.0f};
  EXPECT_FLOAT_EQ(roarfast::unit_score(image, 2, 2, 0, roarfast::ChannelReduce::kSumSquares), 25.0f);
  EXPECT_FLOAT_EQ(roarfast::unit_score(image, 2, 2, 1, roarfast::ChannelReduce::kSumSquares), 5.0f);
  EXPECT_FLOAT_EQ(roarfast::unit_score(image, 2, 2, 1, roarfast::ChannelReduce::kAbsSum), 3.0f);
  EXPECT_FLOAT_EQ(roarfast::unit_score(image, 2, 2, 1, roarfast::ChannelReduce::kMax), 1.0f);
}

TEST(UnitScore, MaxPropagatesNan) {
  const float image[] = {std::nanf(""), 1.0f};
  EXPECT_TRUE(std::isnan(roarfast::unit_score(image, 2, 1, 0, roarfast::ChannelReduce::kMax)));
}

// Reference: stable argsort of -score (NaN moved last), scattered into ranks.
torch::Tensor reference_ranks(const torch::Tensor& scores) {
  auto flat = scores.flatten(1).to(torch::kFloat);
  auto nan = flat.isnan();
  auto order = torch::argsort(-flat.masked_fill(nan, 0.0), /*stable=*/true, /*dim=*/1, /*descending=*/false);
  auto nan_sorted = nan.gather(1, order).to(torch::kUInt8);
  order = order.gather(1, torch::argsort(nan_sorted, /*stable=*/true, /*dim=*/1, /*descending=*/false));
  auto ranks = torch::empty_like(order);
  ranks.scatter_(1, order, torch::arange(flat.size(1)).expand_as(order).contiguous());
  return ranks.view(scores.sizes());
}

TEST(RankCpu, MatchesReferenceWithTiesAndNan) {
  torch::manual_seed(0);
  auto scores = torch::randint(0, 5, {6, 9, 11}).to(torch::kFloat);  // many ties
  scores[0][0][0] = std::nanf("");
  scores[1][3][4] = -std::numeric_limits<float>::infinity();
  auto ranks = roarfast::rank_cpu(scores, "none");
  ASSERT_EQ(ranks.scalar_type(), at::kUInt16);
  EXPECT_TRUE(torch::equal(ranks.to(torch::kLong), reference_ranks(scores)));
}

TEST(RankCpu, LargeImagesUseInt32) {
  auto scores = torch::randn({2, 300, 300});
  auto ranks = roarfast::rank_cpu(scores, "none");
  ASSERT_EQ(ranks.scalar_type(), at::kInt);
  EXPECT_TRUE(torch::equal(ranks.to(torch::kLong), reference_ranks(scores)));
}

TEST(RankCpu, RejectsWrongRank) {
  auto scores = torch::randn({4, 4});
  EXPECT_THROW(roarfast::rank_cpu(scores, "none"), c10::Error);
}

}  // namespace
