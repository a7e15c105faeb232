#!/usr/bin/env bash
# Builds the three /health servers of bench/http/ (g++ -O2, into
# build-bench/http/) and measures them on loopback, three rounds, medians
# (Beast twice: one io_context run by all threads, and one per thread):
#   (a) one client at a time:       wrk -t1 -c1 -d5s --latency -> p50, p99
#   (a') the same with the vCPUs kept awake (SPIN, below)     -> p50
#   (b) eight connections at once:  wrk -t2 -c8 -d5s --latency -> req/s, p50, p99
#   (c) beside 1,000 idle kept-alive connections (hold_idle.py):
#       wrk -t1 -c1 -d5s --latency  -> p50 of the one more client
# plus compile time (median of 3), binary size, the shared libraries each
# needs, and whether each compiles with -fno-exceptions.
# Every compile takes /tmp/kitfox-build.lock (never two builds at once), and
# so does each server's round of measurements (no build beside it).
# Environment: THREADS (Beast, h2o; default 2), HTTPLIB_THREADS (cpp-httplib's
# pool; default 8, the library's default on a machine of <= 9 cores),
# ROUNDS (default 3), DURATION (wrk seconds, default 5), IDLE (default 1000),
# SPIN (default 1: see below; 0 to measure without).
#
# SPIN: on a VM an idle vCPU halts, and waking it (through the host) adds
# 40-50 us to a one-client round trip when the server and the client wake each
# other across the two vCPUs: then (a) depends on what else the machine runs.
# So (a) is measured twice: as the machine is, and again (a') with one busy
# loop per core at nice 19 beside it, which keeps the vCPUs from halting
# (nice-0 threads preempt it; it costs them little else).
# Prints a Markdown report; also written to build-bench/http/report.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SRC=bench/http
OUT=build-bench/http
LOCK=/tmp/kitfox-build.lock
THREADS=${THREADS:-2}
HTTPLIB_THREADS=${HTTPLIB_THREADS:-8}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
IDLE=${IDLE:-1000}
SPIN=${SPIN:-1}
BUILDS=(beast httplib h2o)        # the programs
SERVERS=(beast beast-pt httplib h2o)  # what is measured: beast-pt is beast_server ... per-thread
mkdir -p "$OUT"
ulimit -n 8192

for cmd in g++ wrk python3 curl pkg-config; do
  command -v $cmd >/dev/null || { echo "run.sh: $cmd not found" >&2; exit 1; }
done
[[ -e /usr/include/boost/beast.hpp ]] || { echo "run.sh: needs libboost1.81-dev" >&2; exit 1; }
[[ -e /usr/include/httplib.h ]] || { echo "run.sh: needs libcpp-httplib-dev" >&2; exit 1; }
have_h2o=1
pkg-config --exists libh2o-evloop || have_h2o=0
if ((!have_h2o)); then
  echo "run.sh: libh2o-evloop-dev not installed: skipping h2o" >&2
  BUILDS=(beast httplib)
  SERVERS=(beast beast-pt httplib)
fi

CXX=(g++ -std=c++20 -O2 -Wall -Wextra)
flags_of() {  # the compile flags and libraries of one server
  case $1 in
    beast) echo "-pthread" ;;
    httplib) echo "$(pkg-config --cflags cpp-httplib) $(pkg-config --libs cpp-httplib) -pthread" ;;
    h2o) echo "$(pkg-config --cflags libh2o-evloop) $(pkg-config --libs libh2o-evloop) -pthread" ;;
  esac
}
threads_of() { [[ $1 == httplib ]] && echo "$HTTPLIB_THREADS" || echo "$THREADS"; }
build_of() { echo "${1%-pt}"; }                      # the program a server runs
args_of() { [[ $1 == *-pt ]] && echo per-thread || true; }  # its extra argument
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "-"; else print v[int((NR+1)/2)]}'; }

