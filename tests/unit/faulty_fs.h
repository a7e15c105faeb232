// A file system that wraps another to count flushes and inject failures
// (a failed write or flush, a slow or held flush), for the unit tests.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

#include "file.h"

namespace kitfox::testing {

// Whether the calling thread runs in the scheduler's idle class (Linux's
// SCHED_IDLE; never elsewhere).
inline bool in_idle_class() {
#ifdef __linux__
  return sched_getscheduler(0) == SCHED_IDLE;
#else
  return false;
#endif
}

// Whether a thread may put itself in the idle class here (Linux, unless a
// sandbox's filter refuses it): asked on a thread of its own.
inline bool idle_class_allowed() {
#ifdef __linux__
  bool ok = false;
  std::thread t([&] {
    sched_param none{};
    ok = pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) == 0;
  });
  t.join();
  return ok;
#else
  return false;
#endif
}

// Wraps a file system to count flushes and inject failures.
struct Faults {
  std::atomic<int> syncs{0};
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> fail_write{false};
  std::atomic<bool> fail_after_rename{false};
  std::atomic<bool> lose_side_writes{false};  // writes to a side file (NAME~~) answer ok and write nothing (a host out of room)  // replace() renames, then fails (as a directory flush that failed)
  std::atomic<int> sync_delay_us{0};  // a slow disk, so flushes can be shared
  std::atomic<bool> fills_ahead{false};  // what File::fills_ahead() answers
  std::atomic<bool> map_files{false};    // File::map() passed on (else no file is mapped)
  std::function<void()> on_read;         // called before each read, when set (set it before the reads)

  // A flush can be held until released; writes and flushes are announced,
  // so a test waits for them (not for time).
  std::mutex m;
  std::condition_variable cv;
  bool held = false;
  int writes = 0;
  // Files written since their last flush, by name; a replace() whose source
  // was not flushed whole (a crash after it could lose what it holds).
  std::map<std::string, bool> dirty;
  int unflushed_replaces = 0;
  // File::write_behind calls: file, offset, bytes, made in the idle class.
  std::vector<std::tuple<std::string, uint64_t, uint64_t, bool>> behind;
  // truncate() calls: the name the file was opened by, the size asked for.
  std::vector<std::pair<std::string, uint64_t>> truncates;
  // write() calls, flushes and replace() calls made in the idle class.
  int idle_writes = 0, idle_syncs = 0, idle_replaces = 0;
  void hold(bool on) {
    std::lock_guard g(m);
    held = on;
    cv.notify_all();
  }
  // Waits until `done()` holds (checked at every write and flush): the
  // bound only ends a test that would hang, with a clear failure.
  template <typename F>
  bool wait_for(F done) {
    std::unique_lock lk(m);
    return cv.wait_for(lk, std::chrono::minutes(5), done);
  }
};

// Waits until `done()` holds for a state no file operation announces: it
// is asked again each time this thread yields its core; the bound as in
// Faults::wait_for.
template <typename F>
bool eventually(F done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

class FaultyFile : public File {
 public:
  FaultyFile(std::unique_ptr<File> f, Faults* x, std::string name) : f_(std::move(f)), x_(x), name_(std::move(name)) {}
  Status read(uint64_t o, void* b, size_t n, size_t* got) override {
    if (x_->on_read) x_->on_read();
    return f_->read(o, b, n, got);
  }
  std::unique_ptr<Mapping> map(uint64_t size) override { return x_->map_files ? f_->map(size) : nullptr; }
  bool fills_ahead() const override { return x_->fills_ahead; }
  void write_behind(uint64_t o, uint64_t n) override {
    {
      std::lock_guard g(x_->m);
      x_->behind.emplace_back(name_, o, n, in_idle_class());
    }
    f_->write_behind(o, n);
  }
  Status write(uint64_t o, const void* b, size_t n) override {
    if (x_->fail_write) return Status(Code::Io, "injected write failure");
    if (x_->lose_side_writes && name_.size() > 1 && name_.back() == '~') return Status::ok();  // said done, not done
    Status st = f_->write(o, b, n);
    std::lock_guard g(x_->m);
    x_->writes++;
    if (in_idle_class()) x_->idle_writes++;
    x_->dirty[name_] = true;
    x_->cv.notify_all();
    return st;
  }
  Status sync() override {
    {
      std::unique_lock lk(x_->m);
      x_->syncs++;
      if (in_idle_class()) x_->idle_syncs++;
      x_->cv.notify_all();
      x_->cv.wait(lk, [&] { return !x_->held; });
      x_->dirty[name_] = false;  // what was written before this flush (a write from now on marks it again)
    }
    if (x_->sync_delay_us) std::this_thread::sleep_for(std::chrono::microseconds(x_->sync_delay_us));
    if (x_->fail_sync) return Status(Code::Io, "injected flush failure");
    return f_->sync();
  }
  Result<uint64_t> size() override { return f_->size(); }
  Status truncate(uint64_t n) override {
    {
      std::lock_guard g(x_->m);
      x_->dirty[name_] = true;
      x_->truncates.emplace_back(name_, n);
    }
    return f_->truncate(n);
  }

 private:
  std::unique_ptr<File> f_;
  Faults* x_;
  std::string name_;
};

class FaultyFs : public FileSystem {
 public:
  FaultyFs(FileSystem& inner, Faults* x) : in_(inner), x_(x) {}
  Result<std::unique_ptr<File>> open(const std::string& n, OpenFlags f) override {
    KF_ASSIGN(auto file, in_.open(n, f));
    return std::unique_ptr<File>(new FaultyFile(std::move(file), x_, n));
  }
  Result<bool> exists(const std::string& n) override { return in_.exists(n); }
  Status remove(const std::string& n) override { return in_.remove(n); }
  Status replace(const std::string& a, const std::string& b) override {
    {
      std::lock_guard g(x_->m);
      if (x_->dirty[a]) x_->unflushed_replaces++;
      if (in_idle_class()) x_->idle_replaces++;
      x_->dirty[b] = x_->dirty[a];
      x_->dirty.erase(a);
    }
    KF_TRY(in_.replace(a, b));
    if (x_->fail_after_rename) return Status(Code::Io, "fsync directory: Input/output error (injected)");
    return Status::ok();
  }
  bool atomic_replace() const override { return true; }

 private:
  FileSystem& in_;
  Faults* x_;
};

}  // namespace kitfox::testing
