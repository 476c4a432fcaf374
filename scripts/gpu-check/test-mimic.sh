#!/usr/bin/env bash
# Proves, without a GPU, that scripts/gpu-check.sh builds the project on a bare GPU host
# (no -dev packages, no network): runs it in the GPU-host mimic (localhost/mrcnn-gpu-mimic:
# Debian minbase + compiler + Python, pip's CMake/Ninja, no -dev packages, no network), on a
# copy of what goes to such a host (the working tree's tracked and untracked-not-ignored
# files) plus .gpu-deps/, with the host venv's torch and the host's CUDA toolkit mounted
# read-only. Expects gpu-check.sh to finish the build and stop at the GPU gate (exit 3).
#
# Usage: scripts/gpu-check/test-mimic.sh [--targets "T1 T2 ..."|none] [--jobs N]
#          [--unpack-with dpkg|python] [--out DIR] [--keep] [--update-package-list] [--image-only]
#   --targets LIST         passed to gpu-check.sh (default: its own, the GPU steps' targets;
#                          "none" stops after configure; a subset keeps CI short)
#   --jobs N               build jobs inside the mimic (default: this machine's cores)
#   --unpack-with python   unpack with deb_extract.py instead of dpkg-deb (a GPU host's
#                          image may lack dpkg)
#   --out DIR              where gpu-check.md and gpu-check.log land (default: build-mimic/out)
#   --keep                 keep the staged copy and its build dir (build-mimic/stage-*)
#   --update-package-list  write the mimic's installed packages to already-there.txt (what
#                          prepare-packages.sh does not carry), then carry on
#   --image-only           stop once the mimic image is built (.ci/run does this beside the
#                          host build: apt-get and pip, nothing of ours compiled)
#
# Sets up podman and the base image first (scripts/containers/podman-setup.sh), builds the
# mimic image when its inputs changed, checks its package list against already-there.txt,
# refreshes .gpu-deps (prepare-packages.sh). Every container it starts is removed on exit.
# Knobs: MRCNN_MIMIC_VENV (default: .venv at the repo root; its torch is mounted),
# MRCNN_MIMIC_CUDA (default: /usr/local/cuda, resolved), MRCNN_MIMIC_CCACHE (default 1: the
# build in the mimic compiles through this machine's ccache, with its cache, as the image
# builds do; 0: without, as on a bare GPU host). Without it every CI run compiled the
# kernels library and its test from nothing: 790 s of the mimic's 824 s (2026-11-27, a
# 2-vCPU x86-64 machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

image=localhost/mrcnn-gpu-mimic
targets= jobs=$(nproc) unpack_with=dpkg out=$top/build-mimic/out keep=0 update_list=0 image_only=0
while (($#)); do
  case $1 in
    --targets) targets=${2?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --unpack-with) unpack_with=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    --update-package-list) update_list=1; shift ;;
    --image-only) image_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "test-mimic: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf '[test-mimic] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# Phase timings, printed at the end.