# --- build ---------------------------------------------------------------------
declare -A compile_s size_b stripped_b libs noexc
for s in "${BUILDS[@]}"; do
  # shellcheck disable=SC2046
  times=()
  for _ in 1 2 3; do
    flock "$LOCK" /usr/bin/time -f %e -o "$OUT/$s.time" \
      "${CXX[@]}" -o "$OUT/${s}_server" "$SRC/${s}_server.cpp" $(flags_of $s)
    times+=("$(tail -1 "$OUT/$s.time")")
  done
  compile_s[$s]=$(printf '%s\n' "${times[@]}" | median)
  size_b[$s]=$(stat -c %s "$OUT/${s}_server")
  strip -o "$OUT/${s}_server.stripped" "$OUT/${s}_server"
  stripped_b[$s]=$(stat -c %s "$OUT/${s}_server.stripped")
  rm -f "$OUT/${s}_server.stripped" "$OUT/$s.time"
  # The shared libraries beyond libc, libm, libstdc++ and libgcc_s (direct
  # and indirect), with the size of the library's own .so.
  libs[$s]=$(ldd "$OUT/${s}_server" | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libstdc\+\+|libgcc_s)\.so/ {print $1, $3}' |
    while read -r name path; do
      printf '%s (%s KB) ' "$name" $(( $(stat -L -c %s "$path") / 1024 ))
    done)
  if flock "$LOCK" "${CXX[@]}" -fno-exceptions -o "$OUT/${s}_server_noexc" \
       "$SRC/${s}_server.cpp" $(flags_of $s) 2>"$OUT/$s.noexc.log"; then
    noexc[$s]=yes
  else
    # the first error, as "file.hpp:LINE: message"
    noexc[$s]="no: $(grep -m1 'error:' "$OUT/$s.noexc.log" |
      sed -E 's|^([^:]*/)?([^/:]+):([0-9]+):[0-9]+: error: |\2:\3: |')"
  fi
  rm -f "$OUT/${s}_server_noexc"
done

# --- measure -------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
to_us() {  # wrk's "44.00us" / "1.20ms" / "2.00s" -> microseconds
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) f = 1; else if (v ~ /ms$/) f = 1000; else if (v ~ /s$/) f = 1000000; else f = 1;
    sub(/[a-z]+$/, "", v); printf "%.0f", v * f }'
}
# wrk_run FILE ARGS...: runs wrk, leaves "requests p50_us p99_us req_per_s" in FILE
wrk_run() {
  local file=$1; shift
  /usr/bin/time -f '%U %S' -a -o "$wrkcpu" \
    wrk "$@" --latency "http://127.0.0.1:$port/health" >"$file.raw" 2>&1 || true
  local n p50 p99 rps
  n=$(awk '/requests in/ {print $1}' "$file.raw")
  p50=$(awk '$1 == "50%" {print $2}' "$file.raw")
  p99=$(awk '$1 == "99%" {print $2}' "$file.raw")
  rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$file.raw")
  if [[ ${n:-0} == 0 ]]; then
    echo "0 - - 0" >"$file"
  else
    echo "$n $(to_us "$p50") $(to_us "$p99") $rps" >"$file"
  fi
}

# CPU time in jiffies (USER_HZ, 100 a second): the machine's busy and total
# time (/proc/stat), and a process's, all its threads (/proc/PID/stat).
cpu_now() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
spin_cpu() { local t=0 p; for p in "${spinners[@]}"; do t=$((t + $(proc_cpu $p))); done; echo $t; }
RUN=$OUT/runs
rm -rf "$RUN"; mkdir -p "$RUN"
for ((r = 1; r <= ROUNDS; r++)); do
  for s in "${SERVERS[@]}"; do
    # Each server's round (~25 s) also holds the build lock, so that no
    # compile of another job runs during it; other load is recorded below.
    exec 9>"$LOCK"; flock 9
    spinners=(); spin_used=0
    port=$(free_port)
    # shellcheck disable=SC2046
    "$OUT/$(build_of $s)_server" "$port" "$(threads_of $s)" $(args_of $s) >"$RUN/$s.$r.log" 2>&1 &
    spid=$!
    for _ in $(seq 100); do
      curl -sf -o /dev/null "http://127.0.0.1:$port/health" && break
      sleep 0.05
    done
    echo "round $r: $s on $port, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    cut -d' ' -f1 /proc/loadavg >"$RUN/$s.$r.load"
    wrk -t1 -c1 -d1s "http://127.0.0.1:$port/health" >/dev/null  # warm up
    wrkcpu=$RUN/$s.$r.wrkcpu; : >"$wrkcpu"
    read -r busy0 total0 < <(cpu_now); scpu0=$(proc_cpu $spid)
    wrk_run "$RUN/$s.$r.a" -t1 -c1 -d"${DURATION}s"
    if ((SPIN)); then
      for ((c = 0; c < $(nproc); c++)); do nice -n 19 bash -c 'while :; do :; done' & spinners+=($!); done
      spin_a=$(spin_cpu)
      wrk_run "$RUN/$s.$r.a2" -t1 -c1 -d"${DURATION}s"
      spin_b=$(spin_cpu)
      for p in "${spinners[@]}"; do kill $p; wait $p 2>/dev/null || true; done
      spin_used=$((spin_b - spin_a)); spinners=()
    else
      echo "0 - - 0" >"$RUN/$s.$r.a2"
    fi
    wrk_run "$RUN/$s.$r.b" -t2 -c8 -d"${DURATION}s"
    # (c): the holder sits on IDLE connections, each served one request and idle since
    python3 "$SRC/hold_idle.py" "$port" "$IDLE" >"$RUN/$s.$r.hold" 2>&1 < <(sleep 3600) &
    hpid=$!
    for _ in $(seq 200); do grep -q '^ready' "$RUN/$s.$r.hold" && break; sleep 0.05; done
    awk '/^VmRSS/ {print $2}' "/proc/$spid/status" >"$RUN/$s.$r.rss"   # KB, with IDLE connections open
    awk '/^Threads/ {print $2}' "/proc/$spid/status" >"$RUN/$s.$r.threads"
    wrk_run "$RUN/$s.$r.c" -t1 -c1 -d"${DURATION}s"
    hcpu=$(proc_cpu $hpid); scpu1=$(proc_cpu $spid)
    read -r busy1 total1 < <(cpu_now)
    # What the rest of the machine used during (a)-(c), % of all cores: the
    # busy time less this server's, wrk's, the holder's and the spinners'.
    awk -v b=$((busy1 - busy0 - spin_used)) -v t=$((total1 - total0)) -v s=$((scpu1 - scpu0)) -v h="$hcpu" \
      '{w += ($1 + $2) * 100} END {o = (b - s - h - w) / t * 100; printf "%.0f\n", o < 0 ? 0 : o}' \
      "$wrkcpu" >"$RUN/$s.$r.others"
    kill -TERM $hpid; wait $hpid || true
    kill -TERM $spid; wait $spid 2>/dev/null || true
    flock -u 9; exec 9>&-
  done
