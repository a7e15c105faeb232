// See host_file.h. The JS side of each call is Module.kfHostCall (js/core.js),
// which runs the host's method and turns a thrown error into -1 plus a code
// and a message that kf_host_take_error hands back. Offsets and sizes cross as
// doubles: exact up to 2^53 bytes, far beyond a 4 GiB heap.
#include "host_file.h"

#include <emscripten.h>

#include <cstdlib>
#include <string>

// clang-format off
EM_JS(double, kf_host_open, (int host, const char* name, int create, int exclusive), {
  return Module.kfHostCall(host, 'open', [UTF8ToString(name), !!create, !!exclusive]);
});
EM_JS(double, kf_host_read, (int host, int fh, double off, char* buf, size_t n), {
  buf >>>= 0;
  return Module.kfHostCall(host, 'read', [fh, off, HEAPU8.subarray(buf, buf + (n >>> 0))]);
});
EM_JS(double, kf_host_write, (int host, int fh, double off, const char* buf, size_t n), {
  buf >>>= 0;
  return Module.kfHostCall(host, 'write', [fh, off, HEAPU8.subarray(buf, buf + (n >>> 0))]);
});
EM_JS(double, kf_host_sync, (int host, int fh), { return Module.kfHostCall(host, 'sync', [fh]); });
EM_JS(double, kf_host_size, (int host, int fh), { return Module.kfHostCall(host, 'size', [fh]); });
EM_JS(double, kf_host_truncate, (int host, int fh, double size), {
  return Module.kfHostCall(host, 'truncate', [fh, size]);
});
EM_JS(double, kf_host_close, (int host, int fh), { return Module.kfHostCall(host, 'close', [fh]); });
EM_JS(double, kf_host_exists, (int host, const char* name), {
  return Module.kfHostCall(host, 'exists', [UTF8ToString(name)]);
});
EM_JS(double, kf_host_remove, (int host, const char* name), {
  return Module.kfHostCall(host, 'remove', [UTF8ToString(name)]);
});
EM_JS(double, kf_host_replace, (int host, const char* from, const char* to), {
  return Module.kfHostCall(host, 'replace', [UTF8ToString(from), UTF8ToString(to)]);
});
// The last host error: its kitfox::Code in *code, its message as a malloc'd string.
EM_JS(char*, kf_host_take_error, (int* code), {
  var e = Module.kfHostError || {code: 8, message: 'unknown host error'};
  Module.kfHostError = null;
  HEAP32[(code >>> 0) >>> 2] = e.code;
  var n = lengthBytesUTF8(e.message) + 1;
  var p = _malloc(n);
  stringToUTF8(e.message, p, n);
  return p;
});
// clang-format on

namespace kitfox {

namespace {

Status host_error() {
  int code = 0;
  char* msg = kf_host_take_error(&code);
  Status s((Code)code, msg ? msg : "host error");
  free(msg);
  return s;
}

class HostFile final : public File {
 public:
  HostFile(int host, int fh, uint64_t chunk) : host_(host), fh_(fh), chunk_(chunk) {}
  uint64_t read_chunk() const override { return chunk_; }
  ~HostFile() override {
    if (kf_host_close(host_, fh_) < 0) host_error();  // nothing to report to
  }
  Status read(uint64_t offset, void* buf, size_t n, size_t* got) override {
    *got = 0;
    double r = kf_host_read(host_, fh_, (double)offset, (char*)buf, n);
    if (r < 0) return host_error();
    *got = (size_t)r;
    return Status::ok();
  }
  Status write(uint64_t offset, const void* buf, size_t n) override {
    if (kf_host_write(host_, fh_, (double)offset, (const char*)buf, n) < 0) return host_error();
    return Status::ok();
  }
  Status sync() override {
    if (kf_host_sync(host_, fh_) < 0) return host_error();
    return Status::ok();
  }
  Result<uint64_t> size() override {
    double r = kf_host_size(host_, fh_);
    if (r < 0) return host_error();
    return (uint64_t)r;
  }
  Status truncate(uint64_t size) override {
    if (kf_host_truncate(host_, fh_, (double)size) < 0) return host_error();
    return Status::ok();
  }

 private:
  int host_;
  int fh_;
  uint64_t chunk_;
};

class HostFileSystem final : public FileSystem {
 public:
  HostFileSystem(int host, bool atomic, uint64_t chunk) : host_(host), atomic_(atomic), chunk_(chunk) {}
  Result<std::unique_ptr<File>> open(const std::string& name, OpenFlags flags) override {
    double fh = kf_host_open(host_, name.c_str(), flags.create, flags.exclusive);
    if (fh < 0) return host_error();
    return std::unique_ptr<File>(new HostFile(host_, (int)fh, chunk_));
  }
  Result<bool> exists(const std::string& name) override {
    double r = kf_host_exists(host_, name.c_str());
    if (r < 0) return host_error();
    return r > 0;
  }
  Status remove(const std::string& name) override {
    if (kf_host_remove(host_, name.c_str()) < 0) return host_error();
    return Status::ok();
  }
  Status replace(const std::string& from, const std::string& to) override {
    if (kf_host_replace(host_, from.c_str(), to.c_str()) < 0) return host_error();
    return Status::ok();
  }
  bool atomic_replace() const override { return atomic_; }

 private:
  int host_;
  bool atomic_;
  uint64_t chunk_;
};

}  // namespace

std::unique_ptr<FileSystem> make_host_file_system(int host_id, bool atomic_replace, uint64_t read_chunk) {
  return std::make_unique<HostFileSystem>(host_id, atomic_replace, read_chunk);
}

}  // namespace kitfox
