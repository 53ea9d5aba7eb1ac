#!/usr/bin/env bash
# Run a command against a small Ray cluster on this machine: a head node and one worker node.
#
#   scripts/with-ray-cluster.sh pytest ...      # start, run, stop (also when the command fails)
#   scripts/with-ray-cluster.sh start|stop      # keep a cluster up by hand; `start` prints the env
#   scripts/with-ray-cluster.sh node stop|start|status   # the node a lesson may lose (02c): it leaves, it comes back
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
#
# `node stop` stops the cluster's worker node as `ray stop` would stop it (SIGTERM: its raylet tells the head that it
# leaves, and the head marks it dead at once); `node start` starts it again. Where the worker node is the only one with
# CPUs (COURSE_RAY_ISOLATED_NODE=1), the node a lesson may lose is a second one, as isolated, that `node start` adds.
#
# COURSE_RAY_ISOLATED_NODE=1 (`make test` sets it) makes the worker node one that shares no files with this checkout,
# as a node of a real cluster: it runs in a mount namespace of its own (`unshare --mount`, which needs root) where the
# checkout, with data/ and results/, is an empty read-only folder; its Python has the locked packages but not the
# course's (`helpers` reaches it only through the job's runtime env); it has its own temp folder. The head keeps no
# CPUs, so every Ray Train worker, Ray Data task and actor that needs a CPU runs on that node. Data and storage are in
# a folder outside the checkout that both nodes see (COURSE_DATA_DIR, COURSE_STORAGE_PATH; `make data` publishes the
# data there), removed when the cluster stops. Where a mount namespace cannot be made, it says so and starts the
# usual worker node (COURSE_RAY_ISOLATED_NODE_UP=0 then tells the tests).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="${VENV:-$root/.venv}"
case "$venv" in /*) ;; *) venv="$(pwd)/$venv" ;; esac
python="$venv/bin/python"
# The COURSE_* settings above, read and checked as the course reads them (declared in course/settings.py, which needs
# only the standard library): a wrong value stops here, with the fix.
settings_python="$python"; [ -x "$settings_python" ] || settings_python=python3
settings=$("$settings_python" -S "$root/course/settings.py" shell COURSE_RAY_PORT COURSE_RAY_CPUS_PER_NODE \
  COURSE_RAY_WORKER_GPUS COURSE_RAY_ISOLATED_NODE COURSE_RESULTS_DIR COURSE_TRACKING_URI) || exit 2
eval "$settings"
port=$COURSE_RAY_PORT
cpus_per_node=$COURSE_RAY_CPUS_PER_NODE  # 2 nodes x 4 by default: a 2-worker trainer and a 2-actor pool fit
worker_gpus=$COURSE_RAY_WORKER_GPUS
isolated=$COURSE_RAY_ISOLATED_NODE
state="$root/.cluster"
temp_dir="/tmp/ray-course-$(id -u)-$(printf '%s:%s' "$root" "$port" | cksum | cut -d' ' -f1)"
node_dir="$temp_dir-node"  # the isolated node's own temp folder (its name starts with temp_dir's: `stop` finds it)
shared="$temp_dir-shared"  # what both nodes see when the worker node is isolated: data/ and results/
spare_dir="$temp_dir-spare"  # beside an isolated worker node: the node `node stop` stops, `node start` adds

export COURSE_RAY_TEMP_DIR="$temp_dir"  # every process of the cluster names it (tests/support/ports.py finds them by it)
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="$state/auth_token"
export RAY_ADDRESS="127.0.0.1:$port"
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  # keep 127.0.0.1 as it is (Ray would swap in the LAN address)
export RAY_USAGE_STATS_ENABLED=0
export RAY_TRAIN_HEALTH_CHECK_INTERVAL_S="${RAY_TRAIN_HEALTH_CHECK_INTERVAL_S:-0.2}"  # ray.train.report in 0.2 s, not 2 s
export RAY_TRAIN_ENABLE_PREEMPTION_WATCHER="${RAY_TRAIN_ENABLE_PREEMPTION_WATCHER:-0}"  # no spot instances here
export RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S="${RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S:-300}"  # a placement group's wait for CPUs (course/cluster.py)
# Ray Tune warns when its own bookkeeping of a report takes over 0.5 s ("... may be a performance bottleneck"): on a
# laptop whose cores train several trials at once, it does, and the warning says nothing about the lesson. 5 s here.
export TUNE_WARN_THRESHOLD_S="${TUNE_WARN_THRESHOLD_S:-5}"
# Idle workers stay (Ray keeps up to one per CPU of a node, with what its tasks left in memory): a soft limit of 1
# (RAY_num_workers_soft_limit) saved memory in notebook 03 on the real sources, but then every batch of tasks starts
# its worker processes one after another on 2 cores, and notebook 00's eight half-second tasks no longer ran side by
# side (its headline fell under its floor in a rehearsal). Lessons first.
# Spilling: Ray Data writes blocks that do not fit the object store (local_cluster.object_store_bytes) to disk, and
# reads them back, with worker processes of their own that stay for the rest of the cluster's life (4 of each kind per
# node by default: 1 GB after notebook 03 on the real sources). One of each kind per node is enough here.
export RAY_max_io_workers="${RAY_max_io_workers:-1}"

say() { echo "[ray-cluster] $*"; }

python_pids() {
  # The processes psutil finds by the Python test in $1 (over `process`, its command line `line`, and `folder`, the
  # cluster's temp folder), and all their descendants.
  "$python" -c '
import os, sys
import psutil
test, folder, found, children = sys.argv[1], sys.argv[2], set(), {}
for process in psutil.process_iter(["ppid", "cmdline"]):
    line = " ".join(process.info["cmdline"] or [])
    if eval(test):
        found.add(process.pid)
    children.setdefault(process.info["ppid"], []).append(process.pid)
found.discard(os.getpid())  # this very process names the folder too
todo = list(found)
while todo:
    for child in children.get(todo.pop(), []):
        if child not in found:
            found.add(child)
            todo.append(child)
print(" ".join(map(str, sorted(found))))' "$1" "$temp_dir"
}

cluster_pids() {
  # Every process whose command line names this cluster's temp folder, and all their descendants (Ray's agents rename
  # themselves, so they are found as children of the raylets). Read with psutil, which Ray needs and installs: minimal
  # Linux images (Debian's minbase, python:3.X-slim) have no pgrep or ps. Without the environment's Python (removed
  # after the cluster started), pgrep where there is one.
  if [ -x "$python" ]; then
    python_pids 'folder in line'
    return 0  # an explicit status: a bare `return` in the EXIT trap returns the status the trap started with (130)
  fi
  command -v pgrep >/dev/null || { say "cannot look for the cluster's processes: no $python and no pgrep" >&2; return 0; }
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
  [ -n "$pids" ] || { remove_isolated_folders; return 0; }
  say "stopping $(echo $pids | wc -w) processes of the cluster at $RAY_ADDRESS"
  kill -TERM $pids 2>/dev/null || true
  for signal in TERM KILL; do
    if [ "$signal" = KILL ]; then kill -KILL $pids 2>/dev/null || true; fi
    for _ in $(seq 20); do
      pids=$(alive_pids $pids)
      [ -n "$pids" ] || { remove_isolated_folders; return 0; }
      sleep 0.5
    done
  done
  say "these processes would not stop: $pids" >&2
  return 1
}

launch_tracking() {
  # MLflow's tracking server, for the runs the lessons log (course/tracking.py): a worker node of a real cluster shares
  # no files with this machine, so the workers log over HTTP to a server every node reaches. On 127.0.0.1, on a free
  # port, with its SQLite store and artifacts in the results folder (results/mlflow, where `make mlflow` reads them),
  # or, beside an isolated worker node, in the shared folder removed with the cluster (the tests' runs). Its command
  # line names the cluster's temp folder: `stop` ends it with the rest. A tracking URI you set is left as it is.
  # Launched before the nodes start and awaited after (await_tracking): its start-up (7 to 9 s on 2 busy cores, the
  # SQLite store's tables included) overlaps theirs.
  tracking_uri="" tracking_pid=""
  if [ -n "${MLFLOW_TRACKING_URI:-}" ] || [ -n "$COURSE_TRACKING_URI" ]; then
    say "MLflow: the runs go to ${MLFLOW_TRACKING_URI:-$COURSE_TRACKING_URI} (yours; no tracking server started)"
    return 0
  fi
  tracking_store="${COURSE_RESULTS_DIR:-$root/results}/mlflow"
  [ "$isolated" = 1 ] && tracking_store="$shared/mlflow"
  mkdir -p "$tracking_store/artifacts"
  local tracking_port
  tracking_port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # `python -c` with the temp folder as its first argument, then MLflow's own command line: `mlflow server ...`. No
  # job execution (MLflow 3's GenAI jobs, which the course does not use): it starts several worker processes of its own.
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false "$python" -c 'import sys; from mlflow.cli import cli; sys.argv = ["mlflow", *sys.argv[2:]]; cli()' "$temp_dir" \
    server --host 127.0.0.1 --port "$tracking_port" --workers 1 --backend-store-uri "sqlite:///$tracking_store/mlflow.db" \
    --artifacts-destination "$tracking_store/artifacts" >"$state/mlflow-$port.log" 2>&1 </dev/null &
  tracking_pid=$! tracking_uri="http://127.0.0.1:$tracking_port"
}

await_tracking() {
  [ -n "$tracking_uri" ] || return 0
  export COURSE_TRACKING_URI="$tracking_uri"  # if it never answers, the lessons say in one line that tracking is off
  for _ in $(seq 240); do
    if "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=1)' \
      "$tracking_uri" 2>/dev/null; then
      echo "$tracking_uri" >"$state/tracking-$port"  # for `start`'s export line
      say "MLflow's tracking server and UI: $tracking_uri (store in $tracking_store)"
      return 0
    fi
    kill -0 "$tracking_pid" 2>/dev/null || break  # it stopped: no use waiting
    sleep 0.5
  done
  say "MLflow's tracking server did not answer at $tracking_uri ($state/mlflow-$port.log): the lessons will not track" >&2
}

remove_isolated_folders() {
  rm -f "$state/tracking-$port"
  rm -rf "$node_dir" "$node_dir-venv" "$spare_dir" "$spare_dir-venv" "$shared" 2>/dev/null || true
}

leaving_node_pids() {
  # The processes of the node `node stop` stops: beside an isolated worker node, the spare one (its own temp folder);
  # else the worker node's raylet (it names the cluster's temp folder, not --head) and its children.
  if [ -d "$node_dir" ]; then
    python_pids 'folder + "-spare" in line'
  else
    python_pids '"raylet" in line and folder in line and "--head" not in line and folder + "-" not in line'
  fi
}

node_command() {
  local pids
  case "$1" in
    status) if [ -n "$(leaving_node_pids)" ]; then echo up; else echo down; fi ;;
    stop)
      pids=$(leaving_node_pids)
      [ -n "$pids" ] || { say "no worker node to stop at $RAY_ADDRESS"; return 0; }
      # As `ray stop` does: the raylet first, which tells the head that its node leaves and stops its agents and workers
      # (its agents stopped first, it would report them failed); then whatever is left.
      raylet=$("$python" -c 'import sys, psutil; print(" ".join(a for a in sys.argv[1:] if psutil.Process(int(a)).name() == "raylet"))' $pids 2>/dev/null || true)
      for signal in TERM TERM KILL; do
        kill -$signal ${raylet:-$pids} 2>/dev/null || true
        for _ in $(seq 40); do
          pids=$(alive_pids $pids)
          [ -n "$pids" ] || break 2
          sleep 0.25
        done
        raylet=""  # the next round: every process still there
      done
      say "stopped a worker node of the cluster at $RAY_ADDRESS"
      ;;
    start)
      [ -z "$(leaving_node_pids)" ] || { say "the worker node is already up at $RAY_ADDRESS"; return 0; }
      if [ -d "$node_dir" ]; then
        start_isolated_node "$spare_dir" spare
      else
        local store
        store=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import local_cluster; print(local_cluster.object_store_bytes())' "$root/scripts")
        "$python" "$root/scripts/cluster_node.py" --port "$port" --cpus "$cpus_per_node" --gpus "$worker_gpus" \
          --object-store-bytes "$store" --temp-dir "$temp_dir" --shares-files >"$state/node-$port.log" 2>&1 \
          || { cat "$state/node-$port.log" >&2; return 1; }
        grep '^\[ray-cluster\]' "$state/node-$port.log"
      fi
      ;;
    *) echo "usage: $0 node stop | start | status" >&2; return 2 ;;
  esac
}

can_isolate() {
  command -v unshare >/dev/null && unshare --mount --propagation private true 2>/dev/null
}

start_isolated_node() {
  # The worker node of a real cluster, on this machine: see the header. The venv is bound to a path outside the
  # checkout, the course's editable install is blanked out, the checkout is covered; then the node starts. Its folder
  # ($1, default $node_dir) and log's name ($2, default node) tell it from the spare node that `node start` adds.
  local cpus=$((cpus_per_node * 2)) store node_dir="${1:-$node_dir}" log="$state/${2:-node}-$port.log"
  store=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import local_cluster; print(local_cluster.object_store_bytes())' "$root/scripts")
  mkdir -p "$node_dir" "$node_dir-venv"
  cp "$root/scripts/cluster_node.py" "$node_dir/cluster_node.py"
  (umask 077 && cp "$RAY_AUTH_TOKEN_PATH" "$node_dir/auth_token")
  RAY_AUTH_TOKEN_PATH="$node_dir/auth_token" unshare --mount --propagation private -- /bin/sh -c '
    set -e
    venv=$1 view=$2 root=$3 node=$4; shift 4
    mount --bind "$venv" "$view"
    for f in "$view"/lib/python3*/site-packages/__editable__*vit_ray_course*; do
      [ -e "$f" ] && mount --bind /dev/null "$f"
    done
    mount -t tmpfs -o ro,size=4k,mode=755 course-checkout-hidden "$root"
    cd "$node"
    exec "$view/bin/python" "$node/cluster_node.py" "$@"
  ' sh "$venv" "$node_dir-venv" "$root" "$node_dir" --port "$port" --cpus "$cpus" --gpus "$worker_gpus" \
    --object-store-bytes "$store" --temp-dir "$node_dir" >"$log" 2>&1 \
    || { cat "$log" >&2; return 1; }
  grep '^\[ray-cluster\]' "$log"
}

