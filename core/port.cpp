#include "port.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace kitfox::port {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int cores() {
  if (!kThreads) return 1;
  unsigned n = std::thread::hardware_concurrency();
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

}  // namespace kitfox::port
