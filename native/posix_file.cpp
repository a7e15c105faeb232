// The POSIX file layer. See posix_file.h for the contract.
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64  // 64-bit off_t on 32-bit hosts too
#endif

#include "posix_file.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <climits>
#include <map>
#include <mutex>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>

namespace kitfox {

static_assert(sizeof(off_t) >= 8, "kitfox needs a 64-bit off_t");

namespace {

// One pread/pwrite moves at most this much (Linux caps a call near 2 GiB).
constexpr size_t kMaxChunk = size_t{1} << 30;

// strerror_r comes in two flavours: XSI returns int and fills the buffer,
// GNU returns the text (which may or may not be the buffer).
[[maybe_unused]] const char* error_text_of(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char* error_text_of(const char* text, const char*) {
  return text != nullptr ? text : "unknown error";
}

std::string error_text(int err) {
  char buf[256];
  buf[0] = '\0';
  return error_text_of(strerror_r(err, buf, sizeof buf), buf);
}

// "pwrite 'data/x.kfdb': No space left on device"
Status io_error(const char* op, const std::string& path, int err) {
  std::string msg = op;
  msg += " '";
  msg += path;
  msg += "': ";
  msg += error_text(err);
  return Status(Code::Io, std::move(msg));
}

bool offset_fits(uint64_t offset, size_t n) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  return offset <= kMax && n <= kMax - offset;
}

// `path` with its directory's real path (the name kept: a file need not be
// there yet); as it is when the directory has none.
std::string in_real_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return path;
  return std::string(real) == "/" ? "/" + base : std::string(real) + "/" + base;
}

std::string parent_dir(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/" names b
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos) return ".";
  while (slash > 0 && path[slash - 1] == '/') --slash;  // "a//b"
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status sync_dir(const std::string& dir) {
  int fd;
  do {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return io_error("open directory", dir, errno);
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL): nothing more to do there.
  if (rc != 0 && err != EINVAL) return io_error("fsync directory", dir, err);
  return Status::ok();
}

class PosixMapping final : public Mapping {
 public:
  PosixMapping(void* p, size_t n) : p_(p), n_(n) {}
  ~PosixMapping() override { ::munmap(p_, n_); }
  const char* data() const override { return static_cast<const char*>(p_); }
  size_t size() const override { return n_; }

 private:
  void* p_;
  size_t n_;
};

// The lock shared with the Node host (js/hosts/node-lock.js), which has no
// flock: on Linux a Unix socket bound in the abstract namespace under
// "kitfox-lock:" + sha256(real directory + "/" + name). The kernel releases it
// when the process dies. A database's side file (`name~`, `name~~`) shares its lock, so
// the lock stays held through a checkpoint's rename; handles are counted.
#if defined(__linux__)
class ProcessLocks {
 public:
  // Takes (or shares) the lock of `path`; false when another process holds it.
  static bool acquire(const std::string& path, std::string* key_out) {
    std::string key = key_of(path);
    std::lock_guard g(mu());
    auto& m = held();
    auto it = m.find(key);
    if (it != m.end()) {
      it->second.refs++;
      *key_out = key;
      return true;
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;  // no sockets: the flock still excludes native processes
    std::string name = "kitfox-lock:" + sha256_hex(key);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    addr.sun_path[0] = '\0';
    memcpy(addr.sun_path + 1, name.data(), name.size());
    // The whole zero-padded sun_path, as Node binds an abstract name.
    socklen_t len = (socklen_t)sizeof(addr);
    if (::bind(fd, (sockaddr*)&addr, len) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EADDRINUSE) return false;
      return true;
    }
    ::listen(fd, 1);  // as the Node side does, so both see the same kind of socket
    m[key] = {fd, 1};
    *key_out = key;
    return true;
  }
  static void release(const std::string& key) {
    if (key.empty()) return;
    std::lock_guard g(mu());
    auto& m = held();
    auto it = m.find(key);
    if (it == m.end()) return;
    if (--it->second.refs == 0) {
      ::close(it->second.fd);
      m.erase(it);
    }
  }

