// A prepared statement: text parsed once, bound to the catalog once, run
// many times with new parameters. Database::prepare hands one out (as a
// kitfox::Statement); Database::query takes them from a StatementCache.
#pragma once
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ast.h"

namespace kitfox {

struct Collection;

struct Prepared {
  std::string text;
  ParsedStatement st;
  // A point read (`get C where id = X` and nothing else): X, whose value
  // read_point looks up with no plan built (ops/id_lookup.cpp); set once
  // the statement is parsed.
  const Expr* point_id = nullptr;
  // The catalog version the statement was last bound at (0: never). A
  // reader rebinds under bind_mu when it finds an older one: the catalog
  // changes only under the write lock, so every reader holding the shared
  // lock sees the same version.
  std::atomic<uint64_t> bound_at{0};
  // The collection it names, as bound at bound_at (null for statements that
  // name none): a pointer good while the catalog stays at that version, so
  // while the shared lock that bound or checked it is held.
  Collection* collection = nullptr;
  std::mutex bind_mu;
  // How the statement's last read went, for a server that keeps its event
  // loops for short requests (Database::may_run_long): the catalog version
  // it ran at, shifted left by one, and 1 when it ran long (a scan, an
  // exact near, or many documents read). 0: not run. A stale answer only
  // puts a request on another thread.
  mutable std::atomic<uint64_t> ran{0};
};

// Recently prepared statements by their text, so that a statement sent as
// text again costs what a prepared one does. Thread-safe; least recently
// used first out. Long statements (bulk writes with their documents in the
// text) are not kept: parsing is most of their cost anyway, and each would
// hold its documents' bytes as long as it stayed.
class StatementCache {
 public:
  static constexpr size_t kMaxText = 1024;
  explicit StatementCache(size_t capacity = 128) : capacity_(capacity) {}

  std::shared_ptr<Prepared> find(std::string_view text) {
    std::lock_guard g(mu_);
    auto it = map_.find(text);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return *it->second;
  }
  void add(std::shared_ptr<Prepared> p) {
    if (p->text.size() > kMaxText) return;
    std::lock_guard g(mu_);
    if (map_.count(p->text)) return;
    lru_.push_front(std::move(p));
    map_.emplace(lru_.front()->text, lru_.begin());
    if (lru_.size() > capacity_) {
      map_.erase(lru_.back()->text);
      lru_.pop_back();
    }
  }
  void clear() {
    std::lock_guard g(mu_);
    map_.clear();
    lru_.clear();
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::shared_ptr<Prepared>> lru_;
  std::unordered_map<std::string_view, std::list<std::shared_ptr<Prepared>>::iterator> map_;
};

}  // namespace kitfox
