// The port layer's threads (core/port.h): run_parts makes every part's call
// once and returns after all of them; run_idle makes its call once, on Linux
// on a thread in the scheduler's idle class; Workers make every call of a loop
// once, loop after loop, with any number of threads. And the check of a big
// extent, which runs in parts on them, finds the first damaged block
// wherever it lies.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "codec.h"
#include "faulty_fs.h"
#include "port.h"
#include "storage/extent.h"
#include "test_files.h"

using namespace kitfox;

TEST_CASE("run_parts calls each part once and returns when every call has") {
  for (unsigned parts : {0u, 1u, 2u, 5u}) {
    std::vector<std::atomic<int>> calls(parts);
    std::vector<int> wrote(parts, 0);
    port::run_parts(parts, [&](unsigned p) {
      calls[p]++;
      wrote[p] = (int)p + 1;  // read below with no lock: run_parts joined its threads
    });
    for (unsigned p = 0; p < parts; p++) {
      CHECK(calls[p].load() == 1);
      CHECK(wrote[p] == (int)p + 1);
    }
  }
}

TEST_CASE("run_idle makes its call once and returns after it, on Linux in the idle class") {
  int calls = 0;
  bool idle = false;
  std::atomic<bool> hurry{false};
  port::run_idle(
      [&] {
        calls++;  // read below with no lock: run_idle joined its thread
        idle = testing::in_idle_class();
      },
      600000, &hurry);
  CHECK(calls == 1);
  CHECK_FALSE(hurry.load());  // done inside its budget
  if (testing::idle_class_allowed()) CHECK(idle);
  else MESSAGE("this system refuses the idle class (a sandbox's filter): run_idle ran at the caller's priority");
  CHECK_FALSE(testing::in_idle_class());  // the caller's class is its own
}

TEST_CASE("run_idle tells a call past its budget to hurry, and waits for it to return") {
  for (int budget : {0, 1}) {
    CAPTURE(budget);
#ifndef __linux__
    if (budget) continue;  // elsewhere f runs on the caller: nothing could tell it after its budget
#endif
    std::atomic<bool> hurry{false};
    bool saw = false;
    // The call returns only once told to hurry (eventually's bound only
    // ends a test that would hang): at once for a budget of 0, after it else.
    port::run_idle([&] { saw = testing::eventually([&] { return hurry.load(); }); }, budget, &hurry);
    CHECK(saw);
  }
}

TEST_CASE("Workers make every call of a loop once, loop after loop, with any number of threads") {
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    port::Workers pool(threads);
    std::vector<std::atomic<int>> calls(5000);
    for (int loop = 0; loop < 200; loop++) {
      // Ranges of every shape: empty, one call, many, not starting at 0.
      const uint32_t begin = loop % 3 == 0 ? 0 : 7, end = loop % 5 == 0 ? begin : loop % 7 == 0 ? begin + 1 : 5000;
      for (auto& c : calls) c.store(0, std::memory_order_relaxed);
      std::atomic<uint64_t> sum{0};
      pool.run(begin, end, [&](uint32_t i) {
        calls[i].fetch_add(1, std::memory_order_relaxed);
        sum.fetch_add(i, std::memory_order_relaxed);
      });
      uint64_t want = 0;
      bool each_once = true;
      for (uint32_t i = 0; i < calls.size(); i++) {
        const int c = calls[i].load(std::memory_order_relaxed);
        if (c != (i >= begin && i < end ? 1 : 0)) each_once = false;
        if (i >= begin && i < end) want += i;
      }
      CHECK(each_once);
      CHECK(sum.load() == want);
    }
  }
}

TEST_CASE("a big extent's check finds the first damaged block in any of its parts") {
  // Over 8 MiB, so that it is checked in parts side by side (natively).
  const uint32_t block = extent_block_bytes(512);
  std::string bytes(9u << 20, '\0');
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = (char)(i * 2654435761u >> 13);
  const std::string sums = testing::extent_checksums(bytes, {}, 512);
  ExtentRef e;
  Reader r(sums);
  REQUIRE(get_extent_checksums(r, &e));
  REQUIRE(extent_fits(e, bytes.size()));
  const uint64_t blocks = e.crcs.size();
  e.bytes = bytes;
  CHECK(first_bad_block(e) == -1);
  // One damaged block at each end and inside every quarter.
  for (uint64_t b : {uint64_t(0), blocks / 4 - 1, blocks / 4, blocks / 2 + 3, blocks * 3 / 4 + 1, blocks - 1}) {
    CAPTURE(b);
    std::string damaged = bytes;
    damaged[b * block + block / 2] ^= 0x20;
    e.bytes = damaged;
    CHECK(first_bad_block(e) == (int64_t)b);
  }
  // Two: the first is the answer, whichever part finds it.
  std::string two = bytes;
  two[(blocks - 2) * block] ^= 1;
  two[(blocks / 3) * block] ^= 1;
  e.bytes = two;
  CHECK(first_bad_block(e) == (int64_t)(blocks / 3));
}
