// The POSIX file layer: the FileSystem of the native build (CLI, tests,
// benchmarks, server). Names are paths, relative to the working directory or
// absolute.
//
//   read/write   pread/pwrite, looping over short transfers and EINTR
//   sync         fdatasync (F_FULLFSYNC on macOS)
//   size         fstat
//   open         O_RDWR | O_CLOEXEC; `create` adds O_CREAT (mode 0644, and the
//                directory is synced when the file is new); `exclusive` takes
//                flock(LOCK_EX | LOCK_NB) on the open file description
//   replace      rename(2), then fsync of the containing directory
//
// Errors: a missing file opened without `create` is Code::NotFound; a lock
// held by another open file description (another process, or another open()
// of the same path in this process) is Code::Locked; anything else is
// Code::Io with the operation, the path and the system's error text.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "file.h"

namespace kitfox {

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> open(const std::string& name, OpenFlags flags) override;
  Result<bool> exists(const std::string& name) override;
  // Removing a file that does not exist is not an error.
  Status remove(const std::string& name) override;
  // rename(from, to), then fsync of the directory (of both directories when
  // they differ). An flock held on an open handle of `from` follows the inode,
  // so a writer keeps its lock on the new file.
  Status replace(const std::string& from, const std::string& to) override;
  bool atomic_replace() const override { return true; }
  // realpath() of the file, or of its directory when it does not exist yet.
  std::string canonical(const std::string& name) override;
};

std::unique_ptr<FileSystem> make_posix_file_system();

}  // namespace kitfox
