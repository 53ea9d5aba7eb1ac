#!/usr/bin/env bash
# Run a command against a small Ray cluster on this machine: a head node and one worker node.
#
#   scripts/with-ray-cluster.sh pytest ...      # start, run, stop (also when the command fails)
#   scripts/with-ray-cluster.sh start|stop      # keep a cluster up by hand; `start` prints the env
#
# Both nodes listen on 127.0.0.1 only (scripts/local_cluster.py says how) and keep Ray's token
# authentication on, with a token of their own in .cluster/. The cluster has its own temp folder and
# ports; `stop` ends every process it started and nothing else (never `ray stop`, which would also end
# a learner's other Ray runtimes). A cluster started by hand is never stopped by a command run here.
#
# Settings: VENV (the environment to run Ray from, default .venv; a conda prefix works too),
# COURSE_RAY_PORT (default 6389), COURSE_RAY_CPUS_PER_NODE (default 4). The head node reports the GPUs this
# machine has; COURSE_RAY_WORKER_GPUS (default 0) makes the worker node report some (tests use it: a node that
# claims a GPU torch cannot see).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="${VENV:-$root/.venv}"
case "$venv" in /*) ;; *) venv="$(pwd)/$venv" ;; esac
python="$venv/bin/python"
port="${COURSE_RAY_PORT:-6389}"
cpus_per_node="${COURSE_RAY_CPUS_PER_NODE:-4}"  # 2 nodes x 4: a 2-worker trainer and a 2-actor pool fit
worker_gpus="${COURSE_RAY_WORKER_GPUS:-0}"
state="$root/.cluster"
temp_dir="/tmp/ray-course-$(id -u)-$(printf '%s:%s' "$root" "$port" | cksum | cut -d' ' -f1)"

export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="$state/auth_token"
export RAY_ADDRESS="127.0.0.1:$port"
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  # keep 127.0.0.1 as it is (Ray would swap in the LAN address)
export RAY_USAGE_STATS_ENABLED=0
export RAY_TRAIN_HEALTH_CHECK_INTERVAL_S="${RAY_TRAIN_HEALTH_CHECK_INTERVAL_S:-0.2}"  # ray.train.report in 0.2 s, not 2 s
export RAY_TRAIN_ENABLE_PREEMPTION_WATCHER="${RAY_TRAIN_ENABLE_PREEMPTION_WATCHER:-0}"  # no spot instances here

say() { echo "[ray-cluster] $*"; }

cluster_pids() {
  # Every process whose command line names this cluster's temp folder, and all their descendants
  # (Ray's agents rename themselves, so they are found as children of the raylets).
  local pids children
  pids=$(pgrep -f -- "$temp_dir" || true)
  children=$pids
  while [ -n "$children" ]; do
    children=$(for p in $children; do pgrep -P "$p" || true; done)
    pids="$pids $children"
  done
  echo $pids
}

alive_pids() {
  # Those of the given processes still running (a zombie has ended: it only waits to be reaped).
  for p in "$@"; do
    kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && echo "$p"
  done || true
}

stop_cluster() {
  local pids
  pids=$(cluster_pids)
  [ -n "$pids" ] || return 0
  say "stopping $(echo $pids | wc -w) processes of the cluster at $RAY_ADDRESS"
  kill -TERM $pids 2>/dev/null || true
  for signal in TERM KILL; do
    if [ "$signal" = KILL ]; then kill -KILL $pids 2>/dev/null || true; fi
    for _ in $(seq 20); do
      pids=$(alive_pids $pids)
      [ -n "$pids" ] || return 0
      sleep 0.5
    done
  done
  say "these processes would not stop: $pids" >&2
  return 1
}

port_busy() {
  "$python" -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free for Ray
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)' "$1"
}

check_free() {
  # Refuse, with the fix, rather than stop a learner's cluster or fail deep inside Ray.
  if [ -n "$(cluster_pids)" ]; then
    say "a cluster from this checkout is already running at $RAY_ADDRESS (started by hand?); it is left alone." >&2
    say "Stop it with \`scripts/with-ray-cluster.sh stop\`, or use another port: COURSE_RAY_PORT=$((port + 10)) make ..." >&2
    return 1
  fi
  for p in "$port" "$((port + 1))"; do
    if port_busy "$p"; then
      say "port $p on 127.0.0.1 is in use by another program. Choose other ports with COURSE_RAY_PORT" >&2
      say "(it uses that port and the next one), for example: COURSE_RAY_PORT=$((port + 10)) make ..." >&2
      return 1
    fi
  done
}

start_cluster() {
  if [ ! -x "$python" ]; then
    say "no Python at $python: run \`make setup\`, or set VENV to the environment that has the course installed" >&2
    return 1
  fi
  mkdir -p "$state"
  if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    (umask 077 && "$python" -c "import secrets; print(secrets.token_hex(32))" >"$RAY_AUTH_TOKEN_PATH")
  fi
  say "starting a head node and a worker node ($cpus_per_node CPUs each) at $RAY_ADDRESS from $venv"
  "$python" "$root/scripts/local_cluster.py" --port "$port" --cpus-per-node "$cpus_per_node" \
    --worker-gpus "$worker_gpus" --temp-dir "$temp_dir" >"$state/start-$port.log" 2>&1 || { cat "$state/start-$port.log" >&2; return 1; }
  grep '^\[ray-cluster\]' "$state/start-$port.log"
}

case "${1:-}" in
  start)
    if [ -n "$(cluster_pids)" ]; then
      say "already running at $RAY_ADDRESS"
    else
      check_free
      start_cluster || { stop_cluster; exit 1; }
    fi
    echo "export RAY_ADDRESS=$RAY_ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0"
    ;;
  stop) stop_cluster ;;
  "") echo "usage: $0 start | stop | <command> [args...]" >&2; exit 2 ;;
  *)
    check_free
    trap stop_cluster EXIT
    trap 'exit 130' INT TERM
    start_cluster
    "$@"
    ;;
esac
