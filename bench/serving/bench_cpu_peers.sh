#!/usr/bin/env bash
# bench_cpu_peers.py in an environment of its own: bench/out/peers-venv sees the product's .venv
# (torch, torchvision) through a .pth file and adds onnxruntime and openvino from PyPI, so the
# peers never enter the product's environment. Needs the build's server (scripts/setup.sh).
#   bash bench/serving/bench_cpu_peers.sh [bench_cpu_peers.py arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bench/out/peers-venv
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  site=$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')
  echo "$site" > "$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/product_venv.pth"
fi
"$venv/bin/pip" install -q -r bench/serving/requirements-peers.txt
exec "$venv/bin/python" bench/serving/bench_cpu_peers.py "$@"
