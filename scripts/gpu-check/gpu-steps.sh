# The GPU half of scripts/gpu-check.sh (sourced by it): every step that needs a GPU, each
# through run_step so that it is timed, logged and counted. A step's stdout (the benches'
# ratio lines, the smoke tests' figures) goes into the report as it is: the report is the
# record of what was measured, with the device named at its top.
#
# gpu_steps REPO BUILD WORK [REGEX]: REPO the checkout, BUILD its Release build (sm_90),
# WORK a scratch folder; only the steps whose name matches REGEX (grep -E) when given. The
# benches and tests find the build through MRCNN_BUILD_DIR.
gpu_steps() {
  local repo=$1 build=$2 work=$3
  gpu_step_regex=${4:-}
  export MRCNN_BUILD_DIR=$build PYTHONUNBUFFERED=1
  mkdir -p "$work"
  local model=$work/train/opt_ml_bf16/model shapes=$work/train/shapes

  # In order of value, each with its own limit (seconds): a run cut short by --budget-s
  # still has the most useful figures first. On an H100 (2026-11-26, commit 9cc68cb) the
  # steps took 3-27 s each (bench/RESULTS.md); the limits leave 3-6x that.
  # CUDA kernels against their CPU twins (test/kernels, label gpu).
  gpu_step "ctest -L gpu (CUDA kernels vs CPU twins)" 90 \
    ctest --test-dir "$build" -L gpu --output-on-failure
  # SOLVER.CUDA_GRAPHS: backbone, FPN and RPN head replayed from graphs vs eager on the
  # same padded batch: first-step losses (must agree) and the step time of each.
  gpu_step "training step with CUDA graphs vs eager, same padded batch, bf16 (800x1333, batch 8)" 120 \
    python3 "$repo/bench/model/bench_cuda_graphs.py" --device cuda --amp bf16 \
    --size 800x1333 --batch 8 --iters 8 --warmup 2
  # Training step: ours vs torchvision's, 800x1333, batch 8, with per-step operator and
  # host-sync counts on both sides, and every CUDA wait (torch's sync debug mode).
  gpu_step "training-step bench cuda --amp bf16 (800x1333, batch 8, vs torchvision)" 150 \
    python3 "$repo/bench/model/bench_train_step.py" --device cuda --amp bf16 \
    --size 800x1333 --batch 8 --iters 8 --warmup 2 --phases
  # Where the step's GPU time goes (issue 39): every kernel of both processes of one run of
  # the step bench recorded by CUPTI (a cupti-trace tool: .cupti-trace in the checkout, or
  # shared/tools/cupti-trace), summed per kind (convolution, layout transform,
  # elementwise, NMS, ROIAlign, ...) per measured step, ours and torchvision's.
  gpu_step "GPU kernel time per training step by kind, ours and torchvision's (CUPTI, bf16, 800x1333, batch 8)" 150 \
    gpu_kernel_table "$repo" "$work/trace"
  # fp16 with dynamic loss scaling: the overflow check, skip and scale update on the device
  # (since 55c8cda, 2026-11-27); the CUDA-wait row must read 0 on a non-logging step.
  gpu_step "training-step bench cuda --amp fp16 (800x1333, batch 8, vs torchvision)" 120 \
    python3 "$repo/bench/model/bench_train_step.py" --device cuda --amp fp16 \
    --size 800x1333 --batch 8 --iters 8 --warmup 2 --phases
  # A real job through the entrypoint at 800 px with AMP; its model feeds the comparison.
  gpu_step "training through entrypoint train, cuda, bf16, 800 px" 150 \
    python3 "$repo/scripts/gpu-check/train_smoke.py" --build "$build" --work "$work/train" --amp bf16
  gpu_step "training through entrypoint train, cuda, bf16, 800 px, SOLVER.CUDA_GRAPHS on" 150 \
    python3 "$repo/scripts/gpu-check/train_smoke.py" --build "$build" --work "$work/train" --amp bf16 --cuda-graphs
  gpu_step "trainer predict --device cuda vs --device cpu (same detections), masks both ways off the GPU" 120 \
    gpu_compare_predictions "$build" "$model" "$shapes" "$work/predict" "$repo"
  # The kernel oracle tests, now with their cuda parameters, against torchvision.ops. In
  # worker processes (pytest-xdist, which the GPU host's Python has): on an H100 and an H200
  # (2026-11-26) every case where our op raises killed its process with SIGSEGV
  # (the raise-probe step before the gate now checks that first), and a crashed worker is
  # reported with the test's name while the rest run.
  gpu_step "kernel oracle tests on cuda (vs torchvision.ops)" 150 \
    python3 -m pytest -q -rf -n 4 -p no:cacheprovider "$repo/test/oracle/kernels"
  # Masks encoded on the GPU (issue 40): bytes to the host and time from pasted masks to
  # counts strings, change points vs pixels + the host encoder (strings checked equal).
  gpu_step "mask RLE on the device vs pixels to the host (100 masks, 800x1333)" 60 \
    python3 "$repo/bench/kernels/bench_mask_rle.py" --device cuda --repeats 5
  # The server on cuda against the server on cpu, fp32, on the shapes val images (issue 40:
  # the same detections, masks and RLE strings; the share equal byte for byte is printed).
  gpu_step "serving cuda vs serving cpu, fp32 (same detections and masks)" 120 \
    python3 "$repo/scripts/gpu-check/compare_serving.py" --server "$build/bin/server" \
    --model-dir "$model" --images "$shapes"/val/*.png --devices cpu,cuda
  # Serving on the GPU with dynamic batching vs the Python reference server on the same GPU.
  # On an H100 (2026-11-26): ours measured in 14 s, then its Python peer did not finish
  # within 120 s.
  gpu_step "serving bench cuda (dynamic batching) vs the Python reference server" 180 \
    python3 "$repo/bench/serving/bench_serving.py" --device cuda --build-dir "$build" \
    --concurrency 8 --requests 96
  # SageMakerCV's optimizer: its operator and sync counts on the GPU.
  gpu_step "training-step bench cuda --amp bf16 --optimizer novograd (vs torchvision SGD)" 120 \
    python3 "$repo/bench/model/bench_train_step.py" --device cuda --amp bf16 --optimizer novograd \
    --size 800x1333 --batch 8 --iters 4 --warmup 2
  # Inference: ours vs torchvision eager, same weights and images, 800x1333, batch 1 and 8.
  local precision
  for precision in bf16 fp32 fp16; do
    gpu_step "inference bench cuda $precision (800x1333, batch 1 and 8, vs torchvision)" 90 \
      python3 "$repo/bench/model/bench_inference.py" --device cuda --precision "$precision" \
      --sizes 800x1333 --batches 1,8 --iters 5
  done
  gpu_step "training through entrypoint train, cuda, fp16, 800 px" 150 \
    python3 "$repo/scripts/gpu-check/train_smoke.py" --build "$build" --work "$work/train" --amp fp16
  gpu_step "kernel bench --device cuda" 120 \
    python3 "$repo/bench/kernels/bench_kernels.py" --device cuda
}

# gpu_kernel_table REPO OUT: the CUPTI trace of one run of the bf16 step bench; prints each
# process's step span and kernel time per kind (OUT/kernels.md has the top kernels too).
gpu_kernel_table() {
  local repo=$1 out=$2 tool=
  for tool in "$repo/.cupti-trace" "$repo/shared/tools/cupti-trace"; do
    [[ -f $tool/trace.sh ]] && break
    tool=
  done
  if [[ -z $tool ]]; then
    echo "no cupti-trace tool: put a CUPTI tracer with a trace.sh (trace.sh OUT -- COMMAND...) at .cupti-trace in the checkout"
    return 1
  fi
  bash "$tool/trace.sh" "$out" -- python3 "$repo/bench/model/bench_train_step.py" --device cuda \
    --amp bf16 --size 800x1333 --batch 8 --iters 3 --warmup 1 --count-steps 0 || return 1
  # Per process: the command, the burst table's head and the per-kind table (not the top list).
  awk '/^######## /{print; next} /^per burst, mean/{show=1} /^top [0-9]+ kernels/{show=0} show' "$out/kernels.md"
}

# Both sides in fp32 (the default `auto` is bf16 on a CPU with AVX512_BF16 or AMX, fp32 on
# CUDA), and TF32 off for cuDNN and cuBLAS (NVIDIA_TF32_OVERRIDE=0; LibTorch lets cuDNN
# convolutions use TF32 by default): what is left is the order of operations.
gpu_compare_predictions() {
  local build=$1 model=$2 shapes=$3 work=$4 repo=$5 device
  mkdir -p "$work"
  for device in cpu cuda; do
    NVIDIA_TF32_OVERRIDE=0 "$build/bin/trainer" predict --model-dir "$model" \
      --images "$shapes"/val/*.png --annotations "$shapes/annotations/instances_val.json" \
      --device "$device" --precision fp32 --output "$work/$device.json" || return 1
  done
  python3 "$repo/scripts/gpu-check/compare_predictions.py" "$work/cpu.json" "$work/cuda.json" || return 1
  # The masks' other way off the GPU (issue 40): paste boxes gathered there and copied as
  # pixels, encoded on the host, against the device encoder's strings of the run above.
  NVIDIA_TF32_OVERRIDE=0 "$build/bin/trainer" predict --model-dir "$model" \
    --images "$shapes"/val/*.png --annotations "$shapes/annotations/instances_val.json" \
    --device cuda --precision fp32 --mask-rle host --output "$work/cuda-host-rle.json" || return 1
  python3 "$repo/scripts/gpu-check/compare_predictions.py" --same-masks \
    "$work/cuda.json" "$work/cuda-host-rle.json"
}

# gpu_step NAME LIMIT CMD...: run_step for the steps REGEX selects, under `timeout` with
# LIMIT seconds or what is left of the check's budget (GPU_CHECK_DEADLINE, epoch seconds),
# whichever is less; skipped, and recorded as such, when less than 30 s is left. The
# output's last lines (the figures) go into the report.
# With GPU_STEP_PLAN set (gpu-check.sh at the gate), nothing runs: each selected step's
# name and limit are printed as "NAME<TAB>LIMIT" instead, the plan the report shows.
gpu_step() {
  local name=$1 limit=$2 left
  shift 2
  if [[ -n $gpu_step_regex ]] && ! grep -Eq -- "$gpu_step_regex" <<<"$name"; then
    [[ -n ${GPU_STEP_PLAN:-} ]] || say "step $name: not selected by --gpu-steps"
    return 0
  fi
  if [[ -n ${GPU_STEP_PLAN:-} ]]; then
    printf '%s\t%s\n' "$name" "$limit"
    return 0
  fi
  if [[ -n ${GPU_CHECK_DEADLINE:-} ]]; then
    left=$((GPU_CHECK_DEADLINE - $(date +%s)))
    if ((left < 30)); then
      skip_step "$name" "skipped: ${left} s of the budget left, under 30 s"
      return 0
    fi
    ((left < limit)) && limit=$left
  fi
  # A shell function cannot be run by `timeout`: run it in a bash that has it.
  if [[ $(type -t "$1") == function ]]; then
    export -f "$1"
    set -- bash -c '"$@"' _ "$@"
  fi
  REPORT_LINES=60 run_step "$name [limit ${limit} s]" timeout --kill-after=10 "$limit" "$@" || true  # a failed step is recorded; the others still run
}
