#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: system packages, the project-local
# Python environment (LibTorch comes from the torch wheel), then a configure + build.
# A second run with nothing changed only re-checks and lets Ninja find nothing to do.
# `scripts/setup.sh --packages` stops after the Debian packages (.ci/run: so that what it
# starts beside the build never runs apt-get at the same time as this).
# TORCH_CUDA_ARCH_LIST, when set at the first configure, is the CUDA kernels' architecture
# list (default 8.0;9.0; .ci/run compiles for one).
set -euo pipefail
packages_only=0
case ${1:-} in
  --packages) packages_only=1 ;;
  "") ;;
  *) echo "setup.sh: unknown argument $1 (the only one is --packages)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

log() { printf '[setup] %s\n' "$*"; }

apt_packages=(
  build-essential ninja-build ccache cmake pkg-config
  libboost-dev libcli11-dev nlohmann-json3-dev libfmt-dev catch2 libyaml-cpp-dev
  libopencv-core-dev libopencv-imgproc-dev
  libopencv-imgcodecs-dev  # tests only: the reference our libjpeg/libpng codec is checked against
  libpng-dev
  protobuf-compiler libprotobuf-dev
  chromium
  libjpeg-dev zlib1g-dev
  libssl-dev  # tracking/ and download/: the AWS SigV4 signer's SHA-256 and HMAC, TLS
  clang libclang-rt-14-dev
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
((packages_only == 0)) || { log "Debian packages in place (--packages: stopping here)"; exit 0; }

# Python environment: torch/torchvision pinned to what the GPU hosts carry (made again when
# requirements.txt changes; with MRCNN_VENV_CACHE a link to a venv made once: python-venv.sh).
venv="$top/.venv"
# shellcheck source=python-venv.sh
source "$top/scripts/python-venv.sh"
python_venv "$venv" "$top/scripts/requirements.txt"

# Prometheus for test/serving/test_server_prometheus.py: Debian's package unpacked into
# .deb/prometheus, not installed (its postinst would start a system service on :9090).
prometheus="$top/.deb/prometheus/usr/bin/prometheus"
if [[ ! -x $prometheus ]]; then
  log "unpacking Debian's prometheus into .deb/prometheus (the server's Prometheus test)"
  debs=$(mktemp -d)
  chmod 755 "$debs"  # apt-get download runs as _apt when it can
  if ! (cd "$debs" && apt-get download -qq prometheus 2>/dev/null); then
    sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    (cd "$debs" && apt-get download -qq prometheus)
  fi
  rm -rf "$top/.deb/prometheus" && mkdir -p "$top/.deb"
  dpkg-deb -x "$debs"/prometheus_*.deb "$top/.deb/prometheus"
  rm -rf "$debs"
  "$prometheus" --version 2>&1 | head -1
fi

# ccache across clones and build dirs: paths under the checkout are hashed relative to
# it, and PCH-using compiles are cacheable only with these sloppiness settings. The
# compiler is identified by its content, not its mtime, so that the image builds (the
# Dockerfiles use these same settings) and this build share cache entries.
export CCACHE_BASEDIR="$top"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_NOHASHDIR=1
export CCACHE_COMPILERCHECK=content

# Configure once; later runs only build (Ninja re-runs CMake when a CMakeLists changes).
build="$top/build"
if [[ ! -f $build/build.ninja ]]; then
  torch_prefix=$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  cmake_args=(-S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${MRCNN_BUILD_TYPE:-Release}"
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPython3_EXECUTABLE="$venv/bin/python")
  [[ -n ${MRCNN_CUDA:-} ]] && cmake_args+=(-DMRCNN_CUDA="$MRCNN_CUDA")
  log "configuring build/ (CUDA architectures: ${TORCH_CUDA_ARCH_LIST:-8.0;9.0})"
  cmake "${cmake_args[@]}"
fi
log "building"
cmake --build "$build" -j"${MRCNN_JOBS:-$(nproc)}"
log "done: binaries in build/bin/"
