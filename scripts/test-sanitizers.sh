#!/usr/bin/env bash
# Sanitizer builds of everything that needs no LibTorch, and their tests (run after
# scripts/setup.sh, which installs clang, or by .ci/run after scripts/test.sh):
#   build-asan/  clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer coverage:
#                every Torch-free C++ test, then each fuzz target of test/fuzz for
#                MRCNN_FUZZ_SECONDS (default 20) from its seeds;
#   build-tsan/  clang, ThreadSanitizer: the tests of the threaded code (the supervisor's
#                line forwarding and child processes, the server's executor and HTTP
#                server, the data-parallel ring, COCO evaluation's worker threads).
# The processes the tests start (entrypoint, server, test children) are sanitized too, and
# every report goes to a file under <build>/sanitizer-reports: any report fails the run,
# also one from a process whose exit status a test does not look at.
# Exits non-zero on a failed test or any report.
# `--build-only` configures and builds both trees and stops. .ci/run runs this script plainly,
# after scripts/test-launchers.sh: built beside pytest at nice 19 (2026-11-27, a 2-vCPU x86-64
# machine), the trees took 19.5 min and slowed pytest about 3x.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
log() { printf '[sanitizers] %s\n' "$*"; }
build_only=0
case ${1:-} in
  --build-only) build_only=1 ;;
  "") ;;
  *) echo "test-sanitizers.sh: unknown argument $1 (the only one is --build-only)" >&2; exit 2 ;;
esac

if ! command -v clang++ >/dev/null; then
  echo "scripts/test-sanitizers.sh: clang++ not found; run scripts/setup.sh (installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
# The same ccache settings as scripts/setup.sh (see there).
export CCACHE_BASEDIR="$top"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_NOHASHDIR=1
export CCACHE_COMPILERCHECK=content
jobs=${MRCNN_JOBS:-$(nproc)}
fuzz_seconds=${MRCNN_FUZZ_SECONDS:-20}
status=0

# configure DIR SANITIZERS [cmake args...]: Torch-free, clang, assertions on. Compiling is
# most of what this script costs on a 2-core CI machine, so: -O0 with line tables (half the
# compile time of -O1 under the sanitizers, readable stacks; the tests and 20 s of fuzzing run
# fast enough) and a unity build (one compile per target: half again).
configure() {
  local dir=$1 sanitizers=$2
  shift 2
  log "configuring $(basename "$dir")/"
  mkdir -p "$dir"
  cmake -S "$top" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS_DEBUG="-O0 -gline-tables-only" -DCMAKE_CXX_FLAGS_DEBUG="-O0 -gline-tables-only" \
    -DCMAKE_UNITY_BUILD=ON -DMRCNN_WITH_TORCH=OFF -DMRCNN_SANITIZE="$sanitizers" "$@" >"$dir/configure.log" ||
    { cat "$dir/configure.log"; return 1; }
}

# shellcheck source=test-tmp.sh
source "$top/scripts/test-tmp.sh"

# run_ctest DIR [ctest args...]: CTest with every report written under DIR/sanitizer-reports,
# then fails when that folder is not empty; and with a temp dir of its own (TMPDIR,
# DIR/test-tmp), which fails the run when a test or fuzzer left anything in it.
run_ctest() {
  local dir=$1
  shift
  local reports=$dir/sanitizer-reports tmp=$dir/test-tmp
  rm -rf "$reports" "$tmp" && mkdir -p "$reports" "$tmp"
  local common="log_path=$reports/report:print_stacktrace=1"
  local rc=0
  # TSan reports and goes on (exit status 66 at the end), so a test that meets a race still
  # stops the server processes it started; ASan and UBSan stop at the first report.
  ASAN_OPTIONS="$common:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1" \
    UBSAN_OPTIONS="$common:halt_on_error=1" \
    TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$top/scripts/tsan-suppressions.txt" \
    TMPDIR=$tmp ctest --test-dir "$dir" --output-on-failure -j"${MRCNN_TEST_JOBS:-2}" "$@" || rc=1
  if compgen -G "$reports/report*" >/dev/null; then
    log "sanitizer reports in $reports:"
    for report in "$reports"/report*; do
      echo "---- $report"
      head -n 60 "$report"
    done
    rc=1
  fi
  left_in_tmp "$tmp" || rc=1
  return $rc
}

SECONDS=0
asan=$top/build-asan
configure "$asan" address,undefined -DMRCNN_FUZZ=ON -DMRCNN_FUZZ_SECONDS="$fuzz_seconds"
log "building build-asan/"
cmake --build "$asan" -j"$jobs"
log "build-asan/ built in ${SECONDS} s"
tsan=$top/build-tsan
tsan_tests=(test_entrypoint_units test_entrypoint_supervisor test_entrypoint_launch
  test_serving_units test_serving_http test_engine_ring test_coco_eval)
build_tsan() {
  SECONDS=0
  configure "$tsan" thread
  log "building build-tsan/"
  cmake --build "$tsan" -j"$jobs" --target "${tsan_tests[@]}"
  log "build-tsan/ built in ${SECONDS} s"
}
if ((build_only)); then
  build_tsan
  log "--build-only: both trees built"
  exit 0
fi
SECONDS=0
run_ctest "$asan" || status=1
log "ASan/UBSan tests and fuzzing: ${SECONDS} s"

build_tsan
SECONDS=0
tsan_regex="^($(IFS='|'; echo "${tsan_tests[*]}")):"
run_ctest "$tsan" -R "$tsan_regex" || status=1
log "TSan tests: ${SECONDS} s"

if ((status)); then
  log "FAILED"
else
  log "all sanitizer tests passed, no reports"
fi
exit $status
