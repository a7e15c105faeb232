// The in-memory file system: for tests and ':memory:' databases. Files are
// shared buffers, so a database can be closed and reopened from the same
// FileSystem object; a writer lock is a flag on the file.
#include <cstring>
#include <map>
#include <mutex>

#include "file.h"

namespace kitfox {

namespace {

struct MemFileData {
  std::mutex mu;
  std::string bytes;
  bool locked = false;
};

class MemFile final : public File {
 public:
  MemFile(std::shared_ptr<MemFileData> d, bool lock) : d_(std::move(d)), lock_(lock) {}
  ~MemFile() override {
    if (lock_) {
      std::lock_guard g(d_->mu);
      d_->locked = false;
    }
  }
  Status read(uint64_t off, void* buf, size_t n, size_t* got) override {
    std::lock_guard g(d_->mu);
    size_t sz = d_->bytes.size();
    size_t k = off >= sz ? 0 : std::min<uint64_t>(n, sz - off);
    if (k) memcpy(buf, d_->bytes.data() + off, k);
    *got = k;
    return Status::ok();
  }
  Status write(uint64_t off, const void* buf, size_t n) override {
    std::lock_guard g(d_->mu);
    if (d_->bytes.size() < off + n) d_->bytes.resize(off + n);
    memcpy(d_->bytes.data() + off, buf, n);
    return Status::ok();
  }
  Status sync() override { return Status::ok(); }
  Result<uint64_t> size() override {
    std::lock_guard g(d_->mu);
    return (uint64_t)d_->bytes.size();
  }
  Status truncate(uint64_t n) override {
    std::lock_guard g(d_->mu);
    d_->bytes.resize(n);
    return Status::ok();
  }

 private:
  std::shared_ptr<MemFileData> d_;
  bool lock_;
};

class MemFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> open(const std::string& name, OpenFlags flags) override {
    std::lock_guard g(mu_);
    auto it = files_.find(name);
    if (it == files_.end()) {
      if (!flags.create) return Status(Code::NotFound, "no such file: " + name);
      it = files_.emplace(name, std::make_shared<MemFileData>()).first;
    }
    auto& d = it->second;
    if (flags.exclusive) {
      std::lock_guard g2(d->mu);
      if (d->locked) return Status(Code::Locked, "database '" + name + "' is locked by another connection");
      d->locked = true;
    }
    return std::unique_ptr<File>(new MemFile(d, flags.exclusive));
  }
  Result<bool> exists(const std::string& name) override {
    std::lock_guard g(mu_);
    return files_.count(name) > 0;
  }
  Status remove(const std::string& name) override {
    std::lock_guard g(mu_);
    files_.erase(name);
    return Status::ok();
  }
  Status replace(const std::string& from, const std::string& to) override {
    std::lock_guard g(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return Status(Code::NotFound, "no such file: " + from);
    files_[to] = it->second;
    files_.erase(it);
    return Status::ok();
  }
  bool atomic_replace() const override { return true; }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MemFileData>> files_;
};

}  // namespace

std::unique_ptr<FileSystem> make_memory_file_system() { return std::make_unique<MemFileSystem>(); }

Status read_exact(File& f, uint64_t offset, void* buf, size_t n) {
  size_t got = 0;
  KF_TRY(f.read(offset, buf, n, &got));
  if (got != n)
    return Status(Code::Corrupt, "file ends at " + std::to_string(offset + got) + " inside a record expected to end at " +
                                     std::to_string(offset + n));
  return Status::ok();
}

}  // namespace kitfox
