#include "port.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

namespace kitfox::port {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_ms(int ms) {
  if constexpr (kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int cores() {
  if (!kThreads) return 1;
  unsigned n = std::thread::hardware_concurrency();
#ifdef __linux__
  // The CPUs this process may run on (taskset, a container's cpuset), as nproc counts them.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = (unsigned)CPU_COUNT(&set);
#endif
  return n ? (int)std::min(n, 64u) : 1;
}

struct Background::Impl {
  std::thread t;
};

Background::Background() : impl_(std::make_unique<Impl>()) {}
Background::~Background() { join(); }

void Background::start(std::function<void()> f) {
  if constexpr (kThreads) impl_->t = std::thread(std::move(f));
}

bool Background::running() const { return impl_->t.joinable(); }

void Background::join() {
  if (impl_->t.joinable()) impl_->t.join();
}

// The WASM build has no threads: its parts and loops run on the caller, and
// no thread code is linked into the module.
#if defined(__EMSCRIPTEN__)

void run_parts(unsigned parts, const std::function<void(unsigned)>& f) {
  for (unsigned p = 0; p < parts; p++) f(p);
}

struct Workers::Impl {};
Workers::Workers(int) {}
Workers::~Workers() = default;
void Workers::run_calls(uint32_t begin, uint32_t end, void (*call)(const void*, uint32_t), const void* ctx) {
  for (uint32_t i = begin; i < end; i++) call(ctx, i);
}

#else

void run_parts(unsigned parts, const std::function<void(unsigned)>& f) {
  std::vector<std::thread> ts;
  for (unsigned p = 1; p < parts; p++) ts.emplace_back([&f, p] { f(p); });
  if (parts) f(0);
  for (auto& t : ts) t.join();
}

#if defined(__linux__)
namespace {
struct IdleRun {
  const std::function<void()>* f;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

void* run_at_idle(void* p) {
  auto* run = static_cast<IdleRun*>(p);
  // Refused (a sandbox's filter), f runs at the caller's priority.
  sched_param none{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
  (*run->f)();
  std::lock_guard lk(run->mu);
  run->done = true;
  run->cv.notify_one();
  return nullptr;
}
}  // namespace

void run_idle(const std::function<void()>& f, int budget_ms, std::atomic<bool>* hurry) {
  IdleRun run{&f, {}, {}, false};
  if (budget_ms <= 0) hurry->store(true);
  pthread_t t;
  if (pthread_create(&t, nullptr, run_at_idle, &run) != 0) return f();
  {
    std::unique_lock lk(run.mu);
    if (!run.cv.wait_for(lk, std::chrono::milliseconds(budget_ms), [&] { return run.done; })) hurry->store(true);
  }
  pthread_join(t, nullptr);
}
#define KITFOX_IDLE_THREAD 1
#endif

namespace {

// True as soon as ready() holds, false after 2,000 yields (about a millisecond).
template <typename Ready>
bool poll(const Ready& ready) {
  for (int i = 0; i < 2000; i++) {
    if (ready()) return true;
    std::this_thread::yield();
  }
  return ready();
}

}  // namespace

struct Workers::Impl {
  std::vector<std::thread> ts;
  std::mutex mu;
  std::condition_variable cv, done;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> gen{0};
  std::atomic<int> active{0};
  std::atomic<uint32_t> next{0};
  uint32_t end = 0;
  const void* ctx = nullptr;
  void (*call)(const void*, uint32_t) = nullptr;

  void work() {
    for (uint32_t i; (i = next.fetch_add(1)) < end;) call(ctx, i);
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      poll([&] { return gen.load() != seen || stop.load(); });
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return stop || gen != seen; });
        if (stop) return;
        seen = gen;
      }
      work();
      if (active.fetch_sub(1) == 1) {
        std::lock_guard lk(mu);
        done.notify_one();
      }
    }
  }
};

Workers::Workers(int threads) {
  if (threads <= 1) return;
  impl_ = std::make_unique<Impl>();
  for (int t = 1; t < threads; t++) impl_->ts.emplace_back([this] { impl_->loop(); });
}

Workers::~Workers() {
  if (!impl_) return;
  {
    std::lock_guard lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->ts) t.join();
}

void Workers::run_calls(uint32_t begin, uint32_t end, void (*call)(const void*, uint32_t), const void* ctx) {
  Impl& w = *impl_;
  {
    std::lock_guard lk(w.mu);
    w.next = begin;
    w.end = end;
    w.ctx = ctx;
    w.call = call;
    w.active = (int)w.ts.size();
    w.gen++;
  }
  w.cv.notify_all();
  w.work();
  if (poll([&] { return w.active.load() == 0; })) return;
  std::unique_lock lk(w.mu);
  w.done.wait(lk, [&] { return w.active.load() == 0; });
}

#endif

#ifndef KITFOX_IDLE_THREAD
// No idle class (or no threads): f runs on the caller, told to hurry only
// for a budget of 0.
void run_idle(const std::function<void()>& f, int budget_ms, std::atomic<bool>* hurry) {
  if (budget_ms <= 0) hurry->store(true);
  f();
}
#endif

}  // namespace kitfox::port
