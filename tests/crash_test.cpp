// Crash recovery: a child process writes in `always` mode (single puts,
// batches) while a second thread of it checkpoints beside the writes (asked
// to by the writer now and then, or, every other round, one checkpoint after
// another, so that the kill lands inside one with the writes going on beside
// it: while its image is written, its tail carried over, its file renamed,
// its documents moved), and reports each acknowledged write through a pipe;
// the parent kills it with SIGKILL after a random number of them, reopens the
// file and checks that every acknowledged write is there, exactly once, with
// its vector (the collection has an HNSW index, so checkpoints pin and write
// its table and graph beside the writes). Repeated many times on one file,
// so kills land in writes, flushes and checkpoints alike.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "db.h"
#include "posix_file.h"

using namespace kitfox;

// Document n's vector: distinct for each n.
static Value vector_of(int64_t n) { return Value::vector({(float)n, (float)(n % 7), 1, 0}); }

[[noreturn]] static void child(const std::string& path, int fd, int64_t start, bool nonstop) {
  auto fs = make_posix_file_system();
  OpenOptions o;
  o.sync = SyncMode::Always;
  auto r = Database::open(*fs, path, o);
  if (!r) {
    fprintf(stderr, "child open: %s\n", r.status().to_string().c_str());
    _exit(3);
  }
  auto& db = *r;
  // Checkpoints on a thread of their own, asked for by the writer or one
  // after another: the writes go on beside them, so a kill lands in a
  // checkpoint with writers running as well as in a write.
  std::mutex m;
  std::condition_variable cv;
  int asked = 0;
  std::thread checkpointer([&] {
    std::unique_lock lk(m);
    for (;;) {
      cv.wait(lk, [&] { return nonstop || asked > 0; });
      asked = 0;
      lk.unlock();
      Status st = db->checkpoint();
      if (!st) {
        fprintf(stderr, "child checkpoint: %s\n", st.to_string().c_str());
        _exit(6);
      }
      lk.lock();
    }
  });
  checkpointer.detach();  // the child ends by the kill
  std::mt19937_64 rng(start);
  std::string pad(200, 'x');
  for (int64_t k = start;;) {
    int kind = rng() % 20;
    int64_t last = k;
    Status st;
    if (kind == 0) {
      {
        std::lock_guard g(m);
        asked++;
      }
      cv.notify_one();
    } else if (kind < 4) {
      // One statement, many documents: lands whole or not at all.
      Value list = Value::list();
      int n = 1 + rng() % 50;
      for (int i = 0; i < n; i++) {
        Value d = Value::object();
        d.append("n", Value::integer(k + i));
        d.append("pad", Value::text(pad));
        d.append("e", vector_of(k + i));
        list.push(std::move(d));
      }
      auto q = db->query("put t $1", {list});
      st = q.status();
      last = k + n - 1;
      if (st) k += n;
    } else {
      auto q = db->query("put t {n: $1, pad: $2, e: $3}", {Value::integer(k), Value::text(pad), vector_of(k)});
      st = q.status();
      if (st) k++;
    }
    if (!st) {
      fprintf(stderr, "child write: %s\n", st.to_string().c_str());
      _exit(4);
    }
    if (kind != 0) {
      if (write(fd, &last, sizeof last) != sizeof last) _exit(5);
    }
  }
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  char dir[] = "/tmp/kitfox-crash-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  std::string path = std::string(dir) + "/crash.kfdb";
  auto fs = make_posix_file_system();
  {
    auto r = Database::open(*fs, path);
    if (!r || !(*r)->query("create collection t (n int, pad text, e vector<4> @hnsw(l2))")) return 2;
    (*r)->close();
  }
  std::mt19937 rng(12345);
  int64_t acked = 0;  // every n in [1, acked] must be present
  int passed = 0, failed = 0, inside = 0;
  for (int round = 0; round < rounds; round++) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(path, fds[1], acked + 1, round % 2 == 1);
    }
    close(fds[1]);
    // Three rounds in four kill after a random number of acknowledged
    // writes (1 to 20), so the kill lands among writes however slow the
    // machine; the fourth kills at once, often during the open. No clock:
    // where inside a write the kill lands is the scheduler's.
    int64_t v;
    bool silent = false;
    if (round % 4 != 0) {
      int acks = 1 + (int)(rng() % 20);
      for (int a = 0; a < acks && !silent; a++) {
        if (read(fds[0], &v, sizeof v) == sizeof v) acked = std::max(acked, v);
        else silent = true;
      }
    }
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    if (access((path + "~~").c_str(), F_OK) == 0) inside++;  // it died inside a checkpoint (its side file)
    if (silent) {
      fprintf(stderr, "round %d: the child stopped acknowledging writes\n", round);
      failed++;
      break;
    }
    while (read(fds[0], &v, sizeof v) == sizeof v) acked = std::max(acked, v);
    close(fds[0]);
    if (WIFEXITED(status)) {
      fprintf(stderr, "round %d: child exited with %d before the kill\n", round, WEXITSTATUS(status));
      failed++;
      break;
    }

    OpenOptions o;
    o.sync = SyncMode::Off;
    o.auto_checkpoint = false;  // keep the tail as the child left it for the next round
    auto r = Database::open(*fs, path, o);
    if (!r) {
      fprintf(stderr, "round %d: reopen failed: %s\n", round, r.status().to_string().c_str());
      failed++;
      break;
    }
    auto& db = *r;
    auto cnt = db->query("get t where n <= $1 count", {Value::integer(acked)});
    auto all = db->query("get t count");
    auto top = db->query("get t select n order n desc limit 1");
    int64_t have = cnt ? cnt->rows[0].get("count")->as_int() : -1;
    int64_t total = all ? all->rows[0].get("count")->as_int() : -1;
    if (have != acked) {
      fprintf(stderr, "round %d: %lld of %lld acknowledged writes present\n", round, (long long)have, (long long)acked);
      failed++;
      break;
    }
    // Unacknowledged writes may have landed; they must then be whole and in order.
    int64_t max_n = top && !top->rows.empty() ? top->rows[0].get("n")->as_int() : 0;
    if (total != max_n) {
      fprintf(stderr, "round %d: %lld documents but the highest n is %lld\n", round, (long long)total, (long long)max_n);
      failed++;
      break;
    }
    // Each document with its own vector, and the index finding it.
    auto docs = db->query("get t select n, e");
    int64_t wrong = docs ? 0 : -1;
    if (docs)
      for (const Value& row : docs->rows)
        if (to_json(*row.get("e")) != to_json(vector_of(row.get("n")->as_int()))) wrong++;
    if (wrong) {
      fprintf(stderr, "round %d: %lld documents without their vector\n", round, (long long)wrong);
      failed++;
      break;
    }
    if (max_n > 0) {
      auto near = db->query("get t select n near e $1 limit 1", {vector_of(max_n)});
      if (!near || near->rows.size() != 1 || near->rows[0].get("n")->as_int() != max_n) {
        fprintf(stderr, "round %d: near did not find document %lld\n", round, (long long)max_n);
        failed++;
        break;
      }
    }
    acked = max_n;
    db->close();
    passed++;
  }
  std::string cmd = std::string("rm -rf ") + dir;
  if (system(cmd.c_str()) != 0) return 2;
  printf("crash recovery: %d passed, %d failed (%lld acknowledged writes survived; %d kills inside a checkpoint)\n",
         passed, failed, (long long)acked, inside);
  return failed ? 1 : 0;
}
