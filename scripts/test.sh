#!/usr/bin/env bash
# The project's test command: set up (idempotent), then every C++ test (CTest) and
# every Python oracle test (pytest). Exits non-zero on any failure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"

status=0
echo "[test] C++ tests (ctest)"
ctest --test-dir "$top/build" --output-on-failure -j"${MRCNN_TEST_JOBS:-2}" || status=1

echo "[test] Python oracle tests (pytest)"
export MRCNN_BUILD_DIR="$top/build"
mapfile -t py_dirs < <(find "$top/test" -name 'test_*.py' -printf '%h\n' | sort -u)
if ((${#py_dirs[@]})); then
  # Only failed tests keep their tmp_path: the passing ones' training runs and images came to
  # ~8 GB per session under /tmp/pytest-of-$USER, and pytest keeps the last three sessions.
  # The 25 slowest tests are listed at the end: pytest is most of CI's time (issue 42).
  "$top/.venv/bin/python" -m pytest -q -o tmp_path_retention_policy=failed --durations=25 "${py_dirs[@]}" || status=1
else
  echo "[test] no Python tests found"
fi

if ((status)); then
  echo "[test] FAILED"
else
  echo "[test] all tests passed"
fi
exit $status
