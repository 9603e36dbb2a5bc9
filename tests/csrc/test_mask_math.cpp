// The masking math (mask_math.h): the ROAR/KAR predicate, element addressing in both layouts,
// normalization, and the mask op's CPU kernel against an ATen torch::where formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ops/mask.h"
#include "ops/mask_math.h"

namespace {

using roarfast::is_replaced;
using roarfast::MaskShape;

TEST(IsReplaced, RoarReplacesTopKKarKeepsThem) {
  EXPECT_TRUE(is_replaced(0, 1, false));
  EXPECT_FALSE(is_replaced(1, 1, false));
  EXPECT_FALSE(is_replaced(0, 1, true));
  EXPECT_TRUE(is_replaced(1, 1, true));
  EXPECT_FALSE(is_replaced(0, 0, false));  // k = 0: ROAR changes nothing
  EXPECT_TRUE(is_replaced(0, 0, true));   // k = 0: KAR replaces everything
}

TEST(NormalizeU8, TorchvisionFormula) {
  EXPECT_FLOAT_EQ(roarfast::normalize_u8(0, 0.5f, 0.25f), -2.0f);
  EXPECT_FLOAT_EQ(roarfast::normalize_u8(255, 0.5f, 0.25f), 2.0f);
}

TEST(ImageOffset, BothLayouts) {
  // [B=2, C=3, H*W=6]: NCHW walks pixels within a channel plane, NHWC channels within a pixel
  EXPECT_EQ(roarfast::image_offset(false, 3, 6, 1, 2, 4), (1 * 3 + 2) * 6 + 4);
  EXPECT_EQ(roarfast::image_offset(true, 3, 6, 1, 2, 4), (1 * 6 + 4) * 3 + 2);
  EXPECT_EQ(roarfast::image_offset(false, 3, 6, 0, 0, 5), 5);
  EXPECT_EQ(roarfast::image_offset(true, 3, 6, 0, 0, 5), 15);
}

TEST(RankOffset, PixelUnitsShareAcrossChannels) {
  const MaskShape pixel{3, 4, false, false, false, false};
  const MaskShape value{3, 4, true, false, false, false};
  EXPECT_EQ(roarfast::rank_offset(pixel, 1, 2, 3), 1 * 4 + 3);
  EXPECT_EQ(roarfast::rank_offset(value, 1, 2, 3), (1 * 3 + 2) * 4 + 3);
}

TEST(MaskKernel, MatchesWhereOverRanks) {
  torch::manual_seed(0);
  const auto images = torch::rand({3, 2, 4, 5});
  const auto ranks = torch::stack({torch::randperm(20), torch::randperm(20), torch::randperm(20)}).view({3, 4, 5});
  const auto k = torch::tensor({0, 7, 20}, torch::kLong);
  const auto fill = torch::tensor({-1.0f, -2.0f});
  for (const bool keep : {false, true}) {
    const auto replaced = keep ? ranks.unsqueeze(1) >= k.view({3, 1, 1, 1}) : ranks.unsqueeze(1) < k.view({3, 1, 1, 1});
    const auto expected = torch::where(replaced, fill.view({1, 2, 1, 1}), images);
    EXPECT_TRUE(torch::equal(roarfast::mask_cpu(images, ranks, k, fill, keep), expected)) << "keep " << keep;
  }
}

}  // namespace
