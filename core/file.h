// The file layer: every byte the engine reads or writes goes through these
// two interfaces. Implementations: POSIX (native/posix_file.cpp), memory
// (core/memory_file.cpp, for tests and ':memory:'), the JS host (wasm/).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "status.h"

namespace kitfox {

// A read-only view of a file's first bytes, valid until destroyed (even after
// the file is closed, renamed or replaced).
class Mapping {
 public:
  virtual ~Mapping() = default;
  virtual const char* data() const = 0;
  virtual size_t size() const = 0;
  // Whether its pages may be the file's (mmap), not bytes read from it:
  // then a read past a point the file is later truncated to would fault.
  // Said of every mapping but the engine's own read buffers, to be safe.
  virtual bool of_file() const { return true; }
};

class File {
 public:
  virtual ~File() = default;
  // Maps the first `size` bytes read-only, where the platform can (mmap
  // natively); nullptr where it cannot, and the caller reads instead. The
  // engine never reads a mapping past a point it later truncates.
  virtual std::unique_ptr<Mapping> map(uint64_t size) {
    (void)size;
    return nullptr;
  }
  // Bytes a read may as well fetch when reading on demand: a host whose every
  // call costs as much as reading megabytes (OPFS in a private window, in
  // memory behind an IPC hop) says so, and reads of parts of the file it
  // will want anyway come in runs this big; a file no bigger is read whole on
  // open. 0: no such cost (a file on disk, OPFS in a normal profile included).
  virtual uint64_t read_chunk() const { return 0; }
  // Reads up to n bytes at offset; *got is less than n only at end of file.
  virtual Status read(uint64_t offset, void* buf, size_t n, size_t* got) = 0;
  virtual Status write(uint64_t offset, const void* buf, size_t n) = 0;
  // Makes every byte written so far durable (fdatasync natively).
  virtual Status sync() = 0;
  virtual Result<uint64_t> size() = 0;
  virtual Status truncate(uint64_t size) = 0;
  // True where zeros written ahead of the end make later flushes cheaper: a
  // flush of writes that grow a file commits its new size too (a journal
  // commit on ext4 and xfs), one of writes over bytes it already has does
  // not. The engine then writes its log's next megabyte as zeros before the
  // writes come (`always` mode).
  virtual bool fills_ahead() const { return false; }
  // Waits until what was written before `offset` is on the device, then
  // starts writing [offset, offset + n), already written, without waiting
  // for it (sync_file_range on Linux). A file written so, piece by piece,
  // never has more than a piece or two on their way: a flush of another
  // file meanwhile (the log's) queues behind those, not behind all of it,
  // and its own sync() has little left. Advice: nothing where there is no
  // such call.
  virtual void write_behind(uint64_t offset, uint64_t n) {
    (void)offset;
    (void)n;
  }
  // The file was renamed (a checkpoint's side file put in place): the name
  // its errors give from now on.
  virtual void renamed(const std::string& name) { (void)name; }
};

struct OpenFlags {
  bool create = false;     // create when missing
  bool exclusive = false;  // take the writer lock; fail with Code::Locked when held elsewhere
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual Result<std::unique_ptr<File>> open(const std::string& name, OpenFlags flags) = 0;
  virtual Result<bool> exists(const std::string& name) = 0;
  virtual Status remove(const std::string& name) = 0;
  // Puts `from` in place of `to` so that a crash leaves one or the other whole:
  // rename + directory sync natively; the `name~` copy protocol on OPFS, whose
  // recovery the engine runs on open (see storage/format.h). A writer lock
  // held on an open handle of `from` stays with the file under its new name.
  virtual Status replace(const std::string& from, const std::string& to) = 0;
  // True when replace() is an atomic rename (no copy protocol needed).
  virtual bool atomic_replace() const = 0;
  // The name a database is opened under: the file a symbolic link leads to
  // (natively), so that its lock is the file's and a checkpoint renames its
  // new image over the file, not over the link. The name itself here.
  virtual std::string canonical(const std::string& name) { return name; }
};

// A file system that lives in memory. Files persist for the lifetime of the
// object, so a database can be closed and reopened in tests.
std::unique_ptr<FileSystem> make_memory_file_system();

// Reads exactly n bytes or fails with Corrupt/Io naming the offset.
Status read_exact(File& f, uint64_t offset, void* buf, size_t n);

}  // namespace kitfox
