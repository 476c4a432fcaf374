#!/usr/bin/env bash
# The main job on its embedded default, on a fresh machine: set up, make the synthetic
# shapes dataset, lay out a local /opt/ml tree (config JSONs, channels), train through
# the entrypoint with the small CPU config, then serve the model and ask it about one
# validation image.
#
# Environment: MRCNN_DEMO_DIR (default demo/ in the checkout) holds everything it writes;
# MRCNN_DEMO_PORT (default 8080) is where the server listens on loopback.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"

bin="$top/build/bin"
work=${MRCNN_DEMO_DIR:-$top/demo}
base="$work/opt_ml"
shapes="$work/shapes"
port=${MRCNN_DEMO_PORT:-8080}
log() { printf '[demo] %s\n' "$*"; }

# 1. The dataset (kept between runs: same seed, same data).
if [[ ! -f $shapes/annotations/instances_val.json ]]; then
  log "making the shapes dataset in $shapes"
  "$bin/trainer" make-shapes --output "$shapes" --train "${MRCNN_DEMO_TRAIN:-400}" \
    --val "${MRCNN_DEMO_VAL:-50}" --seed 1 --size 128
fi

# 2. A fresh /opt/ml tree as SageMaker lays it out for a one-host job. Values in
# hyperparameters.json are JSON-encoded the way the Python SDK sends them.
log "laying out $base"
rm -rf "$base"
mkdir -p "$base/input/config" "$base/input/data" "$base/model" "$base/output" "$base/checkpoints"
ln -s "$shapes" "$base/input/data/train"
ln -s "$shapes" "$base/input/data/val"
cat > "$base/input/config/hyperparameters.json" <<JSON
{"config-file": "\"mask_rcnn_R_50_FPN_shapes_cpu.yaml\"", "resume": "false"}
JSON
cat > "$base/input/config/resourceconfig.json" <<JSON
{"current_host": "algo-1", "current_instance_type": "local_cpu", "current_group_name": "homogeneousCluster",
 "hosts": ["algo-1"], "instance_groups": [{"instance_group_name": "homogeneousCluster",
 "instance_type": "local_cpu", "hosts": ["algo-1"]}], "network_interface_name": "lo"}
JSON
cat > "$base/input/config/inputdataconfig.json" <<JSON
{"train": {"ContentType": "application/json", "TrainingInputMode": "File",
           "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
 "val":   {"ContentType": "application/json", "TrainingInputMode": "File",
           "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}
JSON
cat > "$base/input/config/checkpointconfig.json" <<JSON
{"LocalPath": "$base/checkpoints"}
JSON

# 3. Train exactly as SageMaker would start the container: `entrypoint train`.
log "training: $bin/entrypoint train --base-dir $base"
start=$(date +%s)
status=0
MRCNN_CONFIG_DIR="$top/configs" "$bin/entrypoint" train --base-dir "$base" || status=$?
log "training took $(( $(date +%s) - start )) s, exit code $status"
if ((status)); then
  [[ -f $base/output/failure ]] && { log "output/failure:"; cat "$base/output/failure"; echo; }
  exit "$status"
fi
log "model dir: $base/model"
log "TensorBoard event files: $base/output/tensorboard (view: $top/.venv/bin/tensorboard --logdir $base/output/tensorboard --host 127.0.0.1)"
log "run report: $base/output/data/report.html (open it in a browser)"
ls -l "$base/model"

# 4. Serve it and ask about one validation image.
image=$(find "$shapes/val" -type f \( -name '*.png' -o -name '*.jpg' \) | sort | head -1)
log "serving the model on 127.0.0.1:$port"
SM_MODEL_DIR="$base/model" "$bin/entrypoint" serve --model-dir "$base/model" --host 127.0.0.1 --port "$port" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$port/ping" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { log "the server exited before it was ready"; exit 1; }
  sleep 0.2
done
log "POST /invocations $image"
curl -fsS -H 'Content-Type: image/png' -H 'X-Amzn-SageMaker-Custom-Attributes: score_threshold=0.5,masks=rle' \
  --data-binary @"$image" "http://127.0.0.1:$port/invocations" > "$work/detections.json"
"$top/.venv/bin/python" - "$work/detections.json" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
images = body if isinstance(body, list) else body.get("predictions", [body])
for im in images:
    dets = im.get("detections", [])
    print(f"[demo] {len(dets)} detections")
    for d in dets:
        print("[demo]   {:<10} score {:.3f} box {}".format(d["label"], d["score"], [round(v, 1) for v in d["box"]]))
PY
"$bin/trainer" visualize --image "$image" --detections "$work/detections.json" --output "$work/detections.png"
log "drawn: $work/detections.png"
