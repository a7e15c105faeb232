#!/usr/bin/env bash
# `kitfox serve` against PostgreSQL 15 + pgvector over loopback: prepares a
# throwaway PostgreSQL cluster and two kitfox servers in a temporary
# directory, runs build-bench/bench/server_bench against them, and always
# stops both and removes the directory.
#
#   bash scripts/bench.sh server [OPTIONS]     builds build-bench/, then this
#   bash bench/server_bench.sh [OPTIONS]
#
# Options (the rest go to server_bench: --quick, --only LIST, --rows N, --requests N, --rounds N,
# --load-rows N, --no-load-index, --seconds S, --writers LIST, --recon-rows N, --recon-seconds S, --wait-quiet S, --out PATH;
# server_bench --help lists them all):
#   --build DIR      where kitfox and bench/server_bench are (default build-bench)
#   --kitfox PATH    the kitfox CLI to serve with (default DIR/kitfox)
#   --no-kitfox      PostgreSQL's half only (no kitfox server is started)
#   --threads N      the kitfox servers' --threads (default: the server's own)
#   --loops N        the kitfox servers' --loops (default: the server's own)
#   --dir PATH       where the temporary directory goes (default /tmp): both sides' data and the
#                    durable writes' fsyncs land on its file system
#   --pin            both servers (every thread and process, PostgreSQL's backends too) on the last
#                    CPU, this client on the others (taskset): a one-client round trip then always
#                    crosses CPUs, instead of landing on the same CPU or not as the scheduler places
#                    the two, which on this 2-CPU VM moves a p50 between about 10 and 85 µs.
#                    kitfox starts there, so its default event loops are sized for one CPU
#
# PostgreSQL: Debian's postgresql-15 (/usr/lib/postgresql/15/bin), a cluster made
# by initdb as the postgres user (when run as root), listening on 127.0.0.1 on a
# free port; clients connect over TCP, as kitfox's do. pgvector 0.8.6 is built
# from ../shared/peers/pgvector-0.8.6.tar.gz (in a temporary directory, never
# into the repository) and installed when vector.control is missing from
# PostgreSQL's extension directory; that needs postgresql-server-dev-15.
#
# kitfox: one server with --sync 250 (requests, loads, reconciliation; against
# synchronous_commit = off) and one with --sync always (durable writers;
# against synchronous_commit = on), each on its own file, started with
# --port 0 and read for the port they print.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build="build-bench"
kitfox=
no_kitfox=0
pin=0
threads=()
loops=()
dir=/tmp
pass=()
while (($# > 0)); do
  case $1 in
    --no-kitfox) no_kitfox=1 ;;
    --pin) pin=1 ;;
    --build | --kitfox | --threads | --loops | --dir)
      (($# >= 2)) || { echo "server_bench.sh: $1 needs a value" >&2; exit 2; }
      case $1 in
        --build) build=$2 ;;
        --kitfox) kitfox=$2 ;;
        --threads) threads=(--threads "$2") ;;
        --loops) loops=(--loops "$2") ;;
        --dir) dir=$2 ;;
      esac
      shift ;;
    *) pass+=("$1") ;;
  esac
  shift
done
kitfox=${kitfox:-$build/kitfox}
bench=$build/bench/server_bench

pg_bin=/usr/lib/postgresql/15/bin
pg_config=$pg_bin/pg_config
pgvector_tar=../shared/peers/pgvector-0.8.6.tar.gz
[[ -e $pgvector_tar ]] || pgvector_tar=/work/shared/peers/pgvector-0.8.6.tar.gz

[[ -x $bench ]] || { echo "server_bench.sh: no $bench: build $build with -DKITFOX_BENCH=ON, libpq-dev and libboost-dev (scripts/bench.sh server does)" >&2; exit 1; }
[[ -x $pg_bin/initdb ]] || { echo "server_bench.sh: no PostgreSQL 15 in $pg_bin: apt-get install postgresql-15" >&2; exit 1; }
if ((!no_kitfox)); then
  [[ -x $kitfox ]] || { echo "server_bench.sh: no kitfox CLI at $kitfox (or run with --no-kitfox)" >&2; exit 1; }
fi

# Runs a command as the postgres user when we are root (initdb refuses root).
as_pg() {
  if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi
}

# A TCP port no socket uses, below Linux's ephemeral range (checked, then
# used at once; the start is tried again on another port if it was taken).
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    if [[ -z $(ss -Hatn "sport = :$p") ]]; then echo "$p"; return 0; fi
  done
  echo "server_bench.sh: no free port found" >&2
  return 1
}

