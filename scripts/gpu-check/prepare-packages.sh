#!/usr/bin/env bash
# Downloads, without installing anything, the Debian packages our build needs on a bare
# GPU host into .gpu-deps/ (ignored by git; copied to that host beside the working tree,
# where scripts/gpu-check/unpack-packages.sh unpacks them into a private prefix).
#
# Such a host has an Ubuntu-like image with a compiler, Python with torch, pip's CMake and
# Ninja, but no -dev packages and no network. We carry our build's Debian dependencies and
# their run-time closure, minus what that machine already has. "Already has" is the mimic
# image's installed package list (already-there.txt beside this script, written from the
# image by test-mimic.sh --update-package-list), so the mimic that proves the build and
# this download cannot drift apart: test-mimic.sh fails when the image no longer matches
# that file.
#
# How the closure is computed: apt's own resolver, run against a private dpkg status that
# says "the mimic's packages are installed" (this machine's dpkg database is not read or
# touched), asked to install our packages with --simulate. What it would install is what
# we download, at the versions this machine's apt lists serve (bookworm + updates +
# security). The result goes into .gpu-deps/MANIFEST.tsv.
#
# Usage: scripts/gpu-check/prepare-packages.sh [--dest DIR] [--max-mib N]
# Idempotent: packages already downloaded (same file, same SHA-256) are kept, packages no
# longer wanted are deleted; with nothing to fetch it takes a few seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

dest=$top/.gpu-deps
max_mib=45   # with the working tree, within the 64 MiB the copy to a GPU host is kept to
while (($#)); do
  case $1 in
    --dest) dest=$2; shift 2 ;;
    --max-mib) max_mib=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "prepare-packages: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf '[prepare-packages] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Our build's Debian dependencies (cmake/MrcnnDependencies.cmake, trainer/engine's protoc
# and protobuf-lite). OpenCV's imgcodecs is deliberately absent: its closure (GDAL, Mesa,
# LLVM) is over 150 MiB; the build decodes JPEG/PNG itself with libjpeg and libpng.
wanted=(
  libboost-dev            # header-only Asio/Beast
  libcli11-dev nlohmann-json3-dev libfmt-dev catch2 libyaml-cpp-dev
  libopencv-core-dev libopencv-imgproc-dev
  libjpeg-dev             # libjpeg62-turbo
  libpng-dev zlib1g-dev
  protobuf-compiler libprotobuf-dev
  # One provider for each virtual BLAS/LAPACK that OpenCV's core depends on
  # (libblas.so.3, liblapack.so.3): the reference implementations, small and plain.
  # Named here so apt cannot pick OpenBLAS, BLIS or ATLAS.
  libblas3 liblapack3
)

# Run-time dependencies we deliberately do not carry, each with the reason. apt is told
# they are installed (as empty stand-ins), so nothing they pull comes along either.
not_carried=(
  # libglx0 (needed by OpenCV core's libGLX.so.0) depends on the Mesa GLX vendor library,
  # which libglvnd only dlopens when a GL context is created (OpenCV core never does, we
  # never do); it pulls Mesa's DRI drivers and LLVM: about 45 MiB.
  libglx-mesa0
)

# Must never appear in the download (other BLAS/LAPACK providers; the Mesa/LLVM stack).
forbidden_re='^(libopenblas|libblis|libatlas|libgl1-mesa-dri|libllvm|libglapi-mesa)'

[[ $(dpkg --print-architecture) == amd64 ]] ||
  die "this machine's apt serves $(dpkg --print-architecture) packages; the GPU host is x86-64 (amd64)"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ $codename == bookworm ]] || die "expected Debian 12 (bookworm) apt lists here, found '$codename'"
[[ -n $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -print -quit) ]] || apt-get update -qq

