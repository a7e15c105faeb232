// Small helpers the native benchmark programs share: formatting, files,
// medians and percentiles, progress lines, the machine and file system a run
// used, and the process's peak memory (RSS) per phase.
//
// The programs say `using namespace kitfox::benchutil;` and keep helpers of
// their own in an anonymous namespace, so a name added here must not be one
// they already define (die, since, seconds_since, mib, ms, dur, ratio,
// file_size, utc_now, Rng, pct, p50, percentile, median_of, Machine,
// describe_machine, ...): main() would see both and the call would be ambiguous.
#pragma once
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace kitfox::benchutil {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  va_list ap, ap2;
  va_start(ap, f);
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, f, ap);
  va_end(ap);
  std::string s(n > 0 ? (size_t)n : 0, '\0');
  std::vsnprintf(s.data(), s.size() + 1, f, ap2);
  va_end(ap2);
  return s;
}

// 1234567 -> "1,234,567"
inline std::string grouped(double x) {
  std::string s = fmt("%.0f", x), out;
  size_t neg = s[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < s.size(); i++) {
    if (i > neg && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// A whole file's text ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t\n");
  size_t b = s.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

inline void remove_file(const std::string& path) { ::unlink(path.c_str()); }

inline void progress(const std::string& s) {
  std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stderr);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The q-quantile (0 < q <= 1) of the samples by the nearest-rank method;
// the samples are sorted in place.
inline double nearest_rank(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t r = (size_t)std::ceil(q * (double)v.size());
  return v[std::min(v.size(), std::max<size_t>(r, 1)) - 1];
}

// "2026-11-30 01:22 UTC"
// Prints the Markdown report and, where `out` is given, writes it there
// too; false when that write failed.
inline bool emit_report(const std::string& md, const std::string& out) {
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (out.empty()) return true;
  FILE* f = std::fopen(out.c_str(), "w");
  bool ok = f && std::fputs(md.c_str(), f) >= 0;
  if (f && std::fclose(f) != 0) ok = false;
  if (ok) progress("  report written to " + out);
  return ok;
}

inline std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// ---------------------------------------------------------------- machine

// What every report's Machine table says: the CPU model (and /proc/cpuinfo's
// text, for programs that read more of it), logical CPUs, RAM, kernel and
// compiler.
struct MachineInfo {
  std::string cpuinfo, cpu = "unknown", kernel = "unknown", compiler;
  long cpus = 0;
  uint64_t ram = 0;
  // A field of the first CPU in /proc/cpuinfo ("" when there is none).
  std::string cpu_field(const char* key) const {
    size_t p = cpuinfo.find(key);
    if (p == std::string::npos) return "";
    size_t c = cpuinfo.find(':', p), e = cpuinfo.find('\n', p);
    return trim(cpuinfo.substr(c + 1, e - c - 1));
  }
};

inline MachineInfo machine_info() {
  MachineInfo m;
  m.cpuinfo = read_text("/proc/cpuinfo");
  if (std::string cpu = m.cpu_field("model name"); !cpu.empty()) m.cpu = cpu;
  m.cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::string mem = read_text("/proc/meminfo");
  size_t p = mem.find("MemTotal:");
  if (p != std::string::npos) m.ram = std::strtoull(mem.c_str() + p + 9, nullptr, 10) * 1024;
  struct utsname u;
  if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
#if defined(__clang__)
  m.compiler = std::string("clang ") + __VERSION__;
#elif defined(__GNUC__)
  m.compiler = std::string("g++ ") + __VERSION__;
#else
  m.compiler = __VERSION__;
#endif
  return m;
}

// The rows every report's Machine table starts with: CPU model, logical
// CPUs, RAM, kernel, compiler. Each program adds its peers' versions.
inline std::string machine_rows() {
  const MachineInfo m = machine_info();
  std::string out;
  out += "| CPU | " + m.cpu + " |\n";
  out += fmt("| logical CPUs | %ld |\n", m.cpus);
  out += fmt("| RAM | %.1f GiB |\n", (double)m.ram / 1073741824.0);
  out += "| kernel | " + m.kernel + " |\n";
  out += "| compiler | " + m.compiler + " (Release) |\n";
  return out;
}

// What holds `path`: "ext4 on /dev/vda (mounted at /)", from the longest
// mount point in /proc/mounts that contains it; `*tmpfs` is set when the
// data would live in memory (tmpfs, ramfs), where a flush costs nothing.
inline std::string filesystem_of(const std::string& path, bool* tmpfs = nullptr) {
  std::string best_dir, best_dev, best_type;
  std::istringstream in(read_text("/proc/mounts"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string dev, dir, type;
    ls >> dev >> dir >> type;
    bool inside = path == dir || dir == "/" ||
                  (path.compare(0, dir.size(), dir) == 0 && path.size() > dir.size() && path[dir.size()] == '/');
    if (inside && dir.size() >= best_dir.size()) best_dir = dir, best_dev = dev, best_type = type;
  }
  struct statfs sf;
  bool mem = best_type == "tmpfs" || best_type == "ramfs";
  if (::statfs(path.c_str(), &sf) == 0 && (sf.f_type == 0x01021994 /* TMPFS_MAGIC */ || sf.f_type == (long)0x858458f6 /* RAMFS */))
    mem = true;
  if (tmpfs) *tmpfs = mem;
  if (best_type.empty()) return mem ? "tmpfs (memory)" : "unknown";
  return best_type + " on " + best_dev + " (mounted at " + best_dir + ")" + (mem ? ": in memory, not a disk" : "");
}

// ---------------------------------------------------------------- other processes
//
// The machine may be shared: how many CPUs other processes used during a
// measurement is the figure to judge it by (the load average includes us).

// Busy CPU time of the whole machine (all CPUs), from /proc/stat, in seconds.
inline double cpu_busy_machine_s() {
  std::istringstream in(read_text("/proc/stat"));
  std::string cpu;
  uint64_t v[8] = {};  // user nice system idle iowait irq softirq steal
  in >> cpu;
  for (auto& x : v) in >> x;
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)::sysconf(_SC_CLK_TCK);
}

// CPU time this process used (all its threads), in seconds.
inline double cpu_used_self_s() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPUs other processes used, on average, since construction (or reset()).
// Under about 0.3 s the 10 ms ticks of /proc/stat cannot tell.
struct OtherCpu {
  double busy0 = 0, self0 = 0;
  std::chrono::steady_clock::time_point t0;
  OtherCpu() { reset(); }
  void reset() {
    busy0 = cpu_busy_machine_s();
    self0 = cpu_used_self_s();
    t0 = std::chrono::steady_clock::now();
  }
  double cores() const {
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double others = (cpu_busy_machine_s() - busy0) - (cpu_used_self_s() - self0);
    return wall > 0 ? std::max(0.0, others / wall) : 0;
  }
};

// Waits (up to max_s seconds) until other processes use fewer than `below`
// CPUs over a 2-second sample. Returns false when it gave up.
inline bool wait_for_quiet(double max_s, double below = 0.15) {
  auto start = std::chrono::steady_clock::now();
  bool said = false;
  for (;;) {
    OtherCpu o;
    std::this_thread::sleep_for(std::chrono::seconds(2));
    double c = o.cores();
    if (c < below) return true;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > max_s) {
      progress(fmt("    still busy (other processes use %.2f CPUs) after %.0f s: measuring anyway", c, waited));
      return false;
    }
    if (!said) progress(fmt("    waiting for quiet: other processes use %.2f CPUs", c));
    said = true;
  }
}

// ---------------------------------------------------------------- peak memory
//
// Linux keeps the process's peak resident set (VmHWM in /proc/self/status);
// writing "5" to /proc/self/clear_refs sets it back to the current RSS. So
// the peak of a phase is: peak_rss_reset() before it, peak_rss_bytes() after.
// The figure covers the whole process: what it already held when the phase
// began (data built before timing, other engines' memory not yet returned)
// is in it, so reports show the RSS at the start of the phase beside the peak.
// Mapped file pages that were touched count too (kitfox maps its file; SQLite
// reads into its page cache). peak_rss_reset() first returns freed heap memory
// to the system (malloc_trim), so memory a finished phase freed does not
// count against the next one.

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"); 0 when unknown.
inline uint64_t proc_status_bytes(const char* key) {
  std::string s = read_text("/proc/self/status");
  std::string k = std::string(key) + ":";
  size_t p = s.find(k);
  if (p == std::string::npos) return 0;
  return std::strtoull(s.c_str() + p + k.size(), nullptr, 10) * 1024;  // "NNN kB"
}

inline uint64_t rss_now_bytes() { return proc_status_bytes("VmRSS"); }
inline uint64_t peak_rss_bytes() { return proc_status_bytes("VmHWM"); }

// Returns false when the peak could not be reset (no /proc/self/clear_refs):
// peak_rss_bytes() is then the peak since the process started.
inline bool peak_rss_reset() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// One phase's memory: construct (or begin()) at its start, end() at its end.
struct PeakRss {
  uint64_t start = 0;  // RSS when the phase began (after malloc_trim)
  uint64_t peak = 0;   // highest RSS during the phase
  bool reset_ok = false;
  void begin() {
    reset_ok = peak_rss_reset();
    start = rss_now_bytes();
    peak = 0;
  }
  void end() { peak = std::max(peak_rss_bytes(), start); }
  // "412 MiB (from 380)", or "-" when never measured.
  std::string text() const {
    if (!peak) return "-";
    return fmt("%.0f MiB (from %.0f)", (double)peak / 1048576.0, (double)start / 1048576.0);
  }
};

// splitmix64: a small, fast, fixed-seed generator, the same on every
// machine (the programs' data and query streams come from it).
struct SplitMix {
  uint64_t s;
  explicit SplitMix(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

// A command-line count: a positive decimal integer, nothing after it.
inline bool parse_positive(const char* s, size_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !end || *end || v == 0 || s[0] == '-') return false;
  *out = (size_t)v;
  return true;
}

// Prints "program: what", removes the run's data directory (when not empty:
// the programs leave it empty with --keep) and exits with 1.
[[noreturn]] inline void die_removing(const char* program, const std::string& data_dir, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program, what.c_str());
  if (!data_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(data_dir, ec);
  }
  std::exit(1);
}

}  // namespace kitfox::benchutil
