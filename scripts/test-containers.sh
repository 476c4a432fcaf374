#!/usr/bin/env bash
# Builds the three images with podman and runs them for real, without a GPU:
#   1. podman and the Debian base image (scripts/containers/podman-setup.sh, idempotent)
#   2. builds the training, serving and drone images with the README's `docker build`
#      commands run through podman
#   3. training: a shapes /opt/ml tree, `run IMAGE train` -> exit 0, model/ written
#   4. serving: `run -d ... IMAGE serve` on that model -> /ping 200, /invocations with a JPEG
#      answers detections, `podman stop` -> the container exits 0
#   5. a bad config (misspelt hyperparameter) -> non-zero exit, output/failure names the key
# Each step prints what it checked and how long it took; on a failure, the container's log tail.
#
# The commands are the README's ("Running it", "Containers"), with `docker` replaced by
# `podman`; this script checks that the README still has each of them word for word. To them
# it only adds flags, and replaces the host side of -p/-v with its own port and folders:
#   build: --pull=never (the base comes from podman-setup.sh), --force-rm (no build containers
#          left behind by a failed build), --network host (apt-get and pip
#          inside the build reach Debian's archive and PyPI the way this machine does),
#          this machine's ccache and pip caches mounted and named by CCACHE_DIR and
#          PIP_CACHE_DIR (instead of the Dockerfiles' own cache mounts), WITH_EFA=0 (AWS's EFA
#          installer cannot be downloaded here), TORCH_CUDA_ARCH_LIST (fewer GPU targets,
#          default 8.0;9.0 = scripts/setup.sh's, so the kernels' compiles can hit the host's
#          ccache entries) and BUILD_JOBS.
#   run:   --network none for training; serving on a podman network this script creates and
#          removes, published on 127.0.0.1 only; --name so cleanup finds every container.
#
# Usage: scripts/test-containers.sh [--archs LIST] [--jobs N] [--skip-build] [--keep]
#   --archs LIST   TORCH_CUDA_ARCH_LIST for the builds (default "8.0;9.0"; "" = the
#                  Dockerfile's full list, sm_75..sm_100 + PTX: much longer)
#   --jobs N       compile jobs in the image build (default: this machine's cores)
#   --skip-build   use the images as they are (they must exist)
#   --keep         keep the work folder (build-containers/)
# Needs root (rootful podman). Not part of .ci/run: a cold build downloads ~4 GB of wheels and
# compiles for tens of minutes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

