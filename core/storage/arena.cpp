#include "arena.h"

#include <algorithm>

#include "../codec.h"
#include "../port.h"

namespace kitfox {

namespace {
constexpr size_t kSegmentBytes = 1 << 20;  // a new segment's size (bigger writes get their own)
}  // namespace


void Arena::reset(std::string seg0) {
  segs_.clear();
  open_from_ = 1;
  auto s = std::make_shared<Seg>();
  s->str = std::move(seg0);
  s->data = s->str.data();
  s->size = s->str.size();
  segs_.push_back(std::move(s));
}

void Arena::reset(std::unique_ptr<Mapping> seg0) {
  segs_.clear();
  open_from_ = 1;
  auto s = std::make_shared<Seg>();
  s->data = seg0->data();
  s->size = seg0->size();
  s->map = std::move(seg0);
  if (s->map->of_file()) mapped_ = s;
  segs_.push_back(std::move(s));
}

uint64_t Arena::append(std::string_view bytes, const char** where) {
  Seg* cur = segs_.size() > open_from_ ? segs_.back().get() : nullptr;
  if (!cur || cur->str.capacity() - cur->str.size() < bytes.size()) {
    segs_.push_back(std::make_shared<Seg>());
    cur = segs_.back().get();
    cur->str.reserve(std::max(kSegmentBytes, bytes.size()));
  }
  uint64_t off = cur->str.size();
  cur->str.append(bytes);  // within capacity: never moves
  cur->data = cur->str.data();
  cur->size = cur->str.size();
  *where = cur->data + off;
  return loc((uint32_t)(segs_.size() - 1), off);
}

uint32_t Arena::seal() {
  open_from_ = (uint32_t)segs_.size();
  return open_from_;
}

uint32_t Arena::add(std::string bytes) {
  auto s = std::make_shared<Seg>();
  s->str = std::move(bytes);
  s->data = s->str.data();
  s->size = s->str.size();
  segs_.push_back(std::move(s));
  open_from_ = (uint32_t)segs_.size();  // never appended to: its spare capacity is not the image
  return open_from_ - 1;
}

void Arena::drop_before(uint32_t n) {
  auto none = std::make_shared<Seg>();
  for (uint32_t i = 0; i < n && i < segs_.size(); i++) segs_[i] = none;
}

void Arena::prefetch(uint64_t l) const {
  if constexpr (port::kPrefetch) {
    if ((l >> 40) >= segs_.size()) return;
    const Seg& s = *segs_[l >> 40];
    uint64_t off = l & ((1ull << 40) - 1);
    // The guess is within a few dozen bytes when documents were written in
    // id order: the lines 32 bytes before and after it.
    off = off < 32 ? 0 : off - 32;
    if (off >= s.size) return;
    port::prefetch(s.data + off, std::min<uint64_t>(128, s.size - off));
  }
}

Arena::View Arena::view() const {
  View v;
  v.keep_.assign(segs_.begin(), segs_.end());
  v.at_.reserve(segs_.size());
  for (auto& s : segs_) v.at_.emplace_back(s->data, s->size);
  return v;
}

std::string_view Arena::View::entry(uint64_t l, int64_t* id) const {
  std::string_view s = at_[l >> 40], e;
  body_in(s.data(), s.size(), l, id, &e);
  return e;
}

size_t Arena::memory_bytes() const {
  size_t n = 0;
  for (auto& s : segs_)
    if (s->data) n += s->map ? s->size : s->str.capacity();  // mapped pages count as held
  return n;
}

}  // namespace kitfox
