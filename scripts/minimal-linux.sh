#!/usr/bin/env bash
# A rehearsal of the course on minimal Linux, as in a slim container: a Debian minbase root (no procps: no `ps`, no
# `pgrep`), a fresh clone of this checkout in it, `make setup`, `make data` and lesson 00 through the local cluster
# script, then a look at /proc for anything of that root still running, and at its listening sockets while it ran.
# The data sets this checkout has built (`make test` builds them first) are copied into the clone: `make data` keeps
# what exists, and building them again, the same way, would add a minute of pretraining and test nothing new.
#
#   scripts/minimal-linux.sh             # `make minimal-linux`; CI runs it after `make test` (.ci/run)
#   scripts/minimal-linux.sh --prepare   # only build the root (debootstrap), if it is not there yet: CI does it
#                                        # while `make test` runs, since it mostly waits on the network and the disk
#
# Needs root (debootstrap, chroot, mounts), debootstrap, Debian's archive, and a Python the course supports built for
# this machine (COURSE_MINIMAL_PYTHON, else the newest pyenv CPython 3.11 to 3.13). The root is this machine's Debian
# release, so that Python finds the libraries it was built against; it is given to the root read-only, as a Python
# a learner installed, since Debian 12's own python3 (3.11.2) is older than the course's 3.11.5. The mounts live in a
# mount namespace of their own (`unshare --mount`): they go when the rehearsal ends, whatever happens. Where the
# rehearsal cannot run, it says why, prints SKIPPED, and exits 0; when it runs, any failure or leftover exits 1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Its COURSE_* settings, read and checked as the course reads them (course/settings.py): a wrong value stops here.
settings_python="$repo/.venv/bin/python"; [ -x "$settings_python" ] || settings_python=python3
settings=$("$settings_python" -S "$repo/course/settings.py" shell COURSE_MINIMAL_ROOT COURSE_DEBIAN_MIRROR \
  COURSE_MINIMAL_PYTHON) || exit 2
eval "$settings"
base=$COURSE_MINIMAL_ROOT
mirror=$COURSE_DEBIAN_MIRROR
log="$repo/results/minimal-linux"
say() { echo "[minimal-linux] $*"; }
skip() { say "SKIPPED: $*"; exit 0; }

[ "$(uname -s)" = Linux ] || skip "a Debian root needs Linux"
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mounts): sudo make minimal-linux"
command -v debootstrap >/dev/null || skip "needs debootstrap: apt-get install debootstrap"
command -v unshare >/dev/null || skip "needs unshare (util-linux)"
release=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$release" ] || skip "not a Debian-like system: no VERSION_CODENAME in /etc/os-release"
mkdir -p "$log"
if [ ! -e "$base/.course-minbase" ]; then
  say "building a Debian $release minbase root in $base (debootstrap --variant=minbase; a few minutes, once)"
  rm -rf "$base"
  debootstrap --variant=minbase --include=make,git,ca-certificates "$release" "$base" "$mirror" \
    >"$log/debootstrap.log" 2>&1 || { tail -5 "$log/debootstrap.log"; skip "debootstrap failed (no access to $mirror?)"; }
  touch "$base/.course-minbase"
fi
if [ "${1:-}" = --prepare ]; then say "the root is ready in $base"; exit 0; fi
python=$COURSE_MINIMAL_PYTHON
if [ -z "$python" ] && [ -x "$repo/.venv/bin/python" ]; then  # the Python the course was just set up and tested with
  python=$("$repo/.venv/bin/python" -c 'import os, sys; print(os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2]))')
fi
if [ -z "$python" ]; then
  pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in $(ls -d "$pyenv_root"/versions/3.1[123].* 2>/dev/null | sort -V -r); do
    exe="$candidate/bin/python${candidate##*/versions/}"; exe="${exe%.*}"
    [ -x "$exe" ] && "$exe" "$repo/scripts/check_python.py" --venv 2>/dev/null && { python=$exe; break; }
  done
fi
[ -n "$python" ] && [ -x "$python" ] && "$python" "$repo/scripts/check_python.py" --venv >/dev/null 2>&1 \
  || skip "no Python for the root: set COURSE_MINIMAL_PYTHON to a CPython 3.11.5 to 3.13 built on this machine"
