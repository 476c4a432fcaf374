#!/usr/bin/env bash
# The real launchers driving `entrypoint train` as users run it (issue: torchrun, Slurm, Open
# MPI): installs Open MPI, Slurm and munge from Debian if missing, starts a local single-node
# Slurm (scripts/launchers/local-slurm.sh), runs every case of
# scripts/launchers/launcher_cases.py (each a real 2-process CPU training job, timed and
# checked), and stops the daemons it started. Needs the build and .venv of scripts/setup.sh
# (scripts/test.sh runs it first in CI). Exits non-zero when a case fails.
#   MRCNN_LAUNCHER_CASES=a,b   only these cases (names in launcher_cases.py)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
log() { printf '[launchers] %s\n' "$*"; }

packages=(openmpi-bin slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for exe in build/bin/entrypoint build/bin/trainer .venv/bin/torchrun; do
  [[ -x $exe ]] || { log "$exe is missing: run scripts/setup.sh first"; exit 1; }
done

work=$top/build-launchers
rm -rf "$work"
mkdir -p "$work"
state=$work/slurm
# Slurm's daemons run as root here and must be stopped whatever happens below.
stop_slurm() { bash "$top/scripts/launchers/local-slurm.sh" stop "$state" || true; }
trap stop_slurm EXIT
SECONDS=0
eval "$(bash "$top/scripts/launchers/local-slurm.sh" start "$state")"
log "local Slurm up in ${SECONDS} s (SLURM_CONF=$SLURM_CONF)"

status=0
SLURM_CONF=$SLURM_CONF "$top/.venv/bin/python" "$top/scripts/launchers/launcher_cases.py" \
  --work "$work" --only "${MRCNN_LAUNCHER_CASES:-}" || status=1
if ((status)); then
  log "FAILED; logs in $work"
else
  log "all cases passed in ${SECONDS} s"
  rm -rf "$work/shapes" "$work"/*/dump
fi
exit $status