# "Already there": the mimic image's packages (comment lines and blanks skipped).
already_file=$here/already-there.txt
[[ -f $already_file ]] || die "$already_file missing: run scripts/gpu-check/test-mimic.sh --update-package-list"
mapfile -t already < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$already_file" | awk '{print $1}')
((${#already[@]} > 50)) || die "$already_file lists only ${#already[@]} packages; regenerate it"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A dpkg status in which the mimic's packages are installed at this machine's candidate
# versions (the archive's own records, so Provides and versions are right), plus empty
# stand-ins (no dependencies, a version above any real one) for the not-carried ones.
apt_cache_show() { apt-cache -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= show --no-all-versions "$@"; }
apt_cache_show "${already[@]}" 2>"$tmp/show.err" |
  awk 'BEGIN { RS = ""; ORS = "\n\n" } { print $0 "\nStatus: install ok installed" }' > "$tmp/status" ||
  die "apt-cache show failed for the mimic's packages: $(head -c 2000 "$tmp/show.err")"
got=$(grep -c '^Package:' "$tmp/status" || true)
((got == ${#already[@]})) ||
  die "this machine's apt knows $got of the mimic's ${#already[@]} packages; refresh apt lists or already-there.txt ($(head -c 500 "$tmp/show.err"))"
for p in "${not_carried[@]}"; do
  printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\nVersion: 999:0-not-carried\nDescription: stand-in\n\n' "$p" >> "$tmp/status"
done

# apt with the private status; no lock (nothing is changed); caches in memory so the
# system's pkgcache.bin (built from the real status) is neither read nor rewritten.
apt_opts=(-q -o Dir::State::status="$tmp/status" -o Debug::NoLocking=1
  -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Install-Recommends=false)
if ! apt-get "${apt_opts[@]}" install --simulate "${wanted[@]}" > "$tmp/simulate" 2>&1; then
  cat "$tmp/simulate" >&2
  die "apt could not resolve our packages on top of the mimic's"
fi
# "Inst NAME (VERSION RELEASE [ARCH])"
awk '/^Inst /{ print $2, substr($3, 2) }' "$tmp/simulate" | sort > "$tmp/plan"
[[ -s $tmp/plan ]] || die "apt would install nothing: are our packages in already-there.txt?"
if bad=$(awk '{print $1}' "$tmp/plan" | grep -E "$forbidden_re"); then
  die "the closure contains packages it must not: $(echo $bad)"
fi

# File names: apt-get download writes NAME_VERSION_ARCH.deb with the epoch's ':' as %3a.
# The copy that travels to the GPU host gets names of letters, digits, '.', '_' and '-'
# only ('+', '%', '~' and ':' become '-'), which any transfer keeps as they are;
# MANIFEST.tsv maps them back.
deb_name() { local s="${1}_${2}_${3}"; echo "${s//[^A-Za-z0-9._-]/-}.deb"; }
apt_name() { echo "${1}_${2//:/%3a}_${3}.deb"; }

# The planned versions' records: size and SHA-256, from one apt-cache call (each call
# parses all the lists, ~0.7 s).
mkdir -p "$dest"
manifest=$tmp/manifest
printf 'package\tversion\tarch\tsize\tsha256\tfile\n' > "$manifest"
mapfile -t plan_specs < <(awk '{ print $1 "=" $2 }' "$tmp/plan")
apt_cache_show "${plan_specs[@]}" | awk 'BEGIN { RS = ""; FS = "\n" } {
    n = v = a = s = h = ""
    for (i = 1; i <= NF; i++) {
      split($i, kv, ": ")
      if (kv[1] == "Package") n = kv[2]; else if (kv[1] == "Version") v = kv[2]
      else if (kv[1] == "Architecture") a = kv[2]; else if (kv[1] == "Size") s = kv[2]
      else if (kv[1] == "SHA256") h = kv[2]
    }
    print n, v, a, s, h }' > "$tmp/records"
[[ $(wc -l < "$tmp/records") == "${#plan_specs[@]}" ]] || die "apt-cache show did not describe every planned package"
while read -r name version arch size sha; do
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$version" "$arch" "$size" "$sha" "$(deb_name "$name" "$version" "$arch")"
done < "$tmp/records" >> "$manifest"

fetch=()
while IFS=$'\t' read -r name version arch size sha file; do
  [[ $name == package ]] && continue
  if [[ -f $dest/$file ]] && [[ $(stat -c %s "$dest/$file") == "$size" ]] && sha256sum --status -c <<<"$sha  $dest/$file"; then
    continue
  fi
  rm -f "$dest/$file"
  fetch+=("$name=$version")
done < "$manifest"

if ((${#fetch[@]})); then
  log "downloading ${#fetch[@]} packages into $dest"
  mkdir -p "$tmp/download"
  (cd "$tmp/download" && apt-get -q -o APT::Sandbox::User=root -o Debug::NoLocking=1 download "${fetch[@]}" >"$tmp/download.log" 2>&1) || {
    cat "$tmp/download.log" >&2
    die "apt-get download failed"
  }
  while IFS=$'\t' read -r name version arch size sha file; do
    got=$tmp/download/$(apt_name "$name" "$version" "$arch")
    [[ $name != package && -f $got ]] && mv "$got" "$dest/$file"
  done < "$manifest"
fi

# Verify everything and drop .debs that are no longer planned (an older version, a
# package dropped from the list).
declare -A keep=()
total=0
while IFS=$'\t' read -r name version arch size sha file; do
  [[ $name == package ]] && continue
  [[ -f $dest/$file ]] || die "$file was not downloaded"
  sha256sum --status -c <<<"$sha  $dest/$file" || die "$file: SHA-256 differs from the archive's"
  keep[$file]=1
  total=$((total + size))
done < "$manifest"
for f in "$dest"/*.deb; do
  [[ -e $f ]] || continue
  [[ -n ${keep[$(basename "$f")]:-} ]] || { log "removing $(basename "$f") (no longer needed)"; rm -f "$f"; }
done
cp "$manifest" "$dest/MANIFEST.tsv"

count=$((${#keep[@]}))
mib=$(awk -v t="$total" 'BEGIN { printf "%.1f", t / 1048576 }')
log "$count packages, $mib MiB in $dest (limit $max_mib MiB)"
if ((total > max_mib * 1048576)); then
  log "largest:"
  sort -t$'\t' -k4,4nr "$dest/MANIFEST.tsv" | head -10 | awk -F'\t' '{ printf "  %8.1f KiB  %s\n", $4 / 1024, $1 }' >&2
  die "over the $max_mib MiB limit"
fi

# Python wheels the GPU host's python3 (3.12) lacks: pycocotools, which the Python
# reference server of the serving bench encodes its masks with. gpu-check.sh installs
# them into its build dir when that python3 cannot import them.
wheels=(pycocotools==2.0.11)
mkdir -p "$dest/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest/wheels" "${wheels[@]}" || die "could not download the wheels ${wheels[*]} for Python 3.12"
log "wheels in $dest/wheels: $(cd "$dest/wheels" && ls -- *.whl | tr '\n' ' ')"