 private:
  struct Held {
    int fd;
    int refs;
  };
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, Held>& held() {
    static std::map<std::string, Held> m;
    return m;
  }
  // As the Node host: the real path of the directory, then the file name
  // (a side file `name~` or `name~~` counts as its database).
  static std::string key_of(const std::string& path) {
    std::string key = in_real_dir(path);
    while (key.size() > 1 && key.back() == '~' && key[key.size() - 2] != '/') key.pop_back();  // `name~~` too
    return key;
  }
};
#endif

class PosixFile final : public File {
 public:
  // Opening reads the whole file: mapping it spares the copy into fresh
  // memory. Not populated up front: the blocks of the big extents (vector
  // tables, graphs) are checked when first touched or by a background pass,
  // which take their page faults then (populating 68 MiB on open took 4 ms).
  std::unique_ptr<Mapping> map(uint64_t size) override {
    if (size == 0 || size > SIZE_MAX) return nullptr;
    void* p = ::mmap(nullptr, (size_t)size, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return nullptr;
    return std::make_unique<PosixMapping>(p, (size_t)size);
  }

  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void renamed(const std::string& name) override { path_ = name; }
  ~PosixFile() override {
    // The flock is the open file description's, which a mapping of the file
    // keeps open after the descriptor is closed: released here, so that a
    // closed database lets others in while its memory is still mapped.
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
#if defined(__linux__)
    ProcessLocks::release(lock_key_);
#endif
  }
  std::string lock_key_;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status read(uint64_t offset, void* buf, size_t n, size_t* got) override {
    *got = 0;
    if (!offset_fits(offset, n)) return Status(Code::Invalid, "read past the largest file offset: '" + path_ + "'");
    auto* p = static_cast<char*>(buf);
    size_t done = 0;
    while (done < n) {
      size_t chunk = n - done < kMaxChunk ? n - done : kMaxChunk;
      ssize_t r = ::pread(fd_, p + done, chunk, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *got = done;
        return io_error("pread", path_, errno);
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    *got = done;
    return Status::ok();
  }

  Status write(uint64_t offset, const void* buf, size_t n) override {
    if (!offset_fits(offset, n)) return Status(Code::Invalid, "write past the largest file offset: '" + path_ + "'");
    const auto* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < n) {
      size_t chunk = n - done < kMaxChunk ? n - done : kMaxChunk;
      ssize_t r = ::pwrite(fd_, p + done, chunk, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return io_error("pwrite", path_, errno);
      }
      if (r == 0) return io_error("pwrite", path_, ENOSPC);  // no progress: never spin
      done += static_cast<size_t>(r);
    }
    return Status::ok();
  }

  bool fills_ahead() const override { return true; }
  void write_behind(uint64_t offset, uint64_t n) override {
#if defined(__linux__)
    // What was started before it first written (a piece or two in flight at
    // most, so another file's flush never queues behind many), then this.
    // Advice: an error changes nothing.
    if (offset) (void)::sync_file_range(fd_, 0, (off_t)offset, SYNC_FILE_RANGE_WAIT_BEFORE);
    (void)::sync_file_range(fd_, (off_t)offset, (off_t)n, SYNC_FILE_RANGE_WRITE);
#else
    (void)offset;
    (void)n;
#endif
  }

  Status sync() override {
    int rc;
#if defined(__APPLE__)
    // fsync on macOS does not reach the platter; F_FULLFSYNC does, where supported.
    rc = ::fcntl(fd_, F_FULLFSYNC);
    if (rc != 0) rc = ::fsync(fd_);
    if (rc != 0) return io_error("fsync", path_, errno);
#else
    do {
      rc = ::fdatasync(fd_);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return io_error("fdatasync", path_, errno);
#endif
    return Status::ok();
  }

  Result<uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return io_error("fstat", path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Status truncate(uint64_t size) override {
    if (!offset_fits(size, 0)) return Status(Code::Invalid, "truncate past the largest file offset: '" + path_ + "'");
    int rc;
    do {
      rc = ::ftruncate(fd_, static_cast<off_t>(size));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return io_error("ftruncate", path_, errno);
    return Status::ok();
  }

 private:
  int fd_;
  std::string path_;
};

int open_retrying(const std::string& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

Result<std::unique_ptr<File>> PosixFileSystem::open(const std::string& name, OpenFlags flags) {
  if (name.empty()) return Status(Code::Invalid, "empty file name");
  const int base = O_RDWR | O_CLOEXEC;
  int fd = open_retrying(name, base);
  if (fd < 0 && errno == ENOENT) {
    if (!flags.create) return Status(Code::NotFound, "file '" + name + "' does not exist");
    // O_EXCL tells us whether this call made the file, so that only then the
    // directory entry is made durable.
    fd = open_retrying(name, base | O_CREAT | O_EXCL);
    if (fd >= 0) {
      Status s = sync_dir(parent_dir(name));
      if (!s.is_ok()) {
        ::close(fd);
        return s;
      }
    } else if (errno == EEXIST) {
      fd = open_retrying(name, base);  // another opener created it meanwhile
    } else {
      return io_error("create", name, errno);
    }
  }
  if (fd < 0) return io_error("open", name, errno);

  if (flags.exclusive) {
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK || err == EAGAIN)
        return Status(Code::Locked, "database '" + name + "' is locked by another process");
      return io_error("flock", name, err);
    }
  }
  // A database with more than one name (hard links) is refused: the Node
  // package's lock is its path's, so a process opening it by another name
  // would write beside this one, and a checkpoint replaces the file under
  // one name only.
  struct stat st;
  if (flags.exclusive && ::fstat(fd, &st) == 0 && st.st_nlink > 1) {
    ::close(fd);
    return Status(Code::Invalid, "database '" + name + "' has " + std::to_string(st.st_nlink) +
                                     " names (hard links): another process could open it by another name beside this "
                                     "one, and a checkpoint replaces the file under one name only; give it one name (copy it)");
  }
  auto file = std::make_unique<PosixFile>(fd, name);
#if defined(__linux__)
  if (flags.exclusive && !ProcessLocks::acquire(name, &file->lock_key_))
    return Status(Code::Locked, "database '" + name + "' is locked by another process");
#endif
  return std::unique_ptr<File>(std::move(file));
}

std::string PosixFileSystem::canonical(const std::string& name) {
  char real[PATH_MAX];
  if (::realpath(name.c_str(), real)) return real;
  if (errno != ENOENT) return name;
  // Not there yet: its directory's real path (a link to nothing is left as it is).
  struct stat st;
  return ::lstat(name.c_str(), &st) == 0 ? name : in_real_dir(name);
}

Result<bool> PosixFileSystem::exists(const std::string& name) {
  struct stat st;
  if (::stat(name.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return io_error("stat", name, errno);
}

Status PosixFileSystem::remove(const std::string& name) {
  if (::unlink(name.c_str()) == 0 || errno == ENOENT) return Status::ok();
  return io_error("unlink", name, errno);
}

Status PosixFileSystem::replace(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    return io_error("rename", from + "' to '" + to, err);
  }
  std::string to_dir = parent_dir(to);
  KF_TRY(sync_dir(to_dir));
  std::string from_dir = parent_dir(from);
  if (from_dir != to_dir) KF_TRY(sync_dir(from_dir));
  return Status::ok();
}

std::unique_ptr<FileSystem> make_posix_file_system() {
  return std::make_unique<PosixFileSystem>();
}

}  // namespace kitfox
