#!/usr/bin/env bash
# Kubeflow's two ways of training across pods, replayed with podman on one machine: two
# containers of the training image (a Master and a Worker replica, or two TrainJob nodes)
# on their own podman network, with exactly the variables each controller sets, the args
# and mounts of scripts/kubeflow/pytorchjob.yaml / trainjob.yaml (one tree shared by both
# pods, as their ReadWriteMany claim is), and a small CPU job:
#   pytorchjob  the Training Operator's PyTorchJob (kubeflow.org/v1): MASTER_ADDR,
#               MASTER_PORT, WORLD_SIZE, RANK per pod, plus PET_NNODES,
#               PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT
#   trainjob    Kubeflow Trainer v2's TrainJob (trainer.kubeflow.org/v1alpha1, torch
#               runtime): the PET_* variables only
# Each must: exit 0 on both containers, reach the same final weights on both ranks (not the
# initial ones), write the model once, from rank 0. Prints each job's seconds.
#
# Usage: scripts/kubeflow/test-kubeflow-jobs.sh [--image IMAGE] [--work DIR] [--iters N]
#   --image  the training image (default localhost/mrcnn-training:latest; build it first,
#            e.g. through scripts/test-containers.sh)
#   --work   scratch folder (default build/kubeflow-jobs; emptied first)
# Every container and network it creates is removed on exit. Needs rootful podman with the
# dnsname plugin (scripts/containers/podman-setup.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
image=localhost/mrcnn-training:latest work=$top/build/kubeflow-jobs iters=6
while (($#)); do
  case $1 in
    --image) image=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "test-kubeflow-jobs: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[kubeflow-jobs] %s\n' "$*" >&2; }
tag=$$
net=mrcnn-kubeflow-$tag
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  podman network rm -f "$net" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  log "FAILED: $*"
  local f
  for f in "${logs[@]:-}"; do [[ -f $f ]] && { log "--- last lines of $f"; tail -n 25 "$f" >&2; }; done
  exit 1
}
logs=()
podman image exists "$image" || fail "no image $image: build it first (scripts/test-containers.sh builds it)"
rm -rf "$work"
mkdir -p "$work/data"

# The manifests' container: args after `train --` are the trainer's; the same flags run here
# with a small model, and the same mounts.
read -r -a manifest_args < <(python3 - "$top/scripts/kubeflow/pytorchjob.yaml" <<'PY'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
[container] = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
print(" ".join(container["args"][:2]))
PY
)
[[ "${manifest_args[*]}" == "train --" ]] || fail "pytorchjob.yaml's args no longer start with: train --"
opts="MODEL.FPN.OUT_CHANNELS 32 MODEL.ROI_BOX_HEAD.FC_DIM 64 MODEL.ROI_MASK_HEAD.CONV_DIM 32"
opts+=" MODEL.RPN.POST_NMS_TOPK_TRAIN 50 MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32"
opts+=" INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64"
opts+=" SOLVER.IMS_PER_BATCH 2 SOLVER.WARMUP_ITERS 2 SOLVER.LOG_PERIOD 1 DATALOADER.NUM_WORKERS 1 SEED 7"
opts+=" SOLVER.MAX_ITER $iters SOLVER.CHECKPOINT_PERIOD 100"
trainer_args=(--config-file mask_rcnn_R_50_FPN_shapes_cpu.yaml --opts "$opts")

log "dataset: trainer make-shapes in $image"
logs=("$work/make-shapes.log")
podman run --rm --network none -v "$work/data:/data" --entrypoint trainer "$image" \
  make-shapes --output /data/train --size 64 --train 16 --val 4 --seed 3 --format jpg \
  >"$work/make-shapes.log" 2>&1 || fail "make-shapes failed"
cp -r "$work/data/train" "$work/data/val"
podman network create "$net" >/dev/null || fail "podman network create $net"
[[ $(podman network inspect -f '{{.DNSEnabled}}' "$net") == true ]] ||
  fail "network $net has no DNS: is the dnsname CNI plugin installed (scripts/containers/podman-setup.sh)?"

