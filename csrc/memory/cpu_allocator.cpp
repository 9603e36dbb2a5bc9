// torch's CPU allocator, replaced once per process (roarfast/common/memory.py asks) by one that serves blocks of
// at least `min_bytes` from the block cache (block_cache.h) and the others from the C library as before.
//
// Every block carries a 64-byte header in front of the pointer torch gets: which of the two it came from and its
// size. One deleter thus frees both kinds without a lookup, which torch needs: raw_deleter() promises one deleter
// for everything allocate() returns (oneDNN's scratch memory is freed through it). The pointer stays 64-byte
// aligned, as torch's own allocator gives.
//
// Operators (namespace roarfast_memory, apart from the kernels: `roarfast doctor` lists those):
//   install_cpu_block_cache(int min_bytes) -> bool   (true when torch's CPU allocator is now this one)
//   cpu_block_cache_stats() -> int[]                  (named in order by memory.py's BLOCK_CACHE_STATS)
//   release_cpu_block_cache() -> int                  (bytes unmapped)
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "memory/block_cache.h"

namespace roarfast {

namespace {

constexpr std::uint64_t kMagic = 0x726f617266617374ULL;  // "roarfast": a header this allocator wrote
constexpr std::uint64_t kFromCache = 1, kFromLibc = 0;

struct alignas(64) Header {
  std::uint64_t magic;
  std::uint64_t from;
  std::uint64_t bytes;  // what torch asked for, without the header
};
static_assert(sizeof(Header) == 64, "the header keeps the data 64-byte aligned");

BlockCache& block_cache() {
  static auto* cache = [] {
    auto* made = new BlockCache();  // never destroyed: tensors may be freed during interpreter exit
    // a DataLoader's workers are forked: the fork waits for the cache's lock, and both sides let it go
    pthread_atfork([] { block_cache().lock(); }, [] { block_cache().unlock(); }, [] { block_cache().unlock(); });
    return made;
  }();
  return *cache;
}

void free_block(void* data) {
  if (data == nullptr) return;
  auto* header = static_cast<Header*>(data) - 1;
  if (header->magic != kMagic) {
    // a block this allocator did not make: freeing it either way would corrupt the heap
    std::fprintf(stderr, "roarfast: the CPU allocator was asked to free %p, which it did not allocate\n", data);
    std::abort();
  }
  header->magic = 0;
  if (header->from == kFromCache) {
    block_cache().give(header, header->bytes + sizeof(Header));
  } else {
    std::free(header);
  }
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t bytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (bytes == 0) return {nullptr, nullptr, &free_block, cpu};
    const bool large = bytes >= min_bytes.load(std::memory_order_relaxed);
    void* raw = nullptr;
    if (large) {
      raw = block_cache().take(bytes + sizeof(Header));
    } else if (posix_memalign(&raw, alignof(Header), bytes + sizeof(Header)) != 0) {
      raw = nullptr;
    }
    TORCH_CHECK_WITH(OutOfMemoryError, raw != nullptr, "CPU allocator (roarfast): not enough memory for ", bytes,
                     " bytes");
    auto* header = new (raw) Header{kMagic, large ? kFromCache : kFromLibc, bytes};
    void* data = header + 1;
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(data, static_cast<std::int64_t>(bytes), 0, 0, cpu);
    }
    return {data, data, &free_block, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  std::atomic<std::size_t> min_bytes{SIZE_MAX};
};

CachingCpuAllocator& allocator() {
  static auto* instance = new CachingCpuAllocator();  // never destroyed: it frees blocks until the process ends
  return *instance;
}

bool install_cpu_block_cache(std::int64_t min_bytes) {
  TORCH_CHECK(min_bytes > 0, "min_bytes should be positive, got ", min_bytes);
  allocator().min_bytes.store(static_cast<std::size_t>(min_bytes), std::memory_order_relaxed);
  if (c10::GetCPUAllocator() != &allocator()) c10::SetCPUAllocator(&allocator());
  // another allocator registered at a higher priority keeps its place: say so rather than pretend
  return c10::GetCPUAllocator() == &allocator();
}

std::vector<std::int64_t> cpu_block_cache_stats() {
  const bool installed = c10::GetCPUAllocator() == &allocator();
  const BlockCacheStats s = block_cache().stats();
  const std::size_t min_bytes = installed ? allocator().min_bytes.load(std::memory_order_relaxed) : 0;
  // the order roarfast/common/memory.py names them in (BLOCK_CACHE_STATS)
  return {installed,
          static_cast<std::int64_t>(min_bytes),
          static_cast<std::int64_t>(s.in_use_bytes),
          static_cast<std::int64_t>(s.peak_in_use_bytes),
          static_cast<std::int64_t>(s.cached_bytes),
          static_cast<std::int64_t>(s.cached_blocks),
          static_cast<std::int64_t>(s.hits),
          static_cast<std::int64_t>(s.maps),
          static_cast<std::int64_t>(s.resizes),
          static_cast<std::int64_t>(s.unmaps)};
}

std::int64_t release_cpu_block_cache() { return static_cast<std::int64_t>(block_cache().release()); }

}  // namespace

}  // namespace roarfast

TORCH_LIBRARY(roarfast_memory, m) {
  m.def("install_cpu_block_cache(int min_bytes) -> bool", &roarfast::install_cpu_block_cache);
  m.def("cpu_block_cache_stats() -> int[]", &roarfast::cpu_block_cache_stats);
  m.def("release_cpu_block_cache() -> int", &roarfast::release_cpu_block_cache);
}
