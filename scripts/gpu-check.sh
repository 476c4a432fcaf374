#!/usr/bin/env bash
# The GPU check: builds the project on an x86-64 NVIDIA host with Python, torch, nvcc and
# g++ but no Debian -dev packages and no network, from the working tree plus .gpu-deps/
# copied beside it (scripts/gpu-check/prepare-packages.sh), then runs the GPU steps. Works
# the same in the GPU-host mimic (scripts/gpu-check/test-mimic.sh), which stops at the gate.
#
# Usage: scripts/gpu-check.sh --out DIR [--deps DIR] [--build-dir DIR] [--jobs N]
#                             [--targets "T1 T2 ..."|none] [--stop-before-gpu]
#                             [--gpu-steps REGEX] [--budget-s SECONDS]
#   --out DIR          report (DIR/gpu-check.md) and one combined log (DIR/gpu-check.log):
#                      two files, easy to copy back from the GPU host
#   --deps DIR         the carried .debs (default: .gpu-deps at the repo root)
#   --build-dir DIR    default: build-gpu at the repo root (ignored by git, so a second run on
#                      the same host continues the build); the packages' prefix: DIR/deps-prefix
#   --jobs N           parallel build jobs (default: all cores)
#   --targets LIST     what to build (default: what the GPU steps need); "none" configures only
#   --stop-before-gpu  stop at the GPU gate even if a GPU is visible
#   --gpu-steps REGEX  run only the GPU steps whose name matches (grep -E), e.g. to split
#                      the check over two runs that each must end within a time limit
#   --budget-s SECONDS the whole check's wall-clock time limit from its start (default 600):
#                      each GPU step runs under its own limit cut to what is left, and a
#                      step with under 30 s left is skipped (recorded); 0: no limit
#
# Steps: environment, unpack, configure, build, smoke (--help of the programs), the GPU
# gate, then the GPU steps of scripts/gpu-check/gpu-steps.sh (CUDA tests, oracle tests on
# cuda, kernel/inference/training-step/serving benches against torchvision, a real
# training through the entrypoint, CPU-vs-GPU predictions). Exit status: 0 all steps passed, 1 a step failed, 2 bad arguments, 3 every
# step passed and the run stopped at the GPU gate (no GPU visible, or --stop-before-gpu).
# On a 16-core H100 host from a cold start (2026-11-26) the build took 84-96 s and the whole
# check 293-408 s, within the default --budget-s 600 (scripts/gpu-check/README.md).
#
# Adding a step: write a function (it runs in a subshell, its output goes to the log) and
# call `run_step NAME function args...` below the gate; run_step times it, logs it and
# records pass/fail in the report; the exit status is 1 if any step failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

out= deps=$top/.gpu-deps build=$top/build-gpu jobs=$(nproc) stop_before_gpu=0 gpu_steps_regex= budget_s=600
check_start=$(date +%s)
# mrcnn_kernels: the torch op library the oracle tests and the kernel bench load.
targets="entrypoint trainer mrcnn_server mrcnn_kernels kernels_cuda_test model_bench train_step_bench"
usage() { sed -n '7,22{s/^# \{0,1\}//;p}' "$0" >&2; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --out) out=${2:?}; shift 2 ;;
    --deps) deps=${2:?}; shift 2 ;;
    --build-dir) build=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --targets) targets=${2?}; shift 2 ;;
    --stop-before-gpu) stop_before_gpu=1; shift ;;
    --gpu-steps) gpu_steps_regex=${2:?}; shift 2 ;;
    --budget-s) budget_s=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; usage ;;
  esac
