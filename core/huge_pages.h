// Huge pages for big arrays read at random: the vector table and the HNSW
// lists. With 4 KiB pages nearly every vector a search reads is also a TLB
// miss; where Linux offers transparent huge pages on request (madvise mode),
// asking for them makes searches over memory we own 10-20% faster. A
// no-op elsewhere, and for memory we do not own (a mapped file).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#define KITFOX_MREMAP 1
#endif

namespace kitfox {

constexpr size_t kHugePage = size_t{2} << 20;  // a transparent huge page on x86-64 and arm64

// x rounded up to a multiple of kHugePage.
constexpr uintptr_t huge_round_up(uintptr_t x) { return (x + kHugePage - 1) & ~(uintptr_t)(kHugePage - 1); }

inline void advise_huge_pages(const void* p, size_t n) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__) && defined(MADV_HUGEPAGE)
  if (n < 2 * kHugePage) return;
  uintptr_t a = huge_round_up((uintptr_t)p);
  uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(kHugePage - 1);
  if (b > a) madvise((void*)a, b - a, MADV_HUGEPAGE);  // advice: failure changes nothing
#else
  (void)p;
  (void)n;
#endif
}

// Whether huge_block takes memory with huge pages (Linux, natively): only
// then is it worth taking memory ahead in pieces.
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
inline constexpr bool kHugeBlocks = true;
#else
inline constexpr bool kHugeBlocks = false;
#endif

// Memory for arrays about to be written whole (the blocks of an id index),
// freed when the last shared_ptr to it goes. On
// Linux a mapping of its own, with huge pages asked for: its first writes
// then take a fault each 2 MiB, not each 4 KiB page (16 MiB written in
// 0.5 ms instead of 6.5 ms on the benchmark machine; the kernel may compact
// memory inside one of those faults: with defrag on request, a stall of as
// long as that takes). Elsewhere the heap. Empty when the memory could not
// be had.
inline std::shared_ptr<char> huge_block(size_t bytes) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
  if (bytes == 0 || bytes > SIZE_MAX / 4) return {};
  const size_t whole = huge_round_up(bytes);
  const size_t span = whole + kHugePage;  // room to start on a huge page's boundary
  // No reserve: memory asked for ahead (IdBlocks::expect) is only taken
  // where it is written, whatever the overcommit setting.
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return {};
  char* p = reinterpret_cast<char*>(huge_round_up((uintptr_t)m));
#ifdef MADV_HUGEPAGE
  madvise(p, whole, MADV_HUGEPAGE);  // advice: failure changes nothing
#endif
  return std::shared_ptr<char>(p, [m, span](char*) { munmap(m, span); });
#else
  return std::shared_ptr<char>(new (std::nothrow) char[bytes], std::default_delete<char[]>());
#endif
}

// A byte array that grows at its end (the part of a vector table written
// since the last checkpoint). On Linux it is a mapping of its own, grown with
// mremap: growing copies nothing and touches no page, so every page is
// written once, when its bytes are stored (a std::vector that doubles zeroes
// each byte and then copies it at every doubling). Bytes added by resize()
// are not initialised: the caller writes them.
class GrowBuffer {
 public:
  GrowBuffer() = default;
  // `first_at`: an address hint for the first mapping (tests place it where
  // the mapping can grow in place).
  // `huge`: ask for huge pages once it passes 4 MiB (read at random, as a
  // vector table is); the kernel may then compact memory inside the write
  // that touches a new page, milliseconds at worst.
#ifdef KITFOX_MREMAP
  explicit GrowBuffer(void* first_at, bool huge = true) : hint_(first_at), huge_(huge) {}
#else
  explicit GrowBuffer(void*, bool = true) {}
#endif
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;
  GrowBuffer(GrowBuffer&& o) noexcept { swap(o); }
  GrowBuffer& operator=(GrowBuffer&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  ~GrowBuffer() { release(); }
  void swap(GrowBuffer& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
#ifdef KITFOX_MREMAP
    std::swap(hint_, o.hint_);
    std::swap(huge_, o.huge_);
#else
    v_.swap(o.v_);
#endif
  }

  char* data() { return p_; }
  const char* data() const { return p_; }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }

  void resize(size_t n) {
    if (n > cap_) grow(std::max(n, cap_ * 2));
    n_ = n;
  }
  // Room for n bytes, the size unchanged.
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  // Frees the memory (size 0).
  void release() {
#ifdef KITFOX_MREMAP
    if (p_) munmap(p_, cap_);
#else
    std::vector<char>().swap(v_);
#endif
    p_ = nullptr;
    n_ = cap_ = 0;
  }

 private:
  void grow(size_t want) {
#ifdef KITFOX_MREMAP
    constexpr size_t kGrain = 64 << 10;
    size_t cap = (want + kGrain - 1) / kGrain * kGrain;
    void* p = p_ ? mremap(p_, cap_, cap, MREMAP_MAYMOVE) : MAP_FAILED;
    if (p == MAP_FAILED) {
      // The first mapping, or (should mremap refuse) a new one and a copy.
      p = mmap(p_ ? nullptr : hint_, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) std::abort();  // out of memory, as a std::vector would
      if (p_) {
        memcpy(p, p_, n_);
        munmap(p_, cap_);
      }
    }
    p_ = static_cast<char*>(p);
    cap_ = cap;
#ifdef MADV_HUGEPAGE
    // Advice for the whole mapping, never part of it: advising only its
    // 2 MiB-aligned middle would split it into several mappings, and mremap
    // cannot grow a range that spans more than one (it fails with EFAULT).
    if (huge_ && cap_ >= 2 * kHugePage) madvise(p_, cap_, MADV_HUGEPAGE);
#endif
#else
    v_.resize(want);
    p_ = v_.data();
    cap_ = want;
#endif
  }
  char* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
#ifdef KITFOX_MREMAP
  void* hint_ = nullptr;
  bool huge_ = true;
#else
  std::vector<char> v_;
#endif
};

// An array of trivially copyable T that grows at its end on a GrowBuffer:
// growing copies nothing (mremap), so an append never copies the whole array
// (a vector index's per-node arrays, which a std::vector's doubling copied
// inside one write). On small pages unless
// made with HugePages{} (an array read at random by searches: a graph's
// lists), since on small pages a write that touches a new page never waits
// for the kernel to compact memory into a huge one. The few members its
// users need; resize(n) leaves new elements uninitialised.
struct HugePages {};

template <typename T>
class GrowArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  GrowArray() : b_(nullptr, false) {}
  explicit GrowArray(HugePages) : b_(nullptr, true) {}
  explicit GrowArray(size_t n) : GrowArray() { resize(n); }
  // A moved-from array is empty, on small pages; the pages' kind moves with the data.
  GrowArray(GrowArray&& o) noexcept : GrowArray() { b_.swap(o.b_); }
  GrowArray& operator=(GrowArray&& o) noexcept {
    GrowArray t(std::move(o));
    b_.swap(t.b_);
    return *this;
  }
  void swap(GrowArray& o) noexcept { b_.swap(o.b_); }

  size_t size() const { return b_.size() / sizeof(T); }
  bool empty() const { return b_.size() == 0; }
  size_t capacity() const { return b_.capacity() / sizeof(T); }
  T* data() { return reinterpret_cast<T*>(b_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(b_.data()); }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size() - 1]; }
  const T& back() const { return data()[size() - 1]; }

  void resize(size_t n) { b_.resize(n * sizeof(T)); }
  void resize(size_t n, const T& fill) {
    size_t old = size();
    resize(n);
    for (size_t i = old; i < n; i++) data()[i] = fill;
  }
  void release() { b_.release(); }  // the memory given back (size 0)
  void reserve(size_t n) { b_.reserve(n * sizeof(T)); }
  void clear() { b_.resize(0); }  // keeps the mapping
  void push_back(const T& v) {
    size_t n = size();
    resize(n + 1);
    data()[n] = v;
  }
  void pop_back() { resize(size() - 1); }
  void assign(const T* first, const T* last) {
    resize((size_t)(last - first));
    if (last != first) memcpy(data(), first, (size_t)(last - first) * sizeof(T));
  }

 private:
  GrowBuffer b_;
};

}  // namespace kitfox
