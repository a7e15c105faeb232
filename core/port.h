// The port layer: what the engine needs from the platform beside files
// (file.h): a clock, background threads, workers that share a loop, how many
// cores to build on, and loads started ahead (prefetch).
// Natively there are threads; the WebAssembly build has one, so its
// background work does not start (a host calls warm() and sync()
// instead), and nothing in the engine's logic asks which build it is in.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace kitfox::port {

#if defined(__EMSCRIPTEN__)
inline constexpr bool kThreads = false;
// WASM has no prefetch instruction: plain loads whose values nothing waits
// for start the same cache misses side by side, so more bytes are worth it.
inline constexpr bool kPrefetch = false;
inline constexpr size_t kPrefetchAhead = 1024;
#else
inline constexpr bool kThreads = true;
inline constexpr bool kPrefetch = true;
inline constexpr size_t kPrefetchAhead = 256;
#endif

// Starts loading `bytes` from p (one access a 64-byte line) that the caller
// reads soon, so that several misses overlap. Returns what the loads read
// where there is no prefetch (0 natively): the caller adds it to a sum it
// keeps, so that the loads are not optimised away.
inline uint32_t prefetch(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  uint32_t touched = 0;
  for (size_t o = 0; o < bytes; o += 64) {
    if constexpr (kPrefetch) __builtin_prefetch(c + o);
    else touched += (uint8_t)c[o];
  }
  return touched;
}

// A moment's pause inside a spin wait (the CPU's hint that it spins).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Milliseconds of a steady clock.
int64_t now_ms();

// Sleeps this thread for about ms milliseconds (without threads nothing
// could change meanwhile: it returns at once).
void sleep_ms(int ms);

// Threads a parallel build may use: the cores this process may run on (at
// most 64), 1 without threads.
int cores();

// A thread beside the engine's callers. start() runs `f` on it (without
// threads it runs nothing); join() waits for it to end.
class Background {
 public:
  Background();
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  void start(std::function<void()> f);
  bool running() const;
  void join();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs f(0) ... f(parts - 1) at once: the first on the caller, each other on
// a thread of its own; without threads one after another on the caller.
void run_parts(unsigned parts, const std::function<void(unsigned)>& f);

// Runs f and returns when it has, on CPU time nothing else wants: natively
// on Linux on a thread of its own in the scheduler's lowest class
// (SCHED_IDLE: a thread that becomes runnable takes its CPU at once);
// elsewhere, or when no thread can start, on the caller. Such a thread gets
// almost no CPU while others keep every core busy, and cannot be raised
// again, so f must look at *hurry often: it is set once f has run for
// `budget_ms` (at once for 0), for f to return at its next look and its
// caller to do the rest. For background work that takes no lock another
// thread waits for: one held by a thread that gets no CPU holds up its
// waiters (a write into a file's pages may hold a file system's journal a
// moment, to change the file's time).
void run_idle(const std::function<void()>& f, int budget_ms, std::atomic<bool>* hurry);

// Threads kept for many short loops (an HNSW build's phases): run(b, e, f)
// calls f(i) for every i in [b, e), the caller and the workers taking the
// next i as they finish, and returns when every call has. Between loops
// they first poll for a while (yielding the CPU, so that threads sharing
// one still progress), then sleep: a phase follows the last within
// microseconds, much sooner than a sleeping thread wakes on a VM. Without
// threads (or with one) the caller makes every call.
class Workers {
 public:
  explicit Workers(int threads);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  template <typename F>
  void run(uint32_t begin, uint32_t end, const F& f) {
    if (!impl_ || end - begin <= 1) {
      for (uint32_t i = begin; i < end; i++) f(i);
      return;
    }
    run_calls(begin, end, [](const void* c, uint32_t i) { (*static_cast<const F*>(c))(i); }, &f);
  }

 private:
  void run_calls(uint32_t begin, uint32_t end, void (*call)(const void*, uint32_t), const void* ctx);
  struct Impl;
  std::unique_ptr<Impl> impl_;  // none without worker threads
};

}  // namespace kitfox::port