tmp=
pgdata=
kitfox_pids=()
cleanup() {
  local rc=$? pid i
  for pid in "${kitfox_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${kitfox_pids[@]}"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "server_bench.sh: kitfox server $pid did not stop on SIGTERM in 10 s: killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n $pgdata && -f $pgdata/postmaster.pid ]]; then
    as_pg "$pg_bin/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null || true
  fi
  [[ -n $tmp ]] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- pgvector
extdir=$("$pg_config" --sharedir)/extension
if [[ ! -f $extdir/vector.control ]]; then
  [[ -e $pgvector_tar ]] || { echo "server_bench.sh: pgvector is not installed and $pgvector_tar is missing" >&2; exit 1; }
  [[ -e $("$pg_config" --includedir-server)/postgres.h ]] || {
    echo "server_bench.sh: building pgvector needs the server headers: apt-get install postgresql-server-dev-15" >&2; exit 1; }
  src=$(mktemp -d)
  echo "server_bench.sh: building pgvector from $pgvector_tar in $src" >&2
  tar -xzf "$pgvector_tar" -C "$src"
  (cd "$src"/pgvector-* && flock /tmp/kitfox-build.lock make PG_CONFIG="$pg_config" >&2 && make PG_CONFIG="$pg_config" install >&2) ||
    { rm -rf "$src"; echo "server_bench.sh: pgvector failed to build" >&2; exit 1; }
  rm -rf "$src"
fi

# ---------------------------------------------------------------- PostgreSQL
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/kitfox-server-bench-XXXXXX")
chmod 711 "$tmp"
mkdir "$tmp/pg" "$tmp/kitfox"
((EUID == 0)) && chown postgres: "$tmp/pg"
pgdata=$tmp/pg/data
echo "server_bench.sh: PostgreSQL cluster in $pgdata" >&2
as_pg "$pg_bin/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --locale=C >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log" >&2; exit 1; }
# Enough shared buffers to hold every table and index of the run (kitfox keeps
# its data in memory too); max_wal_size so the loads meet no forced
# checkpoint; fsync, full_page_writes and the commit settings as shipped
# (each session sets synchronous_commit itself).
for attempt in 1 2 3 4 5; do
  pg_port=$(free_port)
  if as_pg "$pg_bin/pg_ctl" -D "$pgdata" -l "$tmp/pg/server.log" -w -t 60 \
    -o "-p $pg_port -k $tmp/pg -c listen_addresses=127.0.0.1 -c shared_buffers=2GB -c maintenance_work_mem=1GB -c max_wal_size=8GB -c max_connections=100" \
    start >/dev/null; then
    break
  fi
  if ((attempt == 5)) || ! grep -q "could not bind" "$tmp/pg/server.log"; then cat "$tmp/pg/server.log" >&2; exit 1; fi
  echo "server_bench.sh: port $pg_port was taken; another" >&2
  : >"$tmp/pg/server.log"
done
echo "server_bench.sh: PostgreSQL on 127.0.0.1:$pg_port" >&2
psql_do() { "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres "$@"; }
psql_do -d postgres -c "CREATE DATABASE bench"
psql_do -d bench -c "CREATE EXTENSION vector"
conninfo="host=127.0.0.1 port=$pg_port dbname=bench user=postgres"

# ---------------------------------------------------------------- kitfox
# start_kitfox NAME SYNC: starts `kitfox serve` on a file of its own and sets
# $url to the address it prints.
url=
serve_on=()  # --pin: the servers start on the last CPU, and size their threads for it
if ((pin)); then
  cpus=$(nproc)
  ((cpus >= 2)) || { echo "server_bench.sh: --pin needs at least 2 CPUs" >&2; exit 1; }
  last=$((cpus - 1))
  command -v taskset >/dev/null || { echo "server_bench.sh: --pin needs taskset (util-linux)" >&2; exit 1; }
  serve_on=(taskset -c "$last")
fi
start_kitfox() {
  local out=$tmp/kitfox/$1.out err=$tmp/kitfox/$1.err pid i
  : >"$out"
  ${serve_on[@]+"${serve_on[@]}"} "$kitfox" serve "$tmp/kitfox/$1.kitfox" --host 127.0.0.1 --port 0 --sync "$2" "${threads[@]}" "${loops[@]}" >"$out" 2>"$err" &
  pid=$!
  kitfox_pids+=("$pid")
  url=
  for ((i = 0; i < 300; i++)); do
    url=$(sed -n 's/^kitfox: serving .* at \(http:\/\/[^ ]*\)$/\1/p' "$out" | head -n 1) || url=
    [[ -n $url ]] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "server_bench.sh: '$kitfox serve' exited:" >&2; cat "$out" "$err" >&2; exit 1
    fi
    sleep 0.1
  done
  [[ -n $url ]] || { echo "server_bench.sh: '$kitfox serve' printed no address in 30 s:" >&2; cat "$out" "$err" >&2; exit 1; }
  echo "server_bench.sh: kitfox serve --sync $2 (pid $pid) at $url" >&2
}

args=(--pg "$conninfo" --dir "$tmp" --pg-bin "$pg_bin")
if ((no_kitfox)); then
  args+=(--no-kitfox)
else
  start_kitfox relaxed 250
  args+=(--kitfox "$url")
  start_kitfox durable always
  args+=(--kitfox-durable "$url" --kitfox-bin "$kitfox" ${threads[@]+--kitfox-threads "${threads[1]}"} ${loops[@]+--kitfox-loops "${loops[1]}"})
fi
args+=(--commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- core native CMakeLists.txt 2>/dev/null || echo ' with uncommitted changes')")

run=()
if ((pin)); then
  # The postmaster and what it has forked; backends forked later inherit it.
  pg_main=$(head -n 1 "$pgdata/postmaster.pid")
  for pid in "$pg_main" $(pgrep -P "$pg_main") ${kitfox_pids[@]+"${kitfox_pids[@]}"}; do
    taskset -a -p -c "$last" "$pid" >/dev/null
  done
  client_cpus=0
  ((last == 1)) || client_cpus="0-$((last - 1))"
  run=(taskset -c "$client_cpus")
  args+=(--placement "pinned: both servers on CPU $last, this client on CPU $client_cpus (server_bench.sh --pin)")
  echo "server_bench.sh: servers pinned to CPU $last, the client to $client_cpus" >&2
fi

${run[@]+"${run[@]}"} "$bench" "${args[@]}" ${pass[@]+"${pass[@]}"}
