// The block cache (csrc/memory/block_cache.h): size classes, reuse, and the bound on what it keeps.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "memory/block_cache.h"

namespace {

using roarfast::BlockCache;

constexpr std::size_t kMiB = 1 << 20;

TEST(BlockCacheClass, WholePagesAtMostAnEighthAbove) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{4097}, std::size_t{100000},
                            kMiB - 1, kMiB, kMiB + 1, 37 * kMiB + 12345, std::size_t{3} << 30}) {
    const std::size_t cls = BlockCache::size_class(bytes);
    EXPECT_GE(cls, bytes);
    EXPECT_EQ(cls % 4096, 0u) << bytes;
    const std::size_t pages = (bytes + 4095) / 4096 * 4096;
    EXPECT_LE(cls - pages, pages / 8) << bytes;
  }
  // the classes are eight per power of two: sizes a step apart share no class, sizes within one do
  EXPECT_EQ(BlockCache::size_class(kMiB + 1), BlockCache::size_class(kMiB + kMiB / 8));
  EXPECT_NE(BlockCache::size_class(kMiB + kMiB / 8), BlockCache::size_class(kMiB + kMiB / 8 + 1));
}

TEST(BlockCache, AGivenBackBlockIsTakenAgainWithItsContents) {
  BlockCache cache;
  auto* first = static_cast<char*>(cache.take(3 * kMiB));
  ASSERT_NE(first, nullptr);
  std::memset(first, 7, 3 * kMiB);
  cache.give(first, 3 * kMiB);
  EXPECT_EQ(cache.stats().cached_blocks, 1u);
  // a request of the same class gets the same mapping, pages and all (no new mapping, no zero-filling)
  auto* again = static_cast<char*>(cache.take(3 * kMiB - 100));
  EXPECT_EQ(again, first);
  EXPECT_EQ(again[3 * kMiB - 1], 7);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.maps, 1u);
  EXPECT_EQ(stats.cached_blocks, 0u);
  EXPECT_EQ(stats.in_use_bytes, BlockCache::size_class(3 * kMiB));
  cache.give(again, 3 * kMiB - 100);
}

TEST(BlockCache, AnotherClassGetsANewMapping) {
  BlockCache cache;
  void* small = cache.take(2 * kMiB);
  cache.give(small, 2 * kMiB);
  void* large = cache.take(4 * kMiB);
  EXPECT_EQ(cache.stats().maps, 2u);
  EXPECT_EQ(cache.stats().hits, 0u);
  cache.give(large, 4 * kMiB);
}

TEST(BlockCache, RepeatedBatchesKeepOneBatchOfBlocks) {
  // the same shapes over many batches, as an extraction's: after the first batch nothing new is mapped
  BlockCache cache;
  const std::vector<std::size_t> batch = {37 * kMiB, 37 * kMiB, 9 * kMiB, 2 * kMiB, 150 * 1024};
  std::size_t one_batch = 0;
  for (std::size_t bytes : batch) one_batch += BlockCache::size_class(bytes);
  for (int step = 0; step < 50; ++step) {
    std::vector<void*> blocks;
    for (std::size_t bytes : batch) blocks.push_back(cache.take(bytes));
    for (std::size_t i = 0; i < batch.size(); ++i) cache.give(blocks[i], batch[i]);
  }
  const auto stats = cache.stats();
  EXPECT_EQ(stats.maps, batch.size());
  EXPECT_EQ(stats.hits, 49 * batch.size());
  EXPECT_EQ(stats.cached_bytes, one_batch);
  EXPECT_EQ(stats.peak_in_use_bytes, one_batch);
  EXPECT_EQ(stats.unmaps, 0u);
}

