// Durability: writes land in groups, each group under one hold of the
// write lock, and flushes run outside the lock, shared by the writers
// waiting for them (group commit); in the period mode a background flusher
// makes them; a background checker reads the blocks of a mapped file's
// extents that no query touched yet.
#include "engine.h"

#include <chrono>


namespace kitfox {

// A writer queues its write and sleeps until it is landed and flushed, or
// until it is first in the queue and nobody leads: then it leads. A leader
// takes the writes queued (its own first), lands them one after another
// under one hold of the lock (each its own record, as if they had come one
// at a time), makes the flush they wait for, wakes them, and goes on with
// the writes queued meanwhile, for at most kRounds groups, stopping before
// another thread's long write (that thread leads it). One thread
// that already has a core takes the lock and flushes for many writers,
// and each of the others wakes once, when its write is durable: on a
// machine whose cores are busy, every hand-over from thread to thread
// first waits for a core.
Result<QueryResult> Engine::land(QueuedWrite& w) {
  std::unique_lock q(queue_mu_);
  (queue_tail_ ? queue_tail_->next : queue_head_) = &w;
  queue_tail_ = &w;
  queued_++;
  w.cv.wait(q, [&] { return w.done || (!leading_ && queue_head_ == &w); });
  if (w.done) return std::move(w.result);
  leading_ = true;
  Result<QueryResult> mine = Status(Code::Invalid, "not landed");
  QueuedWrite* group[kGroup];
  for (int round = 0; round < kRounds && queue_head_; round++) {
    // Another thread's long write (QueuedWrite::long_write) is landed by
    // that thread, which leads next: a short write's thread, a server's
    // event loop among them, never runs it.
    size_t n = 0;
    while (queue_head_ && n < kGroup && (queue_head_ == &w || !queue_head_->long_write)) {
      group[n++] = queue_head_;
      queue_head_ = queue_head_->next;
    }
    if (n == 0) break;
    if (!queue_head_) queue_tail_ = nullptr;
    queued_ -= n;
    q.unlock();
    uint64_t wait_seq = 0;
    {
      std::lock_guard gate(write_gate_);
      const uint64_t start = write_pos_;
      std::unique_lock lk(mu_);
      if (landing_hook) landing_hook();
      bool repaired = false;
      for (size_t i = 0; i < n; i++) {
        QueuedWrite& g = *group[i];
        // A damaged vector block found before this write (by a read, the
        // background check, or an earlier write): refused, nothing written.
        if (Status ce = check_extents(&repaired); !ce.is_ok()) {
          g.result = ce;
          continue;
        }
        g.result = land_one(g);
        // What it answered may rest on the writes before it (its own
        // record or an earlier one of the group): it waits for them all.
        // A deferred write waits after it returns (when_durable).
        if (g.result.is_ok()) {
          g.seq = seq_;
          if (!g.deferred) wait_seq = seq_;
        }
        // Damage this write's own work came upon: a write that landed is in
        // the log and answers so (an error would say nothing changed); the
        // statements after it are refused, by the check above.
        if (Status ce = check_extents(&repaired); !ce.is_ok() && !g.result.is_ok()) g.result = ce;
      }
      lk.unlock();
      fill_ahead(write_pos_ - start);  // beside the readers
    }
    checkpoint_if_due();
    Status flushed;
    if (wait_seq) {
      if (opts_.sync == SyncMode::Always) {
        flushed = sync_to(wait_seq);
      } else if (opts_.sync == SyncMode::Period) {
        // Without a flusher thread the first write after the period flushes.
        if (!port::kThreads && port::now_ms() - last_sync_ms_ >= (int64_t)opts_.sync_period_ms)
          flushed = sync_to(wait_seq);
      }
    }
    q.lock();
    for (size_t i = 0; i < n; i++) {
      QueuedWrite& g = *group[i];
      if (g.seq && !flushed.is_ok()) g.result = flushed;
      if (&g == &w) {
        mine = std::move(g.result);
        continue;
      }
      g.done = true;
      g.cv.notify_one();  // under the mutex: g lives on its writer's stack
    }
  }
  leading_ = false;
  if (queue_head_) queue_head_->cv.notify_one();
  return mine;
}

// One write of a group, under the write lock.
Result<QueryResult> Engine::land_one(QueuedWrite& w) {
  KF_TRY(check_writable());
  Prepared& p = w.p;
  if (w.catalog_at != catalog_version_.load(std::memory_order_relaxed)) {
    // A definition changed since its documents were made: make them again.
    KF_TRY(bound(p));
    w.docs = PreparedDocs{};
    KF_TRY(prepare_write(p.st, w.params, &w.docs));
  }
  WriteBatch batch;
  QueryResult res;
  KF_TRY(execute_write(p.st, w.params, &w.docs, &batch, &res));
  if (!batch.empty()) KF_TRY(commit(batch).status());
  return res;
}


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
  CallsInFlight::Scope in(calls_);
  if (!in) return closed_error();
  return sync_to_written();
}

