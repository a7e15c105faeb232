// SlotPool: the room of a SteadyMap's entries (steady_map.h).
#include "steady_map.h"

#include <algorithm>

namespace kitfox {

void* SlotPool::take() {
  if (free_) {
    Free* f = free_;
    free_ = f->next;
    return f;
  }
  if (used_ == cap_) {  // the pool's state changed only once the chunk is there
    // Up to 4,096 slots a chunk, and 256 KiB (large slots: a map's one
    // 4 KiB entry does not take a chunk of 16 MiB).
    const size_t most = std::clamp<size_t>((256 << 10) / size_, 1, 4096);
    const size_t cap = std::min<size_t>(cap_ ? cap_ * 2 : 16, most);
    std::unique_ptr<std::max_align_t[]> chunk(
        new std::max_align_t[(cap * size_ + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
    chunks_.push_back(std::move(chunk));
    cap_ = cap;
    slots_ += cap;
    used_ = 0;
  }
  return reinterpret_cast<char*>(chunks_.back().get()) + used_++ * size_;
}

void SlotPool::give(void* p) { free_ = new (p) Free{free_}; }

void SlotPool::clear() {
  chunks_.clear();
  used_ = cap_ = slots_ = 0;
  free_ = nullptr;
}

void SlotPool::swap(SlotPool& o) noexcept {
  std::swap(size_, o.size_);
  chunks_.swap(o.chunks_);
  std::swap(used_, o.used_);
  std::swap(cap_, o.cap_);
  std::swap(slots_, o.slots_);
  std::swap(free_, o.free_);
}

}  // namespace kitfox
