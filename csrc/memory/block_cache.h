// A cache of large memory blocks, each mapped on its own and kept mapped for reuse when freed.
//
// Why: with glibc tuned to keep freed memory (roarfast/common/memory.py), a CPU extraction's large blocks
// (a 224-px batch's canvases, activations and gradients: tens of MiB each) come from the one heap, between
// small blocks. A hole is reused only where a block fits, so over hundreds of batches the heap's span grows
// and every hole in it stays resident: the process's peak crept with the images it extracted. Here every
// large block has a mapping of its own, so freeing one leaves no hole; a freed block waits in the cache and the
// next block of its size class takes it with its pages still faulted in (mapping afresh every time would
// zero-fill each page again: the cost glibc's untuned mmap path pays, 1.2x an extraction's time).
//
// Reuse and bounds: a block's size class rounds it up by at most 1/8 (eight classes per power of two, whole
// pages). A request takes a cached block of its own class where there is one. Otherwise, while everything
// mapped (in use and cached) stays within kMappedPerPeak times the peak of the bytes in use since the last
// release(), it maps a new block and leaves the cache to the classes that will ask again; beyond that it takes the
// cached block nearest its size and resizes it (mremap: a smaller one grows by the missing pages only, a larger one
// gives its tail back). So what is mapped follows the work's own peak, as a heap's span would, whatever the number
// of batches, and a work whose shapes vary within a batch (an IG pass at 32 px) holds about what the heap held.
// Freed blocks stay cached up to that same bound, the oldest going first.
//
// Pure C++ (mmap), so the unit tests (tests/csrc/test_block_cache.cpp) exercise it without torch; the CPU
// allocator that routes torch's large blocks here is cpu_allocator.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace roarfast {

struct BlockCacheStats {
  std::size_t in_use_bytes = 0;   // bytes of the blocks handed out and not yet given back (their classes)
  std::size_t peak_in_use_bytes = 0;  // the peak of in_use_bytes since the last release()
  std::size_t cached_bytes = 0;   // bytes of the blocks given back and kept mapped
  std::size_t cached_blocks = 0;
  std::uint64_t hits = 0;         // takes served from the cache
  std::uint64_t maps = 0;         // takes that mapped a new block
  std::uint64_t resizes = 0;      // takes that resized a cached block of another class
  std::uint64_t unmaps = 0;       // cached blocks unmapped (the oldest past the bound, or by release())
};

class BlockCache {
 public:
  // everything mapped (in use and cached) stays within this times the peak in use, where the cache can give way
  static constexpr double kMappedPerPeak = 1.5;

  // The bytes a request of `bytes` occupies: at least `bytes`, whole pages, and at most 1/8 more than `bytes`
  // beyond the page (size classes of eight steps per power of two).
  static std::size_t size_class(std::size_t bytes);

  BlockCache() = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache();  // unmaps the cached blocks (blocks still handed out stay mapped: their owners free them)

  // A block of at least `bytes` (> 0), page-aligned; nullptr when the system has no memory for it.
  void* take(std::size_t bytes);
  // Gives back a block that take(bytes) returned, with the same `bytes`.
  void give(void* block, std::size_t bytes);
  // Unmaps every cached block and restarts the peak from the bytes now in use; returns the bytes unmapped.
  std::size_t release();
  BlockCacheStats stats() const;
  // Held across a fork() (pthread_atfork in cpu_allocator.cpp): a child then never starts with the lock taken
  // by a thread that does not exist in it.
  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  using Entry = std::pair<std::size_t, void*>;  // (size class, block), in the order they were given back
  void* pop_locked(std::map<std::size_t, std::vector<std::list<Entry>::iterator>>::iterator cls, bool newest);
  void evict_oldest_locked();
  bool within_bound_locked(std::size_t more) const;

  mutable std::mutex mutex_;
  std::list<Entry> order_;  // oldest first
  std::map<std::size_t, std::vector<std::list<Entry>::iterator>> by_class_;  // by size; in each, newest last
  BlockCacheStats stats_;
};

}  // namespace roarfast
