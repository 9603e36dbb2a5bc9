// The block cache (block_cache.h): size classes, mapping, reuse, resizing, and the bound on what is mapped.
#include "memory/block_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <iterator>

namespace roarfast {

namespace {

constexpr std::size_t kPage = 4096;

void* map_block(std::size_t bytes) {
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return block == MAP_FAILED ? nullptr : block;
}

// `block` (of `had` bytes) made `bytes` long, its pages kept (mremap moves them if it must); a new block if it cannot
void* resize_block(void* block, std::size_t had, std::size_t bytes) {
  void* moved = mremap(block, had, bytes, MREMAP_MAYMOVE);
  if (moved != MAP_FAILED) return moved;
  munmap(block, had);
  return map_block(bytes);
}

}  // namespace

std::size_t BlockCache::size_class(std::size_t bytes) {
  const std::size_t pages = (std::max<std::size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  // eight steps between one power of two and the next: the step is an eighth of the power at or below
  const std::size_t step = std::max(kPage, std::bit_floor(pages) / 8);
  return (pages + step - 1) / step * step;
}

BlockCache::~BlockCache() { release(); }

bool BlockCache::within_bound_locked(std::size_t more) const {
  const std::size_t in_use = stats_.in_use_bytes + more;
  const double peak = static_cast<double>(std::max(stats_.peak_in_use_bytes, in_use));
  return static_cast<double>(in_use + stats_.cached_bytes) <= kMappedPerPeak * peak;
}

void* BlockCache::pop_locked(std::map<std::size_t, std::vector<std::list<Entry>::iterator>>::iterator cls,
                             bool newest) {
  auto& same = cls->second;
  // the newest is the likeliest still in the CPU's caches; the oldest the longest unused
  const auto at = newest ? std::prev(same.end()) : same.begin();
  const auto node = *at;
  void* block = node->second;
  same.erase(at);
  if (same.empty()) by_class_.erase(cls);
  order_.erase(node);
  return block;
}

void* BlockCache::take(std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  std::unique_lock<std::mutex> lock(mutex_);
  void* block = nullptr;
  auto exact = by_class_.find(cls);
  if (exact != by_class_.end()) {
    block = pop_locked(exact, true);
    stats_.cached_bytes -= cls;
    stats_.cached_blocks -= 1;
    stats_.hits += 1;
  } else {
    void* old = nullptr;
    std::size_t had = 0;
    if (!by_class_.empty() && !within_bound_locked(cls)) {
      // a new block would take what is mapped past the bound: the nearest cached block is resized instead, the
      // smallest larger one (it gives its tail back) or else the largest (it grows by the missing pages only)
      auto nearest = by_class_.lower_bound(cls);
      if (nearest == by_class_.end()) nearest = std::prev(by_class_.end());
      had = nearest->first;
      old = pop_locked(nearest, true);
      stats_.cached_bytes -= had;
      stats_.cached_blocks -= 1;
    }
    lock.unlock();  // the system calls need not hold up other threads' takes and gives
    block = old == nullptr ? map_block(cls) : resize_block(old, had, cls);
    lock.lock();
    if (block == nullptr) return nullptr;
    (old == nullptr ? stats_.maps : stats_.resizes) += 1;
  }
  stats_.in_use_bytes += cls;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return block;
}

void BlockCache::give(void* block, std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= cls;
  order_.emplace_back(cls, block);
  by_class_[cls].push_back(std::prev(order_.end()));
  stats_.cached_bytes += cls;
  stats_.cached_blocks += 1;
  // what is mapped did not change, but the bound may have (a release() since the block was taken): the oldest go
  while (!order_.empty() && !within_bound_locked(0)) evict_oldest_locked();
}

void BlockCache::evict_oldest_locked() {
  const auto [cls, block] = order_.front();
  pop_locked(by_class_.find(cls), false);  // the oldest of its class is the oldest overall
  stats_.cached_bytes -= cls;
  stats_.cached_blocks -= 1;
  stats_.unmaps += 1;
  munmap(block, cls);
}

std::size_t BlockCache::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t released = stats_.cached_bytes;
  while (!order_.empty()) evict_oldest_locked();
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
  return released;
}

BlockCacheStats BlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace roarfast