prefix=$("$python" -c 'import sys; print(sys.base_prefix)')

if chroot "$base" /bin/sh -c 'command -v ps || command -v pgrep' >/dev/null; then
  say "the root has procps: it is no rehearsal of a slim image" >&2
  exit 1
fi

say "a fresh clone of $(git -C "$repo" rev-parse --short HEAD) in $base/course; Python $("$python" -V 2>&1 | cut -d' ' -f2) from $prefix"
rm -rf "$base/course"
git clone --quiet "$repo" "$base/course"
[ -d "$repo/data" ] && cp -a "$repo/data/." "$base/course/data/"
mkdir -p "$base$prefix" "$base/opt/wheels" "$base/root/.cache/uv" "$base/dev" "$base/proc" "$base/sys"

# Inside a mount namespace: the mounts, then the learner's commands in the root with a clean environment. The pip wheel
# folder and uv's cache are this machine's (the package index is the same; they only save downloads).
start=$(date +%s)
set +e
unshare --mount --propagation private -- /bin/bash -c '
  set -e
  base=$1 prefix=$2 python=$3
  mount -t proc proc "$base/proc"
  mount -t sysfs sys "$base/sys"
  mount -t tmpfs -o mode=755 dev "$base/dev"
  for node in null zero random urandom tty full; do touch "$base/dev/$node"; mount --bind "/dev/$node" "$base/dev/$node"; done
  mkdir -p "$base/dev/shm" "$base/dev/pts"
  mount -t tmpfs -o mode=1777,size=4g shm "$base/dev/shm"
  mount --bind "$prefix" "$base$prefix" && mount -o remount,bind,ro "$base$prefix"
  [ -d /opt/wheels ] && mount --bind /opt/wheels "$base/opt/wheels"
  [ -d "$HOME/.cache/uv" ] && mount --bind "$HOME/.cache/uv" "$base/root/.cache/uv"
  cp /etc/resolv.conf "$base/etc/resolv.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$base/etc/ssl/certs/ca-certificates.crt"  # this machine'"'"'s trust (a proxy'"'"'s CA)
  exec chroot "$base" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    PIP_FIND_LINKS=/opt/wheels PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    /bin/bash -c "cd /course && make setup PYTHON=$python && make data \
      && scripts/with-ray-cluster.sh .venv/bin/python scripts/run_course.py notebooks/00_ray_core.ipynb"
' sh "$base" "$prefix" "$python" >"$log/run.log" 2>&1 &
runner=$!
# While it runs: the root's processes listening beyond loopback (its kernels and cluster)
wide=""
while kill -0 "$runner" 2>/dev/null; do
  for pid_root in /proc/[0-9]*/root; do
    [ "$(readlink "$pid_root" 2>/dev/null)" = "$base" ] || continue
    pid=${pid_root#/proc/}; pid=${pid%/root}
    for inode in $(ls -l "/proc/$pid/fd" 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\]$/\1/p'); do
      # /proc/net/tcp{,6}: state 0A is LISTEN; a local address of all zeros is every interface
      line=$(grep -h " $inode " /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" {print $2}' | head -1)
      case "$line" in 0100007F:*|00000000000000000000000001000000:*|0000000000000000FFFF00000100007F:*|"") ;;
        *) wide="$wide $pid:$line" ;; esac
    done
  done
  sleep 2
done
wait "$runner"; status=$?
set -e
tail -15 "$log/run.log"
say "$( [ $status = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s (the whole output: $log/run.log)"

left=""
for pid_root in /proc/[0-9]*/root; do
  if [ "$(readlink "$pid_root" 2>/dev/null)" = "$base" ]; then
    pid=${pid_root#/proc/}; pid=${pid%/root}
    left="$left $pid($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60))"
    kill -KILL "$pid" 2>/dev/null || true
  fi
done
[ -z "$left" ] || say "still running in the root after the course said it stopped:$left" >&2
[ -z "$wide" ] || say "listening beyond 127.0.0.1 in the root (pid:address:port in hex):$(echo "$wide" | tr ' ' '\n' | sort -u | tr '\n' ' ')" >&2
[ $status = 0 ] && [ -z "$left" ] && [ -z "$wide" ]