done
[[ -n $out ]] || usage
[[ $budget_s =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget-s must be whole seconds, got '$budget_s'" >&2; usage; }
# Read by gpu_step (scripts/gpu-check/gpu-steps.sh); 0 means no budget.
((budget_s > 0)) && export GPU_CHECK_DEADLINE=$((check_start + budget_s))
[[ $targets == none ]] && targets=
mkdir -p "$out" "$build"
out=$(cd "$out" && pwd) build=$(cd "$build" && pwd)
[[ -d $deps ]] && deps=$(cd "$deps" && pwd)  # else the unpack step reports it
prefix=$build/deps-prefix
report=$out/gpu-check.md
log_file=$out/gpu-check.log
: > "$log_file"
step_logs=$(mktemp -d)

# Only sm_90 (H100/H200): Torch's CMake and ours read this; one architecture keeps the
# CUDA compile short.
export TORCH_CUDA_ARCH_LIST=9.0

say() { printf '[gpu-check] %s\n' "$*"; }
# The device, named at the top of the report (RESULTS entries must name it).
device_line="$( (nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true) | head -n 1)"
device_line="GPU: ${device_line:-none visible (no nvidia-smi answer)}; torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo 'not importable')"

# ---- steps, their records and the report -------------------------------------------------
step_names=() step_results=() step_secs=() step_cmds=() step_tails=()
any_failed=0
gate_line=
gpu_plan= gpu_plan_summary=
running=

# run_step NAME CMD...: runs CMD in a subshell with its output in the log; records the
# result. Returns CMD's status, so a step that later ones depend on can stop the run.
run_step() {
  local name=$1; shift
  local cmd="$*" slog=$step_logs/${#step_names[@]}.log start end rc secs
  say "step $name: $cmd"
  # The report names the running step, and its output goes straight into the log: a run
  # killed by an outer time limit (a job scheduler's, `timeout`) still shows where and why
  # it stopped.
  running="$name (started $(date -u +%T) UTC)"
  write_report
  printf '\n===== step %s: %s (%s)\n' "$name" "$cmd" "$(date -u +%FT%TZ)" >> "$log_file"
  start=$(date +%s.%N)
  set +e
  ( set -e; "$@" ) 2>&1 | tee -a "$log_file" > "$slog"
  rc=${PIPESTATUS[0]}
  set -e
  end=$(date +%s.%N)
  running=
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  printf '===== step %s: %s after %s s (exit %d)\n' "$name" "$( ((rc == 0)) && echo passed || echo FAILED)" "$secs" "$rc" >> "$log_file"
  step_names+=("$name") step_cmds+=("$cmd") step_secs+=("$secs")
  if ((rc == 0)); then
    # A passing step's figures (bench ratios, smoke-test lines) belong in the report too:
    # REPORT_LINES=N before run_step keeps its last N lines.
    step_results+=(pass)
    if ((${REPORT_LINES:-0} > 0)); then step_tails+=("$(tail -n "$REPORT_LINES" "$slog")"); else step_tails+=(""); fi
    say "step $name: passed in $secs s"
  else
    any_failed=1
    # 124/137: `timeout` stopped a GPU step at its limit.
    if ((rc == 124 || rc == 137)) && [[ $cmd == timeout* ]]; then step_results+=("FAIL (timed out, exit $rc)")
    else step_results+=("FAIL (exit $rc)"); fi
    step_tails+=("$(tail -n 40 "$slog")")
    say "step $name: FAILED (exit $rc) after $secs s; last lines:"
    tail -n 40 "$slog" | sed 's/^/    /'
  fi
  write_report
  return "$rc"
}

# skip_step NAME WHY: records a step that did not run (the budget ran out) in the report.
skip_step() {
  say "step $1: $2"
  printf '\n===== step %s: %s\n' "$1" "$2" >> "$log_file"
  step_names+=("$1") step_cmds+=("") step_secs+=(0) step_results+=("$2") step_tails+=("")
  write_report
}

write_report() {
  local i overall skipped
  skipped=$(printf '%s\n' "${step_results[@]}" | grep -c '^skipped' || true)
  if ((any_failed)); then overall="FAILED (see the steps marked FAIL)"
  elif [[ -n $running ]]; then overall="unfinished: running step $running"
  elif [[ -n $gate_line ]]; then overall="every step passed; $gate_line"
  else overall="all steps passed"; fi
  ((skipped > 0)) && overall+="; $skipped step(s) skipped for the budget"
  {
    echo "# gpu-check report"
    echo
    echo "- when: $(date -u +%FT%TZ); host: $(uname -n), $(nproc) cores; commit: ${MRCNN_COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo "unknown (no .git; set MRCNN_COMMIT)")}"
    echo "- $device_line"
    echo "- build dir: $build; targets: ${targets:-none (configure only)}"
    echo "- budget: $( ((budget_s > 0)) && echo "${budget_s} s from the start, $(( $(date +%s) - check_start )) s used" || echo none)"
    echo "- result: $overall"
    echo
    echo "| step | result | seconds |"
    echo "| --- | --- | --- |"
    for i in "${!step_names[@]}"; do
      echo "| ${step_names[$i]} | ${step_results[$i]} | ${step_secs[$i]} |"
    done
    for i in "${!step_names[@]}"; do
      echo
      echo "## ${step_names[$i]}"
      echo
      echo "- command: \`${step_cmds[$i]}\`"
      echo "- result: ${step_results[$i]}, ${step_secs[$i]} s"
      if [[ -n ${step_tails[$i]} ]]; then
        echo "- its output's last lines (all of it in gpu-check.log):"
        echo
        echo '```'
        printf '%s\n' "${step_tails[$i]}"
        echo '```'
      fi
    done
    if [[ -n $gate_line ]]; then
      echo
      echo "## GPU gate"
      echo
      echo "$gate_line"
      if [[ -n $gpu_plan ]]; then
        echo
        echo "## GPU steps that would run, in order, with their time limits"
        echo
        echo "Each runs under \`timeout\` with its limit cut to what is left of the budget;"
        echo "a step with under 30 s left is skipped and recorded."
        echo
        echo "| GPU step | limit (s) |"
        echo "| --- | --- |"
        awk -F'\t' '{ printf "| %s | %s |\n", $1, $2 }' <<<"$gpu_plan"
        echo
        echo "- $gpu_plan_summary"
      fi
    fi
  } > "$report"
}

finished=0
finish() {
  local rc=$1
  finished=1
  write_report
  rm -rf "$step_logs"
  say "report: $report; log: $log_file"
  exit "$rc"
}
# A failure outside the steps (a bug here) still leaves a report.
trap 'rc=$?; if ((!finished)); then any_failed=1; write_report; rm -rf "$step_logs"; fi' EXIT

# ---- step functions ---------------------------------------------------------------------
nvcc_path() { command -v nvcc || { for d in "${CUDA_HOME:-}" /usr/local/cuda; do [[ -n $d && -x $d/bin/nvcc ]] && { echo "$d/bin/nvcc"; return; }; done; return 1; }; }

environment() {
  local rc=0 t
  echo "kernel: $(uname -srm); cores: $(nproc)"
  [[ -f /etc/os-release ]] && echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  for t in python3 cmake ninja gcc g++; do
    if command -v "$t" >/dev/null; then echo "$t: $(command -v "$t"): $("$t" --version 2>&1 | head -n 1)"
    else echo "missing: $t"; rc=1; fi
  done
  # The build uses these (configure), not $CC/$CXX: say what the machine had set.
  echo "CC=${CC:-unset} CXX=${CXX:-unset} CUDAHOSTCXX=${CUDAHOSTCXX:-unset}"
  local v
  for v in CFLAGS CXXFLAGS CPPFLAGS LDFLAGS CUDAFLAGS NVCC_PREPEND_FLAGS NVCC_APPEND_FLAGS; do
    echo "$v=${!v-unset}"
  done
  [[ -n ${CXX:-} ]] && echo "\$CXX --version: $("$CXX" --version 2>&1 | head -n 1)"
  if nvcc=$(nvcc_path); then echo "nvcc: $nvcc: $("$nvcc" --version | tail -n 2 | head -n 1)"
  else echo "missing: nvcc (not on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin)"; rc=1; fi
  if command -v ccache >/dev/null; then echo "ccache: $(command -v ccache) (the build uses it)"; else echo "ccache: absent (fine)"; fi
  python3 -c 'import torch, torch.utils; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cmake prefix", torch.utils.cmake_prefix_path)' || rc=1
  command -v nvidia-smi >/dev/null && { nvidia-smi -L || true; }
  return $rc
}

configure() {
  local torch_prefix
  torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  # The compilers on PATH (the system's g++), not $CXX: the H100 and H200 hosts of 2026-11-26
  # set CXX to a g++ in /opt/gcc, and a C++ exception from the op library built with it
  # killed the Python process that loaded it (SIGSEGV at every argument check the oracle
  # tests reach). Python and Torch run with the system's libstdc++; so does the build.
  # Nor the machine's compiler and linker flags: on an H200 host (2026-11-26) the op library
  # came out with libstdc++'s __cxa_throw and __gxx_personality_v0 linked into it (a
  # static libstdc++ from somewhere in that environment), and an exception thrown through
  # that copy into a Python process that runs the system's libstdc++ is the SIGSEGV above.
  # And the shared libstdc++ first: GNU ld takes the first libstdc++.so or .a it meets along
  # -L, then LIBRARY_PATH (the unpacked packages' folder is on it), then its own folders; a
  # libstdc++.a in a folder before the compiler's own would be linked in whole (the issue-39
  # suspect). -L of the folder the compiler's libstdc++.so is in puts that one first.
  local stdcxx_dir
  stdcxx_dir=$(dirname "$(g++ -print-file-name=libstdc++.so)")
  echo "-- libstdc++ for the links: $stdcxx_dir ($(ls "$stdcxx_dir"/libstdc++.so* 2>/dev/null | head -n 1))"
  # A compiler launcher only where one is given (test-mimic.sh passes the host's ccache; a
  # bare GPU host has none).
  local launcher=()
  if [[ -n ${MRCNN_COMPILER_LAUNCHER:-} ]]; then
    echo "-- compiler launcher: $MRCNN_COMPILER_LAUNCHER"
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$MRCNN_COMPILER_LAUNCHER" -DCMAKE_CUDA_COMPILER_LAUNCHER="$MRCNN_COMPILER_LAUNCHER")
  fi
  env -u CFLAGS -u CXXFLAGS -u CPPFLAGS -u LDFLAGS -u CUDAFLAGS -u NVCC_PREPEND_FLAGS -u NVCC_APPEND_FLAGS \
  cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DCMAKE_SHARED_LINKER_FLAGS="-L$stdcxx_dir" -DCMAKE_EXE_LINKER_FLAGS="-L$stdcxx_dir" \
    -DCMAKE_C_COMPILER="$(command -v gcc)" -DCMAKE_CXX_COMPILER="$(command -v g++)" \
    -DCMAKE_CUDA_HOST_COMPILER="$(command -v g++)" \
    -DMRCNN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$(nvcc_path)" \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" \
    -DPython3_EXECUTABLE="$(command -v python3)" -DMRCNN_WITH_TESTS=ON -DMRCNN_WERROR=OFF
  echo "-- compiler and linker flags in the cache:"
  grep -E '^CMAKE_(CXX|C|CUDA)_FLAGS:|^CMAKE_(SHARED|EXE|MODULE)_LINKER_FLAGS:' "$build/CMakeCache.txt" || true
  # Where each dependency was found: all of ours must come from the prefix or Torch.
  echo "-- dependencies found:"
  grep -E '^(fmt|yaml-cpp|nlohmann_json|CLI11|Catch2|Boost|boost_headers|JPEG|PNG|ZLIB|Torch|MRCNN_(OPENCV|PROTOC|PROTOBUF|NCCL))[A-Za-z0-9_-]*:(PATH|FILEPATH)=' \
    "$build/CMakeCache.txt" || true
}

# Warnings do not stop this build (MRCNN_WERROR=OFF above): the GPU host's compiler is not
# the one CI holds our code to (its g++ 13 flags a false -Warray-bounds inside Torch's
# autograd headers), and a check that stops at a warning measures nothing. They are counted.
build_targets() {
  local blog rc
  blog=$(mktemp)
  set +e
  # shellcheck disable=SC2086  # a list of target names
  cmake --build "$build" -j "$jobs" --target $targets 2>&1 | tee "$blog"
  rc=${PIPESTATUS[0]}
  set -e
  echo "-- build warnings (this compiler, $(c++ -dumpfullversion 2>/dev/null || echo unknown)): $(grep -c 'warning:' "$blog" || true)"
  grep -o '\[-W[a-z0-9=-]*\]' "$blog" | sort | uniq -c | sort -rn | head -n 10 || true
  rm -f "$blog"
  return "$rc"
}

smoke() {
  local p ran=0
  for p in entrypoint trainer; do
    [[ " $targets " == *" $p "* ]] || continue
    echo "--- $p --help"
    "$build/bin/$p" --help
    ran=1
  done
  ((ran)) || echo "neither entrypoint nor trainer was built; nothing to run"
}

# How the op library was linked, and whether an exception from it reaches Python.
raise_probe() {
  local lib=$build/lib/libmrcnn_kernels.so
  [[ -f $lib ]] || { echo "$lib was not built"; return 1; }
  echo "--- ldd $lib (C++ runtime)"
  ldd "$lib" | grep -E 'libstdc|libgcc|libc10\.so|libtorch_cpu' || true
  echo "--- C++ runtime symbols defined inside it (a static libstdc++/libgcc would show here)"
  nm -D --defined-only "$lib" 2>/dev/null | grep -E ' (__gxx_personality_v0|_Unwind_RaiseException|__cxa_throw)$' || echo "none"
  if nm -D --defined-only "$lib" 2>/dev/null | grep -qE ' __cxa_throw$'; then
    echo "--- the library carries its own copy of libstdc++ (linked statically): exceptions from it cannot cross into Python"
    # Which input of the link brought it: the library's link command again, into a scratch
    # file, with GNU ld tracing the symbol and listing the files it opened.
    local link trace
    trace=$(mktemp -d)
    link=$(cd "$build" && ninja -t commands lib/libmrcnn_kernels.so | tail -n 1)
    link=${link% && :}  # CMake ends a link with `&& :`; the flags below belong to the linker
    if [[ -n $link ]]; then
      echo "--- where __cxa_throw comes from (ld --trace-symbol, a relink to $trace)"
      (cd "$build" && eval "${link/-o lib\/libmrcnn_kernels.so/-o $trace/relinked.so}" \
        -Wl,--trace-symbol=__cxa_throw -Wl,--trace 2>&1) | grep -E 'definition of __cxa_throw|libstdc\+\+|libsupc|libgcc' | head -n 20 || true
    fi
    rm -rf "$trace"
  fi
  echo "--- .comment (compilers that built it)"
  readelf -p .comment "$lib" 2>/dev/null | grep -v '^String dump' | sort -u | head -n 5 || true
  python3 -X faulthandler "$top/scripts/gpu-check/raise_probe.py" "$lib"
}

# ---- the run ----------------------------------------------------------------------------
say "output: $report, $log_file"
# pip's cmake and ninja sit in python3's scripts folder, which need not be on PATH.
py_scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)
for t in cmake ninja; do
  if ! command -v "$t" >/dev/null && [[ -n $py_scripts && -x $py_scripts/$t ]]; then
    export PATH=$py_scripts:$PATH
  fi
done
run_step environment environment || finish 1
run_step unpack "$top/scripts/gpu-check/unpack-packages.sh" --deps "$deps" --env-file "$build/deps.env" "$prefix" || finish 1
# CMAKE_PREFIX_PATH, LD_LIBRARY_PATH (run time, and GNU ld's lookup of the libraries'
# own dependencies), PATH (protoc) for every later step.
# shellcheck source=/dev/null
source "$build/deps.env"
run_step configure configure || finish 1
if [[ -n $targets ]]; then
  REPORT_LINES=12 run_step build build_targets || finish 1
  run_step smoke smoke || finish 1
fi

# Wheels carried for what the machine's python3 lacks (prepare-packages.sh): installed
# into the build dir, never into the machine's environment.
python_wheels() {
  local site=$build/py-site
  if python3 -c 'import pycocotools.mask' 2>/dev/null; then echo "pycocotools: already importable"; return 0; fi
  if ! python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    echo "the carried wheels are for Python 3.12 (the GPU host's); this python3 is $(python3 -V 2>&1): not installed"
    return 0
  fi
  compgen -G "$deps/wheels/*.whl" >/dev/null || { echo "no wheels in $deps/wheels (run prepare-packages.sh)"; return 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$deps"/wheels/*.whl
  PYTHONPATH=$site python3 -c 'import pycocotools.mask; print("pycocotools: from", pycocotools.__file__)'
}
if run_step python-wheels python_wheels; then export PYTHONPATH=$build/py-site${PYTHONPATH:+:$PYTHONPATH}; fi
[[ " $targets " == *" mrcnn_kernels "* ]] && { run_step raise-probe raise_probe || true; }

# The GPU gate: everything before it needs no GPU.
if ! python3 -c 'import torch; assert torch.cuda.is_available()' >> "$log_file" 2>&1; then
  gate_line="gpu-check: reached the GPU steps; no GPU visible here, stopping"
elif ((stop_before_gpu)); then
  gate_line="gpu-check: reached the GPU steps; a GPU is visible, stopping as asked (--stop-before-gpu)"
fi
if [[ -n $gate_line ]]; then
  echo "$gate_line" | tee -a "$log_file"
  # The GPU steps' plan: what would run next, each with its limit, against what is left.
  # shellcheck source=scripts/gpu-check/gpu-steps.sh
  source "$top/scripts/gpu-check/gpu-steps.sh"
  gpu_plan=$(GPU_STEP_PLAN=1 gpu_steps "$top" "$build" "$build/gpu-work" "$gpu_steps_regex")
  used=$(( $(date +%s) - check_start ))
  limits=$(awk -F'\t' '{ s += $2 } END { print s + 0 }' <<<"$gpu_plan")
  if ((budget_s > 0)); then
    gpu_plan_summary="budget ${budget_s} s: ${used} s used up to the gate, $((budget_s - used)) s left for GPU steps whose limits add up to ${limits} s (the later ones are cut or skipped when the earlier ones use their whole limit)"
    ((used < budget_s)) || gpu_plan_summary+="; the budget was spent before the gate"
  else
    gpu_plan_summary="no budget (--budget-s 0): ${used} s used up to the gate; the GPU steps' limits add up to ${limits} s"
  fi
  finish 3
fi

# ---- GPU steps ----------------------------------------------------------------------------
say "$device_line"
# shellcheck source=scripts/gpu-check/gpu-steps.sh
source "$top/scripts/gpu-check/gpu-steps.sh"
gpu_steps "$top" "$build" "$build/gpu-work" "$gpu_steps_regex"
finish "$any_failed"