archs="8.0;9.0" jobs=$(nproc) skip_build=0 keep=0
while (($#)); do
  case $1 in
    --archs) archs=${2?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "test-containers: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf '[test-containers] %s\n' "$*" >&2; }
work=$top/build-containers
tag=$$
train_ctr=mrcnn-test-train-$tag serve_ctr=mrcnn-test-serve-$tag bad_ctr=mrcnn-test-bad-$tag
tool_ctr=mrcnn-test-tool-$tag net=mrcnn-test-net-$tag
failure_log=

cleanup() {
  local c
  for c in "$train_ctr" "$serve_ctr" "$bad_ctr" "$tool_ctr"; do
    podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
  done
  podman network rm -f "$net" >/dev/null 2>&1 || true
  if ((keep == 0)); then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Steps: name, duration, result; a failing step prints the tail of its log (or container's).
step_names=() step_secs=() step_start=
step() { step_start=$(date +%s.%N); log "== $1"; step_names+=("$1"); }
step_done() {
  local secs
  secs=$(awk -v a="$step_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  step_secs+=("$secs")
  log "   ok ($secs s)"
}
check() { log "   checked: $*"; }
fail() {
  log "FAILED: $*"
  if [[ -n $failure_log && -s $failure_log ]]; then
    log "last lines of $failure_log:"
    tail -n 40 "$failure_log" | sed 's/^/    /' >&2
  fi
  exit 1
}
summary() {
  log "steps:"
  for i in "${!step_secs[@]}"; do printf '  %8s s  %s\n' "${step_secs[$i]}" "${step_names[$i]}" >&2; done
}

# The README's commands (docker), checked against the README, then run with podman.
readme_has() {
  grep -qxF -- "$1" README.md || fail "README.md no longer has the line: $1 (keep README and this script in step)"
}
build_training='docker build -t mrcnn-training .'
build_serving='docker build -f Dockerfile.serving -t mrcnn-serving .'
build_drone='docker build -f Dockerfile.dronetraining --build-arg BASE_IMAGE=mrcnn-training -t mrcnn-drone .'
run_training='docker run --rm -v "$PWD/opt_ml":/opt/ml mrcnn-training train'
run_serving='docker run -d --name mrcnn-serving -p 8080:8080 -v "$PWD/opt_ml/model":/opt/ml/model mrcnn-serving serve'
stop_serving='docker stop mrcnn-serving'
for line in "$build_training" "$build_serving" "$build_drone" "$run_training" "$run_serving" "$stop_serving"; do
  readme_has "$line"
done

# `podman build` from a README `docker build` line: local flags go after `build`.
podman_build() {  # README-LINE LOG
  local words
  read -r -a words <<<"$1"
  [[ ${words[0]} == docker && ${words[1]} == build ]] || fail "not a docker build line: $1"
  local flags=(--pull=never --network host --force-rm
    -v "$host_ccache:/var/cache/host-ccache" --build-arg CCACHE_DIR=/var/cache/host-ccache
    -v "$host_pip:/var/cache/host-pip" --build-arg PIP_CACHE_DIR=/var/cache/host-pip
    --build-arg WITH_EFA=0 --build-arg BUILD_JOBS="$jobs")
  [[ -n $archs ]] && flags+=(--build-arg TORCH_CUDA_ARCH_LIST="$archs")
  failure_log=$2
  log "   podman build ${flags[*]} ${words[*]:2}"
  local before left
  before=$(buildah containers -q 2>/dev/null | sort)
  if ! podman build "${flags[@]}" "${words[@]:2}" >"$2" 2>&1; then
    # buildah 1.28 keeps the working containers of earlier stages when a later stage fails,
    # --force-rm notwithstanding. They are named, not removed: another build running on this
    # machine at the same time (e.g. scripts/gpu-check/test-mimic.sh) has its own.
    left=$(comm -13 <(echo "$before") <(buildah containers -q 2>/dev/null | sort) | tr '\n' ' ')
    [[ -z ${left// } ]] || log "   buildah working containers new since this build began: $left(buildah rm them if they are this build's)"
    fail "podman build failed (log: $2)"
  fi
}

host_ccache=$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")
host_pip=$(python3 -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")
mkdir -p "$host_ccache" "$host_pip"

image_mb() { podman image inspect -f '{{.Size}}' "$1" | awk '{ printf "%.0f", $1 / 1e6 }'; }

rm -rf "$work"
mkdir -p "$work"
start_all=$(date +%s)

step "podman and the Debian base image (scripts/containers/podman-setup.sh)"
failure_log=$work/podman-setup.log
bash scripts/containers/podman-setup.sh >"$failure_log" 2>&1 || fail "podman-setup.sh failed"
podman image exists docker.io/library/debian:bookworm-slim || fail "no debian:bookworm-slim"
check "rootful podman works, localhost/debian:bookworm-slim is also docker.io/library/debian:bookworm-slim"
step_done

if ((skip_build == 0)); then
  step "build the training image: $build_training"
  podman_build "$build_training" "$work/build-training.log"
  grep '^mrcnn-build:' "$work/build-training.log" | sed 's/^/    /' >&2 || log "   (compile step cached by podman: no ccache numbers)"
  check "built; its build stage's ccache numbers above"
  step_done

  step "build the serving image: $build_serving"
  podman_build "$build_serving" "$work/build-serving.log"
  grep '^mrcnn-build:' "$work/build-serving.log" | sed 's/^/    /' >&2 || check "compile stage reused from the training image's build"
  step_done

  step "build the drone image: $build_drone"
  podman_build "$build_drone" "$work/build-drone.log"
  step_done
fi

step "images: sizes and contents"
for image in mrcnn-training mrcnn-serving mrcnn-drone; do
  podman image exists "$image" || fail "no image $image"
  log "   $image: $(image_mb "$image") MB"
done
failure_log=$work/contents.log
# No compiler, no -dev package, no pip cache in the run-time images; the drone default config
# is shipped in the drone image.
podman run --rm --name "$tool_ctr" --network none --entrypoint /bin/sh mrcnn-training -c \
  'for p in g++ gcc cmake ninja-build ccache; do dpkg -s $p >/dev/null 2>&1 && echo "has $p"; done;
   dpkg-query -W -f "\${Package}\n" | grep -- "-dev$" | sed "s/^/has /";
   test -d /root/.cache/pip && echo "has a pip cache"; test -e /usr/local/cuda && echo "has /usr/local/cuda"; true' >"$failure_log" 2>&1
[[ ! -s $failure_log ]] || fail "the training image has build-only things: $(tr '\n' ' ' <"$failure_log")"
podman run --rm --name "$tool_ctr" --network none --entrypoint /bin/sh mrcnn-serving -c \
  'for p in g++ gcc cmake python3; do dpkg -s $p >/dev/null 2>&1 && echo "has $p"; done;
   dpkg-query -W -f "\${Package}\n" | grep -- "-dev$" | sed "s/^/has /";
   test -e /opt/mrcnn/src/build/bin/trainer && echo "has the trainer"; test -e /usr/local/cuda && echo "has /usr/local/cuda"; true' >"$failure_log" 2>&1
[[ ! -s $failure_log ]] || fail "the serving image has more than serving needs: $(tr '\n' ' ' <"$failure_log")"
drone_cfg=$(podman image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' mrcnn-drone | sed -n 's/^MRCNN_DEFAULT_CONFIG=//p')
podman run --rm --name "$tool_ctr" --network none --entrypoint /bin/sh mrcnn-drone -c \
  "test -f \"\$MRCNN_CONFIG_DIR/$drone_cfg\"" || fail "the drone image lacks its default config $drone_cfg"
check "no compiler, -dev package, pip cache or CUDA toolkit in training/serving; no Python or trainer in serving; drone default config $drone_cfg present"
step_done

step "a shapes /opt/ml tree (trainer make-shapes in the training image)"
tree=$work/opt_ml
mkdir -p "$tree/input/config" "$tree/input/data"
failure_log=$work/make-shapes.log
podman run --rm --name "$tool_ctr" --network none -v "$tree/input/data:/data" --entrypoint trainer \
  mrcnn-training make-shapes --output /data/train --size 64 --train 16 --val 4 --seed 3 --format jpg \
  >"$failure_log" 2>&1 || fail "make-shapes failed"
cp -r "$tree/input/data/train" "$tree/input/data/val"
# The engine tests' small schedule (test/trainer/engine/test_train_resume.py) on 64 px images.
opts="MODEL.FPN.OUT_CHANNELS 32 MODEL.ROI_BOX_HEAD.FC_DIM 64 MODEL.ROI_MASK_HEAD.CONV_DIM 32"
opts+=" MODEL.RPN.POST_NMS_TOPK_TRAIN 50 MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32"
opts+=" INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64"
opts+=" SOLVER.IMS_PER_BATCH 2 SOLVER.MAX_ITER 12 SOLVER.WARMUP_ITERS 2 SOLVER.CHECKPOINT_PERIOD 4"
opts+=" SOLVER.LOG_PERIOD 1 DATALOADER.NUM_WORKERS 1 SEED 7"
printf '{"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": "%s"}\n' "$opts" \
  >"$tree/input/config/hyperparameters.json"
check "16 train + 4 val JPEGs, channels train and val, hyperparameters.json"
step_done

step "training: $run_training"
failure_log=$work/train.log
set +e
podman run --rm --name "$train_ctr" --network none -v "$tree":/opt/ml mrcnn-training train >"$failure_log" 2>&1
rc=$?
set -e
((rc == 0)) || fail "training exited $rc$( [[ -f $tree/output/failure ]] && printf '; output/failure: %s' "$(cat "$tree/output/failure")")"
for f in model.safetensors config.yaml classes.json; do
  [[ -s $tree/model/$f ]] || fail "model/$f was not written"
done
grep -q '"iteration": *12' "$tree/output/data/metrics.jsonl" || fail "metrics.jsonl has no iteration 12"
check "exit 0; model/model.safetensors, config.yaml, classes.json; metrics.jsonl reached iteration 12"
step_done

step "serving: $run_serving"
failure_log=$work/serve.log
podman network create "$net" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
podman run -d --name "$serve_ctr" --network "$net" -p "127.0.0.1:$port:8080" \
  -v "$tree/model":/opt/ml/model mrcnn-serving serve >/dev/null || fail "podman run failed"
serve_logs() { podman logs "$serve_ctr" >"$failure_log" 2>&1 || true; }
ping_code=
for _ in $(seq 1 600); do
  ping_code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ping" || true)
  [[ $ping_code == 200 ]] && break
  [[ $(podman inspect -f '{{.State.Running}}' "$serve_ctr") == true ]] || { serve_logs; fail "the server exited before it was ready"; }
  sleep 0.2
done
[[ $ping_code == 200 ]] || { serve_logs; fail "/ping answered $ping_code after 120 s"; }
check "/ping 200 on 127.0.0.1:$port"
jpeg=$(find "$tree/input/data/val/val" -name '*.jpg' | sort | head -n 1)
[[ -n $jpeg ]] || fail "no validation JPEG"
curl -sS -o "$work/detections.json" -w '%{http_code}\n' -H 'Content-Type: image/jpeg' \
  -H 'X-Amzn-SageMaker-Custom-Attributes: score_threshold=0.0' \
  --data-binary @"$jpeg" "http://127.0.0.1:$port/invocations" >"$work/invocations.status" ||
  { serve_logs; fail "POST /invocations failed"; }
[[ $(cat "$work/invocations.status") == 200 ]] || { serve_logs; fail "/invocations answered $(cat "$work/invocations.status"): $(head -c 300 "$work/detections.json")"; }
ndet=$(python3 - "$work/detections.json" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
dets = body["detections"]
assert body["width"] == 64 and body["height"] == 64, body
for d in dets:
    assert len(d["box"]) == 4 and d["label"] and 0.0 <= d["score"] <= 1.0 and d["mask"]["size"] == [64, 64], d
assert dets, "no detections at score_threshold=0.0"
print(len(dets))
PY
) || { serve_logs; fail "/invocations answer is not what the contract says: $(head -c 300 "$work/detections.json")"; }
check "/invocations with $(basename "$jpeg") (JPEG): 200, $ndet detections with box, label, score, RLE mask"
podman stop -t 30 "$serve_ctr" >/dev/null
rc=$(podman inspect -f '{{.State.ExitCode}}' "$serve_ctr")
((rc == 0)) || { serve_logs; fail "the server exited $rc on podman stop"; }
check "podman stop: the server drained and exited 0"
podman rm "$serve_ctr" >/dev/null
podman network rm "$net" >/dev/null
step_done

step "bad config: misspelt hyperparameter (confg-file) -> non-zero exit, output/failure names it"
bad=$work/opt_ml_bad
mkdir -p "$bad/input/config" "$bad/input/data"
cp -r "$tree/input/data/train" "$bad/input/data/train"
echo '{"confg-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml"}' >"$bad/input/config/hyperparameters.json"
failure_log=$work/bad.log
set +e
podman run --rm --name "$bad_ctr" --network none -v "$bad":/opt/ml mrcnn-training train >"$failure_log" 2>&1
rc=$?
set -e
((rc != 0)) || fail "training with a misspelt hyperparameter exited 0"
[[ -f $bad/output/failure ]] || fail "no output/failure written (exit $rc)"
grep -q '"confg-file"' "$bad/output/failure" || fail "output/failure does not name the key: $(cat "$bad/output/failure")"
check "exit $rc; output/failure: $(head -c 200 "$bad/output/failure")"
step_done

summary
log "OK: all steps passed in $(( $(date +%s) - start_all )) s"
