#!/usr/bin/env bash
# `.ci/run` as a fresh machine runs it, on this one: a clean clone of a commit, an empty
# ccache (CCACHE_DIR), an empty pip cache (PIP_CACHE_DIR), no cached venv (MRCNN_VENV_CACHE)
# and empty container storage (a storage.conf of its own, named by CONTAINERS_STORAGE_CONF
# and MRCNN_STORAGE_CONF: no base image, no layer of an earlier build). Prints `.ci/run`'s
# own per-part minutes, then a table of them and of the container test's steps.
#
# What it cannot make fresh: Debian packages already installed on this machine stay
# installed (scripts/setup.sh and podman-setup.sh then skip apt-get; on a fresh machine of
# this kind those installs took about 30 s each, 2026-11-27), and the files the kernel caches.
#
# Usage: scripts/ci-fresh.sh [--commit REV] [--work DIR] [--keep] [--warm]
#   --commit REV  what to clone (default HEAD; the working tree's uncommitted changes are
#                 not in it)
#   --work DIR    where the clone, caches and container storage go (default
#                 /var/tmp/mrcnn-ci-fresh; the disk in use grew by up to 35 GB
#                 in the run of 2026-11-28 on f975b3a, so leave 40 free). Emptied first.
#   --keep        keep DIR afterwards (default: its container storage is reset and DIR removed)
#   --warm        the second run CI makes on a machine it already used: a new clone, but the
#                 ccache, pip cache, venvs and container storage a --keep run left in DIR
# Exits with `.ci/run`'s status. Needs root (rootful podman), like `.ci/run`.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

commit=HEAD work=/var/tmp/mrcnn-ci-fresh keep=0 warm=0
while (($#)); do
  case $1 in
    --commit) commit=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    --warm) warm=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "ci-fresh: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[ci-fresh] %s\n' "$*" >&2; }

rev=$(git -C "$top" rev-parse --verify "$commit^{commit}") || { log "no commit $commit"; exit 2; }

storage=$work/containers
# Not `podman system reset`: that also removes the machine's podman networks (CNI's files are
# not in the storage). Whatever overlay mounts are left under the storage go first.
reset_storage() {
  [[ -d $storage ]] || return 0
  awk -v root="$storage/" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n 1 umount -l || true
  rm -rf "$storage"
}
if ((warm)); then
  [[ -f $work/storage.conf && -d $work/ccache && -d $work/pip && -d $work/venvs ]] ||
    { log "--warm needs the caches of an earlier --keep run in $work"; exit 2; }
  log "warm: keeping $work's ccache ($(du -sh "$work/ccache" | cut -f1)), pip cache, venvs and container storage; a new clone"
  rm -rf "$work/main"
elif [[ -d $work ]]; then
  log "emptying $work"
  reset_storage
  rm -rf "$work"
fi
mkdir -p "$work/ccache" "$work/pip" "$work/venvs" "$storage/storage" "$storage/run"
git clone -q --no-hardlinks "$top" "$work/main"
git -C "$work/main" checkout -q "$rev"
printf '%s\n' "# scripts/ci-fresh.sh: container storage of its own, empty at the start" "[storage]" \
  'driver = "overlay"' "runroot = \"$storage/run\"" "graphroot = \"$storage/storage\"" >"$work/storage.conf"

state="all empty"
((warm == 0)) || state="kept from the last run"
export CCACHE_DIR=$work/ccache PIP_CACHE_DIR=$work/pip MRCNN_VENV_CACHE=$work/venvs
export CONTAINERS_STORAGE_CONF=$work/storage.conf MRCNN_STORAGE_CONF=$work/storage.conf
log "clone of $(git -C "$work/main" log -1 --format='%h %s' | cut -c1-80) in $work/main"
log "CCACHE_DIR=$CCACHE_DIR PIP_CACHE_DIR=$PIP_CACHE_DIR MRCNN_VENV_CACHE=$MRCNN_VENV_CACHE CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF ($state)"

status=0
SECONDS=0
log_file=$work/ci.log
((warm == 0)) || log_file=$work/ci-warm.log
(cd "$work/main" && bash .ci/run) 2>&1 | tee "$log_file" || status=${PIPESTATUS[0]}
total=$SECONDS

log "parts (as .ci/run printed them):"
grep -E '^\[ci\] ' "$log_file" | sed 's/^/  /' >&2 || true
log "container test steps:"
awk '/^\[test-containers\] steps:/ { on = 1; next } on && /^ +[0-9.]+ s  / { print "  " $0; next } on { on = 0 }' \
  "$log_file" >&2 || true
log "total $((total / 60)) min $((total % 60)) s, exit $status (log: $log_file)"

if ((keep == 0)); then
  reset_storage
  kept=${TMPDIR:-/tmp}/$(basename "$log_file" .log)-$rev.log
  cp "$log_file" "$kept"
  rm -rf "$work"
  log "removed $work; the log is kept as $kept"
fi
exit "$status"
