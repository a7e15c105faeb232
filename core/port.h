// The port layer: what the engine needs from the platform beside files
// (file.h): a clock, background threads and how many cores to build on.
// Natively there are threads; the WebAssembly build has one, so its
// background work does not start (a host calls warm() and sync()
// instead), and nothing in the engine's logic asks which build it is in.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace kitfox::port {

#if defined(__EMSCRIPTEN__)
inline constexpr bool kThreads = false;
#else
inline constexpr bool kThreads = true;
#endif

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

// Threads a parallel build may use: the cores (at most 64), 1 without threads.
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

}  // namespace kitfox::port
