// Masking of ranked units (README, "Semantics"), shared by the CPU and CUDA mask kernels:
// which units are replaced, where an element and its rank live, and the value written.
#pragma once

#include <cstdint>

#include "ops/common.h"

namespace roarfast {

// ROAR (keep=false) replaces the k most important units (rank < k); KAR (keep=true) keeps them
// and replaces the rest.
ROARFAST_HD bool is_replaced(int64_t rank, int64_t k, bool keep) { return keep ? rank >= k : rank < k; }

// uint8 pixel to the normalized input of a model: torchvision's (x/255 - mean) / std.
ROARFAST_HD float normalize_u8(uint8_t x, float mean, float std) {
  return (static_cast<float>(x) / 255.0f - mean) / std;
}

// The geometry of one mask call: images [B,C,H,W] stored NCHW or NHWC, output likewise,
// ranks [B,H,W] (pixel units) or [B,C,H,W] (value units), both contiguous NCHW.
struct MaskShape {
  int64_t channels;
  int64_t plane;  // H*W
  bool value_units;
  bool in_nhwc;
  bool out_nhwc;
  bool keep;
};

ROARFAST_HD int64_t image_offset(bool nhwc, int64_t channels, int64_t plane, int64_t b, int64_t c, int64_t p) {
  return nhwc ? (b * plane + p) * channels + c : (b * channels + c) * plane + p;
}

ROARFAST_HD int64_t rank_offset(const MaskShape& s, int64_t b, int64_t c, int64_t p) {
  return s.value_units ? (b * s.channels + c) * s.plane + p : b * s.plane + p;
}

// Plain mask of one channel: the image's own value, or the fill (already in the image dtype).
// The per-channel constants are plain values so a row loop keeps them in registers.
template <typename T>
struct CopyOrFillChannel {
  T fill;
  ROARFAST_HD T operator()(T x, bool replaced) const { return replaced ? fill : x; }
};

// Plain mask: the image's own value, or the per-channel fill (already in the image dtype).
template <typename T>
struct CopyOrFill {
  const T* fill;
  ROARFAST_HD CopyOrFillChannel<T> channel(int64_t c) const { return {fill[c]}; }
  ROARFAST_HD T operator()(T x, int64_t c, bool replaced) const { return channel(c)(x, replaced); }
};

// Fused mask + normalize of one channel of uint8 images; fill is given in the normalized space.
template <typename T>
struct NormalizeOrFillChannel {
  float fill;
  float mean;
  float std;
  ROARFAST_HD T operator()(uint8_t x, bool replaced) const {
    return static_cast<T>(replaced ? fill : normalize_u8(x, mean, std));
  }
};

// Fused mask + normalize of uint8 images; fill is given in the normalized space.
template <typename T>
struct NormalizeOrFill {
  const float* fill;  // nullptr when nothing is masked
  const float* mean;
  const float* std;
  ROARFAST_HD NormalizeOrFillChannel<T> channel(int64_t c) const {
    return {fill != nullptr ? fill[c] : 0.0f, mean[c], std[c]};
  }
  ROARFAST_HD T operator()(uint8_t x, int64_t c, bool replaced) const { return channel(c)(x, replaced); }
};

// One output element. ranks == nullptr means no unit is replaced.
template <typename in_t, typename rank_t, typename Value>
ROARFAST_HD auto mask_element(const in_t* in, const rank_t* ranks, const int64_t* k, const MaskShape& s, int64_t b,
                              int64_t c, int64_t p, const Value& value) {
  const in_t x = in[image_offset(s.in_nhwc, s.channels, s.plane, b, c, p)];
  const bool replaced = ranks != nullptr && is_replaced(static_cast<int64_t>(ranks[rank_offset(s, b, c, p)]), k[b], s.keep);
  return value(x, c, replaced);
}

}  // namespace roarfast