# run_job STYLE: the two pods of one job; returns after both exited and were checked.
run_job() {
  local style=$1 job=mrcnn-$1-$tag shared=$work/$1 rank host master port pids=() envs name start
  mkdir -p "$shared/checkpoints" "$shared/model" "$shared/output"
  case $style in
    pytorchjob) master=$job-master-0 port=23456 ;;
    trainjob) master=$job-node-0-0 port=29400 ;;
  esac
  start=$(date +%s)
  logs=()
  for rank in 0 1; do
    case $style in
      pytorchjob)
        if ((rank == 0)); then host=$job-master-0; else host=$job-worker-0; fi
        envs=(-e "MASTER_ADDR=$master" -e "MASTER_PORT=$port" -e WORLD_SIZE=2 -e "RANK=$rank"
              -e PET_NNODES=2 -e PET_NPROC_PER_NODE=1 -e "PET_NODE_RANK=$rank"
              -e "PET_MASTER_ADDR=$master" -e "PET_MASTER_PORT=$port" -e PYTHONUNBUFFERED=1) ;;
      trainjob)
        host=$job-node-0-$rank
        envs=(-e PET_NNODES=2 -e PET_NPROC_PER_NODE=1 -e "PET_NODE_RANK=$rank"
              -e "PET_MASTER_ADDR=$master" -e "PET_MASTER_PORT=$port") ;;
    esac
    name=$host
    containers+=("$name")
    logs+=("$work/$style-rank$rank.log")
    # The manifests' env (SAGEMAKER_BASE_DIR) and mounts (data read-only; checkpoints,
    # model and output shared); the dump folder and the peer timeout are the test's.
    podman run --rm --name "$name" --hostname "$host" --network "$net" --network-alias "$host" \
      "${envs[@]}" -e SAGEMAKER_BASE_DIR=/opt/ml -e MRCNN_PEER_TIMEOUT=120 \
      -e MRCNN_DUMP_WEIGHTS_DIR=/opt/ml/output/dump \
      -v "$work/data:/opt/ml/input/data:ro" -v "$shared/checkpoints:/opt/ml/checkpoints" \
      -v "$shared/model:/opt/ml/model" -v "$shared/output:/opt/ml/output" \
      "$image" "${manifest_args[@]}" "${trainer_args[@]}" >"$work/$style-rank$rank.log" 2>&1 &
    pids+=($!)
  done
  local rc
  for rank in 0 1; do
    set +e; timeout 600 tail --pid="${pids[$rank]}" -f /dev/null; wait "${pids[$rank]}"; rc=$?; set -e
    ((rc == 0)) || fail "$style: rank $rank exited $rc$([[ -f $shared/output/failure ]] && printf '; output/failure: %s' "$(cat "$shared/output/failure")")"
  done
  grep -q "launcher kubeflow\|\"launcher\": \"kubeflow\"\|kubeflow" "$work/$style-rank0.log" ||
    log "note: rank 0's log does not name the kubeflow launcher"
  local same
  same=$(python3 "$top/scripts/containers/check_outputs.py" same-weights "$shared/output/dump/final_rank0.safetensors" \
    "$shared/output/dump/final_rank1.safetensors" "$shared/output/dump/initial_rank0.safetensors") ||
    fail "$style: the two ranks' final weights differ (or did not move)"
  [[ -s $shared/model/model.safetensors ]] || fail "$style: no model/model.safetensors"
  grep -q '\[model\] wrote' "$work/$style-rank0.log" || fail "$style: rank 0 did not write the model"
  ! grep -q '\[model\] wrote' "$work/$style-rank1.log" || fail "$style: rank 1 wrote the model too"
  log "$style: both pods exit 0 after $iters iterations in $(($(date +%s) - start)) s; $same; the model written once, by rank 0"
}

run_job pytorchjob
run_job trainjob
log "OK: a PyTorchJob (Training Operator variables) and a TrainJob (Trainer v2's PET_* only) trained across two containers"
