#!/usr/bin/env bash
# The project's test command: set up (idempotent), then every C++ test (CTest) and
# every Python oracle test (pytest). Exits non-zero on any failure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"

status=0
# Tests run side by side (CTest -j, pytest's workers), each with LibTorch's OpenMP threads:
# more threads than cores. Idle OpenMP threads then sleep instead of spinning on a core another
# test needs. Measured on a 2-vCPU x86-64 machine on 2026-11-28: CTest 101 -> 89 s, two pytest
# modules on two workers 76 -> 55 s (bench/RESULTS.md). A value already set is kept.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
echo "[test] C++ tests (ctest)"
# A temp dir of their own, which must be empty afterwards: every test removes what it wrote.
# shellcheck source=test-tmp.sh
source "$top/scripts/test-tmp.sh"
ctest_tmp=$top/build/test-tmp
rm -rf "$ctest_tmp" && mkdir -p "$ctest_tmp"
TMPDIR=$ctest_tmp ctest --test-dir "$top/build" --output-on-failure -j"${MRCNN_TEST_JOBS:-2}" || status=1
left_in_tmp "$ctest_tmp" || status=1

echo "[test] Python oracle tests (pytest)"
export MRCNN_BUILD_DIR="$top/build"
mapfile -t py_dirs < <(find "$top/test" -name 'test_*.py' -printf '%h\n' | sort -u)
if ((${#py_dirs[@]})); then
  # Only failed tests keep their tmp_path: the passing ones' training runs and images came to
  # ~8 GB per run under /tmp/pytest-of-$USER, and pytest keeps the last three runs' folders.
  # The 25 slowest tests are listed at the end: pytest is most of CI's time (issue 42).
  # Modules run side by side (pytest-xdist), a module on one worker so that its fixtures (a
  # training run, a server) are made once: most tests wait on a subprocess or use one core, and
  # alone they left one of CI's two idle. Workers take the modules in test/conftest.py's order,
  # the slowest first (not xdist's default, the most tests first: that left the shapes model's
  # training and the tiles tests that need it for the end, alone). MRCNN_PYTEST_WORKERS=0 runs
  # them in this process, one after another; the default is one worker per core, at most 4.
  workers=${MRCNN_PYTEST_WORKERS:-$(($(nproc) < 4 ? $(nproc) : 4))}
  "$top/.venv/bin/python" -m pytest -q -o tmp_path_retention_policy=failed --durations=25 \
    -n "$workers" --dist loadscope --no-loadscope-reorder "${py_dirs[@]}" || status=1
else
  echo "[test] no Python tests found"
fi

if ((status)); then
  echo "[test] FAILED"
else
  echo "[test] all tests passed"
fi
exit $status