phase_names=() phase_secs=()
phase_start=
phase() { phase_start=$(date +%s.%N); log "$1"; phase_names+=("$1"); }
phase_done() { phase_secs+=("$(awk -v a="$phase_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"); }

# Cleanup: the container (also when this script is interrupted) and the staged copy.
container=mrcnn-mimic-$$
stage=
cleanup() {
  podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
  if [[ -n $stage ]]; then rm -rf "$stage-ccache"; fi
  if [[ -n $stage && $keep == 0 ]]; then rm -rf "$stage"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. podman and the Debian base image.
phase "podman and base image (scripts/containers/podman-setup.sh)"
# shellcheck source=../containers/podman-setup.sh
source "$top/scripts/containers/podman-setup.sh"
podman_setup
phase_done

# 2. The mimic image, rebuilt when the Containerfile, the package list or the base change.
phase "mimic image $image"
mkdir -p "$top/build-mimic"
inputs=$( (cat "$here/mimic.Containerfile" "$here/mimic-packages.txt"; podman image inspect -f '{{.Id}}' "$MRCNN_BASE_IMAGE") | sha256sum | cut -c1-16)
if [[ $(podman image inspect -f '{{index .Labels "mrcnn.mimic.inputs"}}' "$image" 2>/dev/null || true) != "$inputs" ]]; then
  log "building $image (a few minutes: apt-get and pip inside)"
  podman build --pull=never --network host --label "mrcnn.mimic.inputs=$inputs" \
    --build-arg BASE="$MRCNN_BASE_IMAGE" -t "$image" -f "$here/mimic.Containerfile" "$here" >"$top/build-mimic/image.log" 2>&1 ||
    { tail -n 30 "$top/build-mimic/image.log" >&2; die "podman build failed (log: build-mimic/image.log)"; }
fi
phase_done
if ((image_only)); then
  log "--image-only: $image is built ($(awk -v a="${phase_secs[0]}" -v b="${phase_secs[1]}" 'BEGIN { printf "%.0f", a + b }') s); stopping"
  exit 0
fi

# 3. Its packages are what prepare-packages.sh takes as already there.
phase "mimic package list vs already-there.txt"
list_file=$here/already-there.txt
actual=$(podman run --rm --network none --name "$container" "$image" dpkg-query -W -f '${Package}\n' | sort)
if ((update_list)); then
  {
    echo "# The Debian packages installed in the GPU-host mimic ($image): debootstrap"
    echo "# minbase plus mimic-packages.txt and their dependencies. prepare-packages.sh takes"
    echo "# them as already on the GPU host and does not carry them."
    echo "# Generated by scripts/gpu-check/test-mimic.sh --update-package-list; do not edit."
    echo "$actual"
  } > "$list_file"
  log "wrote $(wc -l <<<"$actual") package names to $list_file"
fi
expected=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list_file" | sort)
if [[ $actual != "$expected" ]]; then
  diff <(echo "$expected") <(echo "$actual") | sed 's/^/  /' >&2 || true
  die "the mimic's packages (>) differ from already-there.txt (<): if the mimic changed on purpose, re-run with --update-package-list and commit the file"
fi
phase_done

# 4. The carried packages, computed against that list.
phase "carried packages (prepare-packages.sh)"
"$here/prepare-packages.sh"
phase_done

# 5. What goes to a GPU host: tracked and untracked-not-ignored files, plus .gpu-deps.
phase "stage the working tree"
stage=$(mktemp -d "$top/build-mimic/stage-XXXXXX")
# (--ignore-failed-read: a tracked file deleted in the working tree is not sent either)
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  tar -c --null -T - --ignore-failed-read 2>/dev/null) | tar -x -C "$stage"
cp -a "$top/.gpu-deps" "$stage/.gpu-deps"
tree_mib=$(du -sm --exclude=.gpu-deps "$stage" | cut -f1)
deps_mib=$(du -sm "$stage/.gpu-deps" | cut -f1)
log "working tree ${tree_mib} MiB + .gpu-deps ${deps_mib} MiB (kept within 64 MiB in all for the copy to a GPU host)"
((tree_mib + deps_mib <= 64)) || log "warning: over the 64 MiB the copy to a GPU host is kept within"
phase_done

# 6. Mounts: torch from the host venv, the CUDA toolkit. Symbolic links in them that leave
# the mounted tree get their targets mounted where the link points inside the container.
venv=${MRCNN_MIMIC_VENV:-$top/.venv}
site=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
site=$(readlink -f "$site")
venv_py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mimic_py=$(podman run --rm --network none --name "$container" "$image" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $venv_py == "$mimic_py" ]] || die "the venv's Python is $venv_py, the mimic's $mimic_py: its torch would not import there"
cuda=$(readlink -f "${MRCNN_MIMIC_CUDA:-/usr/local/cuda}")
[[ -x $cuda/bin/nvcc ]] || die "no nvcc in $cuda/bin"
# At a fixed path inside: the include paths Torch's CMake config gives the compiles (and so
# ccache's keys for them, 6b) are then the same whatever folder the checkout is in.
site_in=/opt/mimic-site-packages
mounts=(-v "$site:$site_in:ro" -v "$cuda:/usr/local/cuda:ro")
outside_mounts() {  # HOST_ROOT CONTAINER_ROOT
  local root=$1 croot=$2 l t real inside
  while IFS= read -r -d '' l; do
    real=$(readlink -f "$l") || continue
    [[ $real == "$root" || $real == "$root"/* ]] && continue
    t=$(readlink "$l")
    if [[ $t == /* ]]; then inside=$t; else inside=$(realpath -m -s "$(dirname "$croot${l#"$root"}")/$t"); fi
    [[ -e $real ]] && printf '%s\t%s\n' "$real" "$inside"
  done < <(find "$root" -type l -print0)
}
while IFS=$'\t' read -r real inside; do
  log "mounting $real at $inside (a link leaves the mounted tree)"
  mounts+=(-v "$real:$inside:ro")
done < <({ outside_mounts "$cuda" /usr/local/cuda; outside_mounts "$site" "$site_in"; } | sort -u)

# 6b. This machine's ccache for the build in the mimic: its binary and the one library of
# its that the mimic lacks (hiredis), under /opt/host-ccache, started through a wrapper that
# finds that library; its cache mounted read-write; the settings of scripts/setup.sh, with the
# mimic's checkout (/repo) as the base dir. Checked in the mimic before it is used.
ccache_args=()
if [[ ${MRCNN_MIMIC_CCACHE:-1} == 1 ]] && command -v ccache >/dev/null; then
  tools=$stage-ccache
  rm -rf "$tools"
  mkdir -p "$tools/lib"
  cp "$(command -v ccache)" "$tools/ccache"
  ldd "$(command -v ccache)" | awk '/libhiredis/ { print $3 }' | xargs -r cp -t "$tools/lib"
  printf '%s\n' '#!/bin/sh' \
    'LD_LIBRARY_PATH=/opt/host-ccache/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec /opt/host-ccache/ccache "$@"' \
    >"$tools/launch"
  chmod +x "$tools/launch"
  cache_dir=$(ccache -k cache_dir)
  mkdir -p "$cache_dir"
  ccache_args=(-v "$tools:/opt/host-ccache:ro" -v "$cache_dir:/var/cache/host-ccache"
    -e CCACHE_DIR=/var/cache/host-ccache -e CCACHE_BASEDIR=/repo -e CCACHE_NOHASHDIR=1
    -e CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
    -e CCACHE_COMPILERCHECK=content -e MRCNN_COMPILER_LAUNCHER=/opt/host-ccache/launch)
  if podman run --rm --name "$container" --network none "${ccache_args[@]}" "$image" \
      /opt/host-ccache/launch --version >/dev/null 2>&1; then
    log "the build in the mimic compiles through this machine's ccache ($cache_dir)"
  else
    log "this machine's ccache does not run in the mimic: building without it"
    ccache_args=()
  fi
fi

# 7. gpu-check.sh in the mimic, without network.
phase "gpu-check.sh in the mimic (--network none)"
rm -rf "$out"
mkdir -p "$out"
check_args=(--out /out --stop-before-gpu --jobs "$jobs")
[[ -n $targets ]] && check_args+=(--targets "$targets")
set +e
podman run --rm --name "$container" --network none \
  -v "$stage:/repo" -v "$out:/out" "${mounts[@]}" "${ccache_args[@]}" \
  -e PYTHONPATH="$site_in" -e MRCNN_UNPACK_WITH="$unpack_with" -w /repo \
  "$image" bash scripts/gpu-check.sh "${check_args[@]}"
rc=$?
set -e
phase_done

# 8. The verdict.
report=$out/gpu-check.md
echo
log "phases here:"
for i in "${!phase_names[@]}"; do printf '  %7s s  %s\n' "${phase_secs[$i]}" "${phase_names[$i]}" >&2; done
[[ -f $report ]] || die "gpu-check.sh wrote no report (exit $rc)"
log "gpu-check.sh steps in the mimic:"
awk -F' *\\| *' '/^## / { exit } /^\| [a-z]/ && $2 != "step" { printf "  %7s s  %s: %s\n", $4, $2, $3 }' "$report" >&2
# The GPU steps it would run next, each with its limit, and the time left of --budget-s
# (here the build on this machine's cores takes longer than on a 16-core GPU host).
if grep -q '^## GPU steps that would run' "$report"; then
  log "GPU steps it would run, with their limits (s):"
  awk -F' *\\| *' '/^## GPU steps that would run/ { on = 1; next } on && /^\| [^-]/ && $2 != "GPU step" { printf "  %7s s  %s\n", $3, $2 } on && /^- budget|^- no budget/ { print "  " substr($0, 3) }' "$report" >&2
  bad=$(awk -F' *\\| *' '/^## GPU steps that would run/ { on = 1; next } on && /^\| [^-]/ && $2 != "GPU step" && !($3 ~ /^[0-9]+$/ && $3 + 0 > 0 && $3 + 0 <= 600) { print $2 }' "$report")
  [[ -z $bad ]] || die "GPU steps without a limit of 1-600 s (none may outlast the default --budget-s 600): $bad"
else
  die "the report lists no GPU steps with their limits: $report"
fi
((rc == 3)) || die "gpu-check.sh exited $rc, expected 3 (build finished, stopped at the GPU gate); report: $report"
grep -q '^gpu-check: reached the GPU steps' "$report" || die "the report does not say the GPU steps were reached: $report"
if grep -E '^\| [a-z]+ \|' "$report" | grep -v '^| step |' | grep -vq '| pass |'; then die "a step did not pass: $report"; fi
if [[ $targets != none ]]; then
  grep -q '^| build | pass |' "$report" || die "the report shows no passed build step: $report"
fi
log "OK: built in the mimic and stopped at the GPU gate (report: $report)"
