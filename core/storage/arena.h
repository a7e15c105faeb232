// The arena: where the documents' encoded bytes live (see engine.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../codec.h"
#include "../file.h"

namespace kitfox {

// Where documents live: segment 0 is the file as read on open (or the image a
// checkpoint wrote), later segments take new writes. A location is
// segment << 40 | offset and points at `zigzag id | varint len | body`.
class Arena {
 public:
  static uint64_t loc(uint32_t seg, uint64_t off) { return (uint64_t)seg << 40 | off; }
  void reset(std::string seg0);
  void reset(std::unique_ptr<Mapping> seg0);
  // Appends bytes that never move; returns their location.
  uint64_t append(std::string_view bytes, const char** where);
  // Later appends go to new segments; returns how many segments there are
  // (those before it hold only what was appended so far: a checkpoint's pin).
  uint32_t seal();
  // Adds a segment holding `bytes` (a checkpoint's new image, when writes
  // landed after its pin); returns its number.
  uint32_t add(std::string bytes);
  // Frees the segments before `n` (a view still holding one keeps it).
  void drop_before(uint32_t n);
  // Inline: a scan calls it for every document.
  std::string_view body(uint64_t loc) const {
    const Seg& s = *segs_[loc >> 40];
    return body_in(s.data, s.size, loc);
  }
  // Starts loading the bytes about `loc`, a guess (IdIndex::likely_loc): one
  // inside no segment, or where no document starts, loads nothing or is
  // wasted. Natively only (where a load can be started without waiting).
  void prefetch(uint64_t loc) const;
  std::string_view segment(uint32_t i) const { return {segs_[i]->data, segs_[i]->size}; }
  // Whether the file a reset() was given mapped (Mapping::of_file) is still
  // mapped: by a segment, or by a view holding one (any thread may ask).
  bool maps_a_file() const { return !mapped_.expired(); }
  size_t memory_bytes() const;

 private:
  struct Seg {
    std::string str;               // owned bytes (never reallocated once written to)
    std::unique_ptr<Mapping> map;  // or a mapped file
    const char* data = nullptr;
    size_t size = 0;
  };

 public:
  // The segments as they are now, for a read that runs without the lock (a
  // pinned read): writes append beyond what it holds (bytes never move),
  // and a checkpoint's reset frees no segment it still holds.
  class View {
   public:
    std::string_view body(uint64_t loc) const {
      const std::string_view s = at_[loc >> 40];
      return body_in(s.data(), s.size(), loc);
    }
    // The whole entry at `loc` (`zigzag id | varint len | body`), its id in *id.
    std::string_view entry(uint64_t loc, int64_t* id) const;

   private:
    friend class Arena;
    std::vector<std::shared_ptr<const Seg>> keep_;
    std::vector<std::string_view> at_;  // each segment's bytes at the view
  };
  View view() const;

 private:
  // The entry at `loc` in a segment's bytes: its body, its id in *id, and
  // the whole entry in *entry (empty where it is cut short).
  static std::string_view body_in(const char* data, size_t size, uint64_t loc, int64_t* id = nullptr,
                                  std::string_view* entry = nullptr) {
    const uint64_t off = loc & ((1ull << 40) - 1);
    Reader r(data + off, size - off);
    if (id) {
      *id = unzigzag(r.varint());
    } else {
      r.skip_varint();  // the caller knows the id
    }
    std::string_view b = r.str();
    if (entry)
      *entry = r.ok() ? std::string_view(data + off, (size_t)(b.data() + b.size() - (data + off))) : std::string_view();
    return b;
  }
  std::vector<std::shared_ptr<Seg>> segs_;
  std::weak_ptr<const Seg> mapped_;  // the segment of a mapped file
  uint32_t open_from_ = 1;  // appends go to segments from this one on
};

}  // namespace kitfox