done

# --- report --------------------------------------------------------------------
col() { for ((r = 1; r <= ROUNDS; r++)); do awk -v c="$3" '{print $c}' "$RUN/$1.$r.$2"; done; }
med() { col "$@" | awk '$1 != "-"' | median; }
name_of() {
  case $1 in
    beast) echo "Boost.Beast $(awk '/define BOOST_LIB_VERSION/ {gsub(/"/,"",$3); print $3}' /usr/include/boost/version.hpp | tr _ .) (async, 1 io_context, $THREADS threads)" ;;
    beast-pt) echo "Boost.Beast, 1 io_context per thread ($THREADS)" ;;
    httplib) echo "cpp-httplib $(pkg-config --modversion cpp-httplib) (pool of $HTTPLIB_THREADS)" ;;
    h2o) echo "h2o $(dpkg-query -W -f '${Version}' libh2o-evloop-dev 2>/dev/null | cut -d+ -f1) (evloop, $THREADS threads)" ;;
  esac
}
{
  echo "Machine: $(nproc) cores, $(lscpu | awk -F: '/Model name/ {gsub(/^ +/,"",$2); print $2}'), $(uname -sr), $(g++ --version | head -1), $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
  echo "Rounds: $ROUNDS (medians), ${DURATION} s each. Other processes' CPU use during each server's rounds (% of the $(nproc) cores): $(for s in "${SERVERS[@]}"; do printf '%s %s; ' "$s" "$(col $s others 1 | tr '\n' ' ' | sed 's/ $//')"; done)"
  echo
  echo "| server | (a) 1 client p50 | (a) p99 | (a') p50, vCPUs kept awake | (b) 8 conns req/s | (b) p50 | (b) p99 | (c) beside $IDLE idle: p50 | (c) requests in ${DURATION} s | idle conns answered | RSS with $IDLE idle | compile (s) | binary (stripped) | -fno-exceptions |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  for s in "${SERVERS[@]}"; do
    c_p50=$(med $s c 2); [[ $c_p50 == - ]] && c_p50="no answer"; [[ $c_p50 != "no answer" ]] && c_p50="$c_p50 µs"
    answered=$(for ((r = 1; r <= ROUNDS; r++)); do sed -n 's/^ready answered=\([0-9]*\).*/\1/p' "$RUN/$s.$r.hold"; done | median)
    b=$(build_of $s)
    echo "| $(name_of $s) | $(med $s a 2) µs | $(med $s a 3) µs | $(med $s a2 2) µs | $(med $s b 4) | $(med $s b 2) µs | $(med $s b 3) µs | $c_p50 | $(med $s c 1) | $answered of $IDLE | $(( $(col $s rss 1 | median) / 1024 )) MB, $(col $s threads 1 | median) threads | ${compile_s[$b]} | $(( size_b[$b] / 1024 )) KB ($(( stripped_b[$b] / 1024 )) KB) | ${noexc[$b]} |"
  done
  echo
  echo "Shared libraries each binary loads beyond libc/libm/libstdc++/libgcc_s:"
  for s in "${BUILDS[@]}"; do echo "- $s: ${libs[$s]:-none}"; done
  echo
  echo "Each run (requests, p50 µs, p99 µs, req/s):"
  for s in "${SERVERS[@]}"; do
    for t in a a2 b c; do echo "- $s ($t): $(for ((r = 1; r <= ROUNDS; r++)); do printf '[%s] ' "$(cat "$RUN/$s.$r.$t")"; done)"; done
  done
} | tee "$OUT/report.md"
