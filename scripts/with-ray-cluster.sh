#!/usr/bin/env bash
# Run a command against a small Ray cluster on this machine: a head node and one worker node.
#
#   scripts/with-ray-cluster.sh pytest ...      # start, run, stop (also when the command fails)
#   scripts/with-ray-cluster.sh start|stop      # keep a cluster up by hand; `source` prints the env
#
# The cluster keeps Ray's token authentication on, with a token of its own in .cluster/, uses
# its own temp folder and ports, and `stop` ends only the processes of this cluster (never
# `ray stop`, which would also end a learner's other Ray runtimes).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ray_bin="${RAY_BIN:-$root/.venv/bin/ray}"
port="${COURSE_RAY_PORT:-6389}"
cpus_per_node="${COURSE_RAY_CPUS_PER_NODE:-4}"  # 2 nodes x 4: a 2-worker trainer and a 2-actor pool fit
state="$root/.cluster"
temp_dir="/tmp/ray-course-$(id -u)-$(printf '%s' "$root" | cksum | cut -d' ' -f1)"

export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="$state/auth_token"
export RAY_ADDRESS="127.0.0.1:$port"
export RAY_USAGE_STATS_ENABLED=0
export RAY_TRAIN_HEALTH_CHECK_INTERVAL_S="${RAY_TRAIN_HEALTH_CHECK_INTERVAL_S:-0.2}"  # ray.train.report in 0.2 s, not 2 s

cluster_pids() {
  # Every process whose command line names this cluster's temp folder, and all their descendants.
  local pids children
  pids=$(pgrep -f -- "$temp_dir" || true)
  children=$pids
  while [ -n "$children" ]; do
    children=$(for p in $children; do pgrep -P "$p" || true; done)
    pids="$pids $children"
  done
  echo $pids
}

stop_cluster() {
  local pids
  pids=$(cluster_pids)
  [ -n "$pids" ] || return 0
  echo "[ray-cluster] stopping $(echo $pids | wc -w) processes of the cluster at $RAY_ADDRESS"
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 20); do
    pids=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done || true)
    [ -n "$pids" ] || return 0
    sleep 0.5
  done
  kill -KILL $pids 2>/dev/null || true
}

start_cluster() {
  if [ -n "$(cluster_pids)" ]; then
    echo "[ray-cluster] a cluster from this checkout is already running; stopping it first"
    stop_cluster
  fi
  mkdir -p "$state"
  if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    (umask 077 && "$root/.venv/bin/python" -c "import secrets; print(secrets.token_hex(32))" >"$RAY_AUTH_TOKEN_PATH")
  fi
  echo "[ray-cluster] starting a head node and a worker node ($cpus_per_node CPUs each) at $RAY_ADDRESS"
  "$ray_bin" start --head --port="$port" --num-cpus="$cpus_per_node" --temp-dir="$temp_dir" \
    --include-dashboard=false --dashboard-port=$((port + 1)) \
    --disable-usage-stats >"$state/head.log" 2>&1 || { cat "$state/head.log"; return 1; }
  "$ray_bin" start --address="$RAY_ADDRESS" --num-cpus="$cpus_per_node" --temp-dir="$temp_dir" \
    >"$state/worker.log" 2>&1 || { cat "$state/worker.log"; return 1; }
  "$root/.venv/bin/python" - <<'PY'
import ray
ray.init(logging_level="ERROR", log_to_driver=False)
nodes = [n for n in ray.nodes() if n["Alive"]]
print(f"[ray-cluster] up: {len(nodes)} nodes, {ray.cluster_resources().get('CPU', 0):.0f} CPUs, "
      f"{ray.cluster_resources().get('GPU', 0):.0f} GPUs")
assert len(nodes) == 2, "expected a head node and a worker node"
PY
}

case "${1:-}" in
  start) start_cluster
         echo "export RAY_ADDRESS=$RAY_ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH" ;;
  stop) stop_cluster ;;
  "") echo "usage: $0 start | stop | <command> [args...]" >&2; exit 2 ;;
  *)
    trap stop_cluster EXIT
    trap 'exit 130' INT TERM
    start_cluster
    "$@"
    ;;
esac