publish_shared_data() {
  # Data and storage that both nodes see, outside the checkout; `make data` publishes the built data sets there.
  mkdir -p "$shared/results"
  export COURSE_DATA_DIR="$shared/data" COURSE_STORAGE_PATH="$shared/results"
  (cd "$root" && "$python" -m course.build) >"$state/publish-$port.log" 2>&1 || { cat "$state/publish-$port.log" >&2; return 1; }
  say "shared storage: data in $COURSE_DATA_DIR, results in $COURSE_STORAGE_PATH"
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
  if [ "$isolated" = 1 ] && ! can_isolate; then
    say "cannot make a mount namespace here (unshare --mount needs root): the worker node shares this checkout" >&2
    isolated=0
  fi
  export COURSE_RAY_ISOLATED_NODE_UP="$isolated"
  if [ "$isolated" = 1 ]; then
    say "starting a head node (no CPUs) and a worker node that shares no files ($((cpus_per_node * 2)) CPUs) at $RAY_ADDRESS"
    publish_shared_data
    launch_tracking
    "$python" "$root/scripts/local_cluster.py" --port "$port" --cpus-per-node "$cpus_per_node" --head-only \
      --temp-dir "$temp_dir" >"$state/start-$port.log" 2>&1 || { cat "$state/start-$port.log" >&2; return 1; }
    grep '^\[ray-cluster\]' "$state/start-$port.log"
    start_isolated_node
    await_tracking
    return
  fi
  say "starting a head node and a worker node ($cpus_per_node CPUs each) at $RAY_ADDRESS from $venv"
  launch_tracking
  "$python" "$root/scripts/local_cluster.py" --port "$port" --cpus-per-node "$cpus_per_node" \
    --worker-gpus "$worker_gpus" --temp-dir "$temp_dir" >"$state/start-$port.log" 2>&1 || { cat "$state/start-$port.log" >&2; return 1; }
  grep '^\[ray-cluster\]' "$state/start-$port.log"
  await_tracking
}