Status Engine::sync_to_written() {
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

// Deferred writes (a server's, whose threads must not wait for a flush)
// land at once and are answered from here: the flusher thread makes the
// flush they wait for, shared by every write landed meanwhile, and calls
// them back. Without that thread (another sync mode, the WASM build) the
// caller flushes now.
void Engine::when_durable(uint64_t seq, std::function<void(const Status&)> done) {
  Status now;
  {
    CallsInFlight::Scope in(calls_);  // not around done(): it may close the database
    if (in) {
      bool issued;
      {
        std::lock_guard g(sync_mu_);
        // A point no write gave: a flush would never reach it.
        issued = seq <= written_seq_;
        if (!issued)
          now = Status(Code::Invalid, "durable point " + std::to_string(seq) + " was given by no write (the last write's is " +
                                          std::to_string(written_seq_) + ")");
        // stop_flusher_ first: it is set under this mutex before close() joins the thread.
        else if (opts_.sync == SyncMode::Always && !stop_flusher_ && flusher_.running() && !failed_ && synced_seq_ < seq) {
          durable_waiters_.push_back({seq, std::move(done)});
          sync_cv_.notify_all();
          return;
        }
      }
      if (issued) now = seq ? sync_to(seq) : Status::ok();
    } else {
      // Closed: durable when close()'s flush covered it.
      std::lock_guard g(sync_mu_);
      if (synced_seq_ < seq) now = Status(Code::Failed, "the database was closed before this write was flushed");
    }
  }
  done(now);
}

// The always mode's flusher: one flush for the deferred writes waiting,
// then their answers, outside the lock. At its stop (close) it answers
// the rest.
void Engine::durable_loop() {
  std::unique_lock lk(sync_mu_);
  for (;;) {
    sync_cv_.wait(lk, [&] { return stop_flusher_ || !durable_waiters_.empty(); });
    if (durable_waiters_.empty()) return;  // stopping
    uint64_t target = 0;
    for (const DurableWaiter& w : durable_waiters_) target = std::max(target, w.seq);
    lk.unlock();
    Status st = sync_to(target);
    lk.lock();
    std::vector<DurableWaiter> ready;
    for (size_t i = 0; i < durable_waiters_.size();) {
      if (!st.is_ok() || durable_waiters_[i].seq <= synced_seq_) {
        ready.push_back(std::move(durable_waiters_[i]));
        durable_waiters_[i] = std::move(durable_waiters_.back());
        durable_waiters_.pop_back();
      } else {
        i++;
      }
    }
    lk.unlock();
    for (DurableWaiter& w : ready) w.done(st);
    ready.clear();  // the callbacks' captures go before the lock is taken
    lk.lock();
  }
}

void Engine::flusher_loop() {
  if (opts_.sync == SyncMode::Always) return durable_loop();
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
  Status cs = checkpoint_now();  // a write's call, or the checkpointer, which close() stops first
  if (!cs.is_ok() && !failed_) {
    std::lock_guard g(report_mu_);
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