TEST(BlockCache, ABatchWhoseBlocksAreNotAllAliveAtOnceKeepsThemWithinTheBound) {
  // a forward pass's block freed as the gradient's is made: 24 MiB used over a batch whose peak in use is 16 MiB
  // (within 1.5 times it), all kept and reused batch after batch
  BlockCache cache;
  for (int step = 0; step < 20; ++step) {
    void* forward = cache.take(8 * kMiB);
    void* backward = cache.take(7 * kMiB);
    cache.give(forward, 8 * kMiB);
    void* gradient = cache.take(9 * kMiB);
    cache.give(backward, 7 * kMiB);
    cache.give(gradient, 9 * kMiB);
  }
  EXPECT_EQ(cache.stats().maps, 3u);
  EXPECT_EQ(cache.stats().resizes, 0u);
  EXPECT_EQ(cache.stats().unmaps, 0u);
}

TEST(BlockCache, AMissBeyondTheBoundResizesTheNearestCachedBlock) {
  BlockCache cache;
  auto* block = static_cast<char*>(cache.take(8 * kMiB));
  std::memset(block, 5, 8 * kMiB);
  cache.give(block, 8 * kMiB);
  // 10 MiB in use and 8 cached would be 1.8 times the peak: the 8-MiB block grows instead, keeping its pages
  auto* grown = static_cast<char*>(cache.take(10 * kMiB));
  EXPECT_EQ(grown[8 * kMiB - 1], 5);
  grown[10 * kMiB - 1] = 1;
  auto stats = cache.stats();
  EXPECT_EQ(stats.maps, 1u);
  EXPECT_EQ(stats.resizes, 1u);
  EXPECT_EQ(stats.cached_bytes, 0u);
  cache.give(grown, 10 * kMiB);
  // and a smaller request shrinks it (its tail goes back to the system)
  void* shrunk = cache.take(6 * kMiB);
  stats = cache.stats();
  EXPECT_EQ(stats.maps, 1u);
  EXPECT_EQ(stats.resizes, 2u);
  EXPECT_EQ(stats.in_use_bytes, BlockCache::size_class(6 * kMiB));
  cache.give(shrunk, 6 * kMiB);
}

TEST(BlockCache, WhatIsMappedStaysWithinTheBound) {
  // sizes that change every step, mostly to a class not seen before: in use and cached together stay within
  // kMappedPerPeak times the peak in use once a block is given back, the cache giving way (resized or dropped)
  BlockCache cache;
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(cache.take(8 * kMiB));  // peak in use: 4 x 8 MiB
  for (void* block : held) cache.give(block, 8 * kMiB);
  const double peak = static_cast<double>(cache.stats().peak_in_use_bytes);
  for (int step = 1; step <= 200; ++step) {
    const std::size_t bytes = kMiB + step * 64 * 1024;  // 1.06 to 13.5 MiB
    void* block = cache.take(bytes);
    cache.give(block, bytes);
    const auto stats = cache.stats();
    EXPECT_EQ(static_cast<double>(stats.peak_in_use_bytes), peak) << step;
    EXPECT_LE(static_cast<double>(stats.in_use_bytes + stats.cached_bytes), BlockCache::kMappedPerPeak * peak)
        << step;
  }
  const auto stats = cache.stats();
  EXPECT_GT(stats.resizes + stats.unmaps, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
}

TEST(BlockCache, ReleaseUnmapsTheCachedBlocksAndRestartsThePeak) {
  BlockCache cache;
  void* kept = cache.take(16 * kMiB);
  void* freed = cache.take(32 * kMiB);
  cache.give(freed, 32 * kMiB);
  EXPECT_EQ(cache.release(), BlockCache::size_class(32 * kMiB));
  const auto stats = cache.stats();
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.cached_blocks, 0u);
  EXPECT_EQ(stats.peak_in_use_bytes, BlockCache::size_class(16 * kMiB));  // what is still in use
  // the block still in use is given back, within a bound that is now 1.5 times its own size
  cache.give(kept, 16 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, BlockCache::size_class(16 * kMiB));
}

}  // namespace