case "${1:-}" in
  start)
    if [ -n "$(cluster_pids)" ]; then
      say "already running at $RAY_ADDRESS"
    else
      check_free
      start_cluster || { stop_cluster; exit 1; }
    fi
    shared_env=""
    if [ -d "$node_dir" ]; then shared_env=" COURSE_DATA_DIR=$shared/data COURSE_STORAGE_PATH=$shared/results"; fi
    if [ -s "$state/tracking-$port" ]; then shared_env="$shared_env COURSE_TRACKING_URI=$(cat "$state/tracking-$port")"; fi
    echo "export RAY_ADDRESS=$RAY_ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0$shared_env"
    ;;
  stop) stop_cluster ;;
  node)
    [ -n "$(cluster_pids)" ] || { say "no cluster of this checkout at $RAY_ADDRESS: start one first" >&2; exit 1; }
    node_command "${2:-}"
    ;;
  "") echo "usage: $0 start | stop | node stop|start|status | <command> [args...]" >&2; exit 2 ;;
  *)
    check_free
    # Stop the cluster however the command ends; a second Ctrl-C does not cut the cleanup short.
    trap 'trap "" INT TERM; stop_cluster' EXIT
    trap 'exit 130' INT TERM
    start_cluster
    "$@"
    ;;
esac
