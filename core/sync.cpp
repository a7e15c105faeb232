// Durability: flushes run outside the engine's lock and are shared by the
// writers waiting for them (group commit); in the period mode a background
// flusher makes them; a background checker reads the blocks of a mapped
// file's extents that no query touched yet.
#include "engine.h"

#include <chrono>

namespace kitfox {


Status Engine::sync_to(uint64_t seq) {
  std::unique_lock lk(sync_mu_);
  for (;;) {
    if (failed_) return Status(Code::Failed, failure_);
    if (synced_seq_ >= seq) return Status::ok();
    if (!syncing_) {
      // Lead a flush that covers every write so far; later writers share it.
      syncing_ = true;
      uint64_t target = written_seq_;
      lk.unlock();
      Status st = file_->sync();
      lk.lock();
      syncing_ = false;
      if (st.is_ok()) {
        synced_seq_ = std::max(synced_seq_, target);
        last_sync_ms_ = port::now_ms();
      } else {
        failure_ = "flushing the file failed (" + st.message() + ")";
        failed_ = true;  // never retried: what the OS dropped is unknown
      }
      sync_cv_.notify_all();
      if (!st.is_ok()) return Status(Code::Failed, failure_);
    } else {
      sync_cv_.wait(lk);
    }
  }
}

Status Engine::sync() {
  uint64_t target;
  {
    std::lock_guard g(sync_mu_);
    target = written_seq_;
  }
  return sync_to(target);
}

void Engine::checker_loop() {
  // Slices of 256 KiB: a writer waits for at most one.
  constexpr uint64_t kSlice = 256 << 10;
  while (!stop_checker_.load(std::memory_order_relaxed)) {
    std::shared_lock lk(mu_);
    uint64_t done = 0, left = 0;
    for_each_vindex([&](Collection&, uint32_t, HnswIndex& idx) {
      if (done < kSlice) done += idx.warm(kSlice - done);
      left += idx.unread_bytes();
    });
    if (!left) return;
  }
}

void Engine::stop_checker() {
  if (!checker_.running()) return;
  stop_checker_ = true;
  checker_.join();
}

void Engine::flusher_loop() {
  std::unique_lock lk(sync_mu_);
  while (!stop_flusher_) {
    sync_cv_.wait_for(lk, std::chrono::milliseconds(opts_.sync_period_ms ? opts_.sync_period_ms : 1));
    if (stop_flusher_ || failed_) continue;
    if (synced_seq_ < written_seq_ && !syncing_) {
      uint64_t target = written_seq_;
      lk.unlock();
      sync_to(target);
      lk.lock();
    }
  }
}

// An automatic checkpoint, once a write made one due and let the lock go:
// natively the checkpointer thread runs it (the write returns at once), in
// the WASM build this caller does.
void Engine::checkpoint_if_due() {
  if (!checkpoint_due_.load()) return;
  if (checkpointer_.running()) {
    { std::lock_guard g(ckpt_mu_); }  // the thread is waiting or will see the flag
    ckpt_cv_.notify_one();
    return;
  }
  checkpoint_due_ = false;
  auto_checkpoint();
}

// The writes are in the file; a failed automatic checkpoint leaves them
// there and says so in the open report's warnings.
void Engine::auto_checkpoint() {
  Status cs = checkpoint();
  if (!cs.is_ok() && !failed_) {
    std::unique_lock lk(mu_);
    report_.warnings.push_back("automatic checkpoint failed: " + cs.message());
  }
}

void Engine::checkpointer_loop() {
  std::unique_lock lk(ckpt_mu_);
  for (;;) {
    ckpt_cv_.wait(lk, [&] { return stop_checkpointer_ || checkpoint_due_.load(); });
    if (stop_checkpointer_) return;
    checkpoint_due_ = false;
    lk.unlock();
    auto_checkpoint();
    lk.lock();
  }
}

}  // namespace kitfox
