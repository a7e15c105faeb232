// The POSIX file layer against a real temporary directory.
#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "posix_file.h"
#include "test_files.h"

using kitfox::Code;
using kitfox::File;
using kitfox::FileSystem;
using kitfox::OpenFlags;

// The tests build with -fno-exceptions, where doctest's REQUIRE does not
// compile (and could not stop a test anyway): these record a failure and
// return from the test case instead.
#define PF_ASSERT(cond)                                  \
  do {                                                   \
    if (!(cond)) {                                       \
      FAIL_CHECK("assertion failed: " #cond);            \
      return;                                            \
    }                                                    \
  } while (0)
#define PF_OK(expr)                                      \
  do {                                                   \
    ::kitfox::Status pf_s_ = (expr);                     \
    if (!pf_s_.is_ok()) {                                \
      FAIL_CHECK(#expr " failed: " << pf_s_.message());  \
      return;                                            \
    }                                                    \
  } while (0)
#define PF_ASSIGN_IMPL(tmp, lhs, expr)                   \
  auto tmp = (expr);                                     \
  if (!tmp.is_ok()) {                                    \
    FAIL_CHECK(#expr " failed: " << tmp.status().message()); \
    return;                                              \
  }                                                      \
  lhs = std::move(tmp.value())
#define PF_ASSIGN(lhs, expr) PF_ASSIGN_IMPL(KF_CONCAT(pf_r_, __LINE__), lhs, expr)

namespace {

using PosixTempDir = kitfox::testing::TempDir;

OpenFlags flags(bool create, bool exclusive) {
  OpenFlags f;
  f.create = create;
  f.exclusive = exclusive;
  return f;
}

// The size, or UINT64_MAX (and a recorded failure) when size() fails.
uint64_t size_of(File& f) {
  auto r = f.size();
  if (!r.is_ok()) {
    FAIL_CHECK("size() failed: " << r.status().message());
    return UINT64_MAX;
  }
  return r.value();
}

// The whole file, or a marker text (and a recorded failure) when a read fails.
std::string read_all(File& f) {
  uint64_t n = size_of(f);
  if (n == UINT64_MAX) return "<size failed>";
  std::string out(n, '\0');
  size_t got = 0;
  auto s = f.read(0, out.data(), out.size(), &got);
  if (!s.is_ok()) {
    FAIL_CHECK("read() failed: " << s.message());
    return "<read failed>";
  }
  out.resize(got);
  return out;
}

kitfox::Status write_str(File& f, uint64_t offset, const std::string& bytes) {
  return f.write(offset, bytes.data(), bytes.size());
}

bool exists(FileSystem& fs, const std::string& path) {
  auto r = fs.exists(path);
  if (!r.is_ok()) FAIL_CHECK("exists() failed: " << r.status().message());
  return r.is_ok() && r.value();
}

}  // namespace

TEST_SUITE("posix_file") {
  TEST_CASE("write then read round trip, at offsets, across a reopen") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    CHECK(fs->atomic_replace());
    const std::string path = dir.file("a.kfdb");

    std::vector<unsigned char> big(1 << 20);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 131 + 7);
    {
      std::unique_ptr<File> f;
      PF_ASSIGN(f, fs->open(path, flags(true, false)));
      CHECK(size_of(*f) == 0);
      PF_OK(f->write(0, big.data(), big.size()));
      PF_OK(write_str(*f, big.size(), "tail"));
      PF_OK(write_str(*f, 10, "XY"));  // overwrite in the middle
      PF_OK(f->sync());
      CHECK(size_of(*f) == big.size() + 4);
    }
    std::unique_ptr<File> f;
    PF_ASSIGN(f, fs->open(path, flags(false, false)));
    std::vector<unsigned char> back(big.size());
    size_t got = 0;
    PF_OK(f->read(0, back.data(), back.size(), &got));
    PF_ASSERT(got == back.size());
    big[10] = 'X';
    big[11] = 'Y';
    CHECK(std::memcmp(back.data(), big.data(), big.size()) == 0);

    char tail[4];
    PF_OK(f->read(big.size(), tail, 4, &got));
    CHECK(got == 4);
    CHECK(std::string(tail, got) == "tail");
  }

  TEST_CASE("a read at or across the end of file is short, not an error") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    std::unique_ptr<File> f;
    PF_ASSIGN(f, fs->open(dir.file("b"), flags(true, false)));
    PF_OK(write_str(*f, 0, "hello"));

    char buf[16];
    size_t got = 99;
    PF_OK(f->read(2, buf, sizeof buf, &got));
    PF_ASSERT(got == 3);
    CHECK(std::string(buf, got) == "llo");

    got = 99;
    PF_OK(f->read(5, buf, sizeof buf, &got));
    CHECK(got == 0);
    got = 99;
    PF_OK(f->read(1000, buf, sizeof buf, &got));
    CHECK(got == 0);
    got = 99;
    PF_OK(f->read(0, buf, 0, &got));
    CHECK(got == 0);
  }

  TEST_CASE("truncate shrinks and grows; size follows") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    std::unique_ptr<File> f;
    PF_ASSIGN(f, fs->open(dir.file("c"), flags(true, false)));
    PF_OK(write_str(*f, 0, "0123456789"));
    CHECK(size_of(*f) == 10);

    PF_OK(f->truncate(4));
    CHECK(size_of(*f) == 4);
    CHECK(read_all(*f) == "0123");

    PF_OK(f->truncate(8));  // grows with zeros
    CHECK(size_of(*f) == 8);
    CHECK(read_all(*f) == std::string("0123\0\0\0\0", 8));

    PF_OK(f->truncate(0));
    CHECK(size_of(*f) == 0);

    PF_OK(write_str(*f, 3, "z"));  // a write past the end leaves a zero-filled hole
    CHECK(read_all(*f) == std::string("\0\0\0z", 4));
  }

  TEST_CASE("replace puts the new content in place and removes the old name") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    const std::string db = dir.file("d.kfdb"), side = dir.file("d.kfdb.new");
    {
      std::unique_ptr<File> f;
      PF_ASSIGN(f, fs->open(db, flags(true, false)));
      PF_OK(write_str(*f, 0, "old image, longer than the new one"));
    }
    {
      std::unique_ptr<File> f;
      PF_ASSIGN(f, fs->open(side, flags(true, false)));
      PF_OK(write_str(*f, 0, "new image"));
      PF_OK(f->sync());
    }
    PF_OK(fs->replace(side, db));
    CHECK(exists(*fs, db));
    CHECK_FALSE(exists(*fs, side));
    std::unique_ptr<File> f;
    PF_ASSIGN(f, fs->open(db, flags(false, false)));
    CHECK(read_all(*f) == "new image");

    // Replacing from a missing file is an I/O error that names the file.
    auto bad = fs->replace(dir.file("nope"), db);
    CHECK(bad.code() == Code::Io);
    CHECK(bad.message().find(dir.file("nope")) != std::string::npos);
    CHECK(read_all(*f) == "new image");
  }

  TEST_CASE("exists and remove") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    const std::string path = dir.file("e");
    CHECK_FALSE(exists(*fs, path));
    {
      std::unique_ptr<File> f;
      PF_ASSIGN(f, fs->open(path, flags(true, false)));
    }
    CHECK(exists(*fs, path));
    PF_OK(fs->remove(path));
    CHECK_FALSE(exists(*fs, path));
    CHECK(fs->remove(path).is_ok());  // removing a missing file is fine
    CHECK_FALSE(exists(*fs, dir.file("no-dir/x")));
  }

  TEST_CASE("an exclusive open fails with Locked while another handle holds the lock") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    const std::string path = dir.file("f.kfdb");
    std::unique_ptr<File> first;
    PF_ASSIGN(first, fs->open(path, flags(true, true)));

    auto second = fs->open(path, flags(true, true));
    PF_ASSERT(!second.is_ok());
    CHECK(second.status().code() == Code::Locked);
    CHECK(second.status().message() == "database '" + path + "' is locked by another process");

    // A non-exclusive open is not refused (it does not take the lock).
    auto reader = fs->open(path, flags(false, false));
    CHECK_MESSAGE(reader.is_ok(), reader.status().message());

    // Closing the holder releases the lock, even while a mapping of the
    // file (which keeps its open file description, and so its flock) lives
    // on: a closed database whose memory is still mapped lets others in.
    PF_OK(write_str(*first, 0, std::string(4096, 'x')));
    std::unique_ptr<kitfox::Mapping> mapped = first->map(4096);
    PF_ASSERT(mapped != nullptr);
    first.reset();
    auto third = fs->open(path, flags(false, true));
    CHECK_MESSAGE(third.is_ok(), third.status().message());
    CHECK(mapped->data()[0] == 'x');
  }

  TEST_CASE("the writer lock follows the file through replace") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    const std::string db = dir.file("g.kfdb"), side = dir.file("g.kfdb.new");
    {
      std::unique_ptr<File> f;
      PF_ASSIGN(f, fs->open(db, flags(true, false)));
    }
    std::unique_ptr<File> holder;
    PF_ASSIGN(holder, fs->open(side, flags(true, true)));
    PF_OK(write_str(*holder, 0, "image"));
    PF_OK(fs->replace(side, db));

    auto other = fs->open(db, flags(false, true));
    PF_ASSERT(!other.is_ok());
    CHECK(other.status().code() == Code::Locked);

    // The holder still writes to the file now named db, and, told of the
    // rename, names it so in its errors (it named the side file).
    PF_OK(write_str(*holder, 5, "!"));
    holder->renamed(db);
    char c;
    size_t got = 0;
    kitfox::Status past = holder->read(UINT64_MAX - 1, &c, 1, &got);
    CHECK(past.message().find("'" + db + "'") != std::string::npos);
    holder.reset();
    std::unique_ptr<File> f;
    PF_ASSIGN(f, fs->open(db, flags(false, true)));
    CHECK(read_all(*f) == "image!");
  }

  TEST_CASE("opening a missing file without create is NotFound naming the path") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();
    const std::string path = dir.file("missing.kfdb");
    for (bool exclusive : {false, true}) {
      auto r = fs->open(path, flags(false, exclusive));
      PF_ASSERT(!r.is_ok());
      CHECK(r.status().code() == Code::NotFound);
      CHECK(r.status().message().find(path) != std::string::npos);
    }
    CHECK_FALSE(exists(*fs, path));  // and nothing was created
  }

  TEST_CASE("other failures are Io errors naming the path") {
    PosixTempDir dir;
    PF_ASSERT(!dir.path.empty());
    auto fs = kitfox::make_posix_file_system();

    auto as_dir = fs->open(dir.path, flags(true, false));  // a directory, not a file
    PF_ASSERT(!as_dir.is_ok());
    CHECK(as_dir.status().code() == Code::Io);
    CHECK(as_dir.status().message().find(dir.path) != std::string::npos);

    const std::string in_missing_dir = dir.file("no-such-dir/x.kfdb");
    auto r = fs->open(in_missing_dir, flags(true, false));
    PF_ASSERT(!r.is_ok());
    CHECK(r.status().code() == Code::Io);
    CHECK(r.status().message().find(in_missing_dir) != std::string::npos);
  }
}
