#!/usr/bin/env bash
# Run commands side by side; each line they print starts with its command's name. Waits for all of them, then prints
# each one's outcome and time; fails if any failed.
#
#   scripts/side-by-side.sh NAME 'COMMAND' NAME 'COMMAND' ...
#
# `make test` runs its two streams of tests with it (see the Makefile): on 2 cores, a Ray cluster starting trainers and
# actors leaves one core idle about 40 % of the time (each start-up step runs in one process), and the other stream,
# on a cluster of its own, uses it. Ctrl-C reaches every command (they stay in this terminal's process group), and each
# cluster script stops its cluster.
set -uo pipefail

[ $# -ge 2 ] && [ $(($# % 2)) = 0 ] || { echo "usage: $0 NAME 'COMMAND' [NAME 'COMMAND' ...]" >&2; exit 2; }
outcomes=$(mktemp)
trap 'rm -f "$outcomes"' EXIT
pids=()
while [ $# -ge 2 ]; do
  (
    name=$1 start=$(date +%s)
    bash -c "$2" 2>&1 | sed -u "s/^/[$name] /"
    status=$?
    minutes=$(awk -v s="$(($(date +%s) - start))" 'BEGIN { printf "%.1f", s / 60 }')
    if [ "$status" = 0 ]; then outcome="passed"; else outcome="FAILED (exit $status)"; fi
    echo "  $name: $outcome in $minutes min" >>"$outcomes"
    exit "$status"
  ) &
  pids+=($!)
  shift 2
done

failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
echo "side by side:"
cat "$outcomes"
exit "$failed"
