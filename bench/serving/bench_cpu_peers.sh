#!/usr/bin/env bash
# bench_cpu_peers.py in an environment of its own: bench/out/peers-venv sees the product's .venv
# (torch, torchvision) through a .pth file and adds onnxruntime and openvino from PyPI, so the
# peers never enter the product's environment. Needs the build's server (scripts/setup.sh).
# Runs unchanged on an arm64 machine (e.g. a Graviton, after scripts/setup.sh there).
#   bash bench/serving/bench_cpu_peers.sh [bench_cpu_peers.py arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bench/out/peers-venv
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  site=$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')
  echo "$site" > "$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/product_venv.pth"
fi
# One peer at a time: a peer without a wheel for this machine (none is known today: onnx,
# onnxruntime and openvino publish manylinux aarch64 wheels, openvino's for glibc >= 2.35) is
# left out, said here, and bench_cpu_peers.py skips its engines, saying so in its report.
while read -r requirement; do
  [[ -z $requirement || $requirement == \#* ]] && continue
  "$venv/bin/pip" install -q "$requirement" ||
    echo "bench_cpu_peers.sh: $requirement has no installable package for $(uname -m) here: its engines are skipped" >&2
done < <(sed 's/[[:space:]]*#.*//' bench/serving/requirements-peers.txt)
exec "$venv/bin/python" bench/serving/bench_cpu_peers.py "$@"
