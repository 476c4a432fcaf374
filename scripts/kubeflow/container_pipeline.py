#!/usr/bin/env python3
"""A Kubeflow Pipelines (kfp v2) pipeline of our own container components.

Runs on any Kubeflow cluster (no SageMaker, no AWS) and locally with kfp.local's
DockerRunner (scripts/kubeflow/run_local.py):

    dataset ──▶ train ──▶ evaluate (COCO AP as pipeline metrics)
       │          └─────▶ serve-smoke (the serving image answers /ping and /invocations)
       └───────────────────────┘

Two variants share the steps after the dataset:
  mrcnn-shapes-train-eval      the dataset is made by `trainer make-shapes` (CI runs this one)
  mrcnn-dataset-train-eval     the dataset is imported from `dataset_uri` (dsl.importer): a COCO
                               folder with annotations/instances_<train>.json + <train>/ (and
                               the same for val), e.g. COCO 2017 as it unpacks

Each component's `command` is the whole program (`sh -c SCRIPT ...`): on Kubernetes it
replaces the image's ENTRYPOINT; run_local.py runs it the same way. Steps write
executor_output.json (the artifacts' URIs and the metrics' values): kfp.local records
output artifacts of container components only from that file, and the cluster's launcher
reads it for the Metrics metadata the UI shows.

Compile:  .venv/bin/python scripts/kubeflow/container_pipeline.py --output mrcnn-train-eval.yaml
          [--variant dataset] [--training-image URI] [--serving-image URI]
"""
import argparse
import sys

from kfp import compiler, dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

DEFAULT_TRAINING_IMAGE = "localhost/mrcnn-training:latest"
DEFAULT_SERVING_IMAGE = "localhost/mrcnn-serving:latest"

# Each step's program. Arguments come as positional parameters ($1, $2, ...) so no
# pipeline value is ever spliced into shell text. `set -eu`: the first failing command
# fails the step with its exit code.

MAKE_SHAPES = r"""
set -eu
out=$1 train=$2 val=$3 size=$4 seed=$5 executor_output=$6 uri=$7
mkdir -p "$out"
trainer make-shapes --output "$out" --train "$train" --val "$val" --size "$size" --seed "$seed"
mkdir -p "$(dirname "$executor_output")"
printf '{"artifacts": {"dataset": {"artifacts": [{"uri": "%s", "metadata": {"train_images": %s, "val_images": %s}}]}}}\n' \
  "$uri" "$train" "$val" >"$executor_output"
"""

# The SageMaker layout the entrypoint reads, built in the step's scratch space: the dataset
# is both channels (COCO's own layout names the split), the model dir is the output
# artifact, output/data (metrics.jsonl, report.html) is copied into it (training-output/).
TRAIN = r"""
set -eu
data=$1 model=$2 config_file=$3 opts=$4 train_split=$5 val_split=$6 executor_output=$7 uri=$8
for split in "$train_split" "$val_split"; do
  case $split in ''|.|..|*/*|*' '*) echo "train: split name \"$split\" must be a folder name (train_split, val_split)"; exit 2 ;; esac
done
base=$(mktemp -d -t opt_ml.XXXXXX)
# Scratch, under TMPDIR (default /tmp), removed at the end: the model and the data are links
# in it, which rm does not follow.
trap 'rm -rf "$base"' EXIT
mkdir -p "$base/input/config" "$base/input/data" "$model"
# The entrypoint writes <base>/model (it sets the trainer's SM_MODEL_DIR itself).
ln -s "$model" "$base/model"
# A channel per split, named after it: COCO's layout annotations/instances_<channel>.json.
ln -s "$data" "$base/input/data/$train_split"
[ "$val_split" = "$train_split" ] || ln -s "$data" "$base/input/data/$val_split"
python3 - "$base/input/config/hyperparameters.json" "$config_file" "$opts" "$train_split" "$val_split" <<'PY'
import json, sys
path, config_file, opts, train_split, val_split = sys.argv[1:]
opts = f"DATASETS.TRAIN [{train_split}] DATASETS.TEST [{val_split}] {opts}".strip()
hps = {"config-file": config_file, "opts": opts}
# SageMaker JSON-encodes every value; the entrypoint decodes them the same way.
json.dump({k: json.dumps(v) for k, v in hps.items()}, open(path, "w"))
PY
echo "hyperparameters: $(cat "$base/input/config/hyperparameters.json")"
entrypoint train --base-dir "$base"
test -s "$model/model.safetensors" || { echo "train: the job exited 0 but wrote no $model/model.safetensors"; exit 1; }
mkdir -p "$model/training-output"
cp -r "$base/output/data/." "$model/training-output/"
mkdir -p "$(dirname "$executor_output")"
printf '{"artifacts": {"model": {"artifacts": [{"uri": "%s", "metadata": {"framework": "mrcnn-toolkit"}}]}}}\n' \
  "$uri" >"$executor_output"
"""

# `trainer predict` on the val split, `trainer evaluate` for box and mask AP; the numbers
# become the Metrics artifact's metadata. A floor above 0 turns the step into a gate.
EVALUATE = r"""
set -eu
data=$1 model=$2 split=$3 min_box_ap50=$4 results=$5 executor_output=$6 metrics_uri=$7 results_uri=$8
work=$(mktemp -d -t eval.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$results"
annotations=$data/annotations/instances_$split.json
test -f "$annotations" || { echo "evaluate: no $annotations in the dataset"; exit 1; }
find "$data/$split" -maxdepth 1 -type f \( -name '*.jpg' -o -name '*.jpeg' -o -name '*.png' \) | sort >"$work/images"
test -s "$work/images" || { echo "evaluate: no JPEG or PNG images in $data/$split"; exit 1; }
echo "$(wc -l <"$work/images") images of split $split"
# On the GPUs when the step got some (the NVIDIA runtime then mounts /dev/nvidia0).
device=cpu
[ -e /dev/nvidia0 ] && device=cuda
echo "predicting on $device"
xargs -d '\n' trainer predict --device "$device" --model-dir "$model" --annotations "$annotations" \
  --output "$results/detections.json" --images <"$work/images"
trainer evaluate --annotations "$annotations" --results "$results/detections.json" --iou-type bbox --output "$results/bbox.json"
trainer evaluate --annotations "$annotations" --results "$results/detections.json" --iou-type segm --output "$results/segm.json"
python3 - "$results" "$executor_output" "$metrics_uri" "$results_uri" "$min_box_ap50" <<'PY'
import json, os, sys
results, executor_output, metrics_uri, results_uri, floor = sys.argv[1:]
metrics = {}
for iou_type, prefix in (("bbox", "box"), ("segm", "mask")):
    stats = json.load(open(os.path.join(results, f"{iou_type}.json"))).get("stats", {})
    for key in ("AP", "AP50", "AP75"):
        if key not in stats:
            sys.exit(f"evaluate: {iou_type}.json has no {key}: {sorted(stats)}")
        metrics[f"{prefix}_{key}"] = round(float(stats[key]), 4)
print("metrics: " + " ".join(f"{k}={v}" for k, v in metrics.items()))
os.makedirs(os.path.dirname(executor_output), exist_ok=True)
json.dump({"artifacts": {
    "metrics": {"artifacts": [{"uri": metrics_uri, "metadata": metrics}]},
    "results": {"artifacts": [{"uri": results_uri, "metadata": {}}]},
}}, open(executor_output, "w"))
if metrics["box_AP50"] < float(floor):
    sys.exit(f"evaluate: box AP50 {metrics['box_AP50']} is below the floor min_box_ap50={floor}")
PY
"""

# The serving image has no Python and no curl: bash's /dev/tcp talks HTTP to the server it
# started on loopback. Passes when /ping answers 200 and /invocations answers 200 with a
# JSON body carrying a detections list for one val image (run_local.py checks its contents).
SERVE_SMOKE = r"""
set -eu
data=$1 model=$2 split=$3 answer=$4 executor_output=$5 uri=$6
mkdir -p "$answer"
image=$(find "$data/$split" -maxdepth 1 -type f \( -name '*.jpg' -o -name '*.png' \) | sort | head -n 1)
test -n "$image" || { echo "serve-smoke: no image in $data/$split"; exit 1; }
case $image in *.png) type=image/png ;; *) type=image/jpeg ;; esac
work=$(mktemp -d -t serve.XXXXXX)
server --host 127.0.0.1 --port 0 --port-file "$work/port" --model-dir "$model" >"$work/server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
request() {  # METHOD PATH [BODY-FILE TYPE]: the raw HTTP answer on stdout
  exec 3<>"/dev/tcp/127.0.0.1/$(cat "$work/port")"
  if [ $# -gt 2 ]; then
    printf '%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\nAccept: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n' \
      "$1" "$2" "$4" "$(wc -c <"$3")" >&3
    cat "$3" >&3
  else
    printf '%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
  fi
  cat <&3
  exec 3<&-
}
ready=0
for _ in $(seq 1 600); do
  kill -0 "$server_pid" 2>/dev/null || { echo "serve-smoke: the server exited:"; tail -n 20 "$work/server.log"; exit 1; }
  if [ -s "$work/port" ] && request GET /ping 2>/dev/null | head -n 1 | grep -q ' 200 '; then ready=1; break; fi
  sleep 0.2
done
[ "$ready" = 1 ] || { echo "serve-smoke: /ping did not answer 200 within 120 s"; tail -n 20 "$work/server.log"; exit 1; }
echo "/ping 200"
request POST /invocations "$image" "$type" >"$work/answer.http"
head -n 1 "$work/answer.http" | grep -q ' 200 ' || { echo "serve-smoke: /invocations: $(head -c 600 "$work/answer.http")"; exit 1; }
sed '1,/^\r$/d' "$work/answer.http" >"$answer/answer.json"
grep -q '"detections"' "$answer/answer.json" || { echo "serve-smoke: no detections list in the answer: $(head -c 600 "$answer/answer.json")"; exit 1; }
cp "$image" "$answer/"
echo "/invocations 200 for $(basename "$image"): $(wc -c <"$answer/answer.json") bytes of JSON"
mkdir -p "$(dirname "$executor_output")"
printf '{"artifacts": {"answer": {"artifacts": [{"uri": "%s", "metadata": {"image": "%s"}}]}}}\n' \
  "$uri" "$(basename "$image")" >"$executor_output"
"""


def make_components(training_image: str, serving_image: str):
    """The four container components, bound to the images they run in."""

    @dsl.container_component
    def make_shapes(dataset: Output[Dataset], train_images: int, val_images: int, image_size: int, seed: int):
        return dsl.ContainerSpec(
            image=training_image,
            command=["sh", "-c", MAKE_SHAPES, "make-shapes"],
            args=[dataset.path, train_images, val_images, image_size, seed,
                  dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER, dataset.uri])

    @dsl.container_component
    def train(dataset: Input[Dataset], model: Output[Model], config_file: str, opts: str, train_split: str,
              val_split: str):
        return dsl.ContainerSpec(
            image=training_image,
            command=["sh", "-c", TRAIN, "train"],
            args=[dataset.path, model.path, config_file, opts, train_split, val_split,
                  dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER, model.uri])

    @dsl.container_component
    def evaluate(dataset: Input[Dataset], model: Input[Model], metrics: Output[Metrics],
                 results: Output[dsl.Artifact], split: str, min_box_ap50: float):
        return dsl.ContainerSpec(
            image=training_image,
            command=["sh", "-c", EVALUATE, "evaluate"],
            args=[dataset.path, model.path, split, min_box_ap50, results.path,
                  dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER, metrics.uri, results.uri])

    @dsl.container_component
    def serve_smoke(dataset: Input[Dataset], model: Input[Model], answer: Output[dsl.Artifact], split: str):
        return dsl.ContainerSpec(
            image=serving_image,
            command=["bash", "-c", SERVE_SMOKE, "serve-smoke"],
            args=[dataset.path, model.path, split, answer.path,
                  dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER, answer.uri])

    return make_shapes, train, evaluate, serve_smoke


def resourced(task, gpu_count, cpu_limit, memory_limit, step):
    """Resources as pipeline parameters (gpu_count None: no accelerator); the step name as the
    display name and as MRCNN_PIPELINE_STEP, which run_local.py names steps by."""
    task.set_display_name(step).set_cpu_limit(cpu_limit).set_memory_limit(memory_limit)
    if gpu_count is not None:
        task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(gpu_count)
    task.set_env_variable("MRCNN_PIPELINE_STEP", step)
    task.set_caching_options(False)
    return task


def build_pipelines(training_image: str = DEFAULT_TRAINING_IMAGE, serving_image: str = DEFAULT_SERVING_IMAGE):
    """Returns (shapes_pipeline, dataset_pipeline) for these images."""
    make_shapes, train, evaluate, serve_smoke = make_components(training_image, serving_image)

    def after_dataset(dataset, config_file, opts, train_split, val_split, min_box_ap50, gpu_count, cpu_limit,
                      memory_limit):
        trained = resourced(
            train(dataset=dataset, config_file=config_file, opts=opts, train_split=train_split, val_split=val_split),
            gpu_count, cpu_limit, memory_limit, "train")
        evaluated = resourced(
            evaluate(dataset=dataset, model=trained.outputs["model"], split=val_split, min_box_ap50=min_box_ap50),
            gpu_count, cpu_limit, memory_limit, "evaluate")
        resourced(serve_smoke(dataset=dataset, model=trained.outputs["model"], split=val_split),
                  gpu_count, cpu_limit, memory_limit, "serve-smoke").after(evaluated)

    @dsl.pipeline(name="mrcnn-shapes-train-eval",
                  description="Mask R-CNN on a synthetic shapes dataset: train, COCO AP, serving smoke test")
    def shapes_pipeline(train_images: int = 400,
                        val_images: int = 50,
                        image_size: int = 128,
                        dataset_seed: int = 1,
                        config_file: str = "mask_rcnn_R_50_FPN_shapes_cpu.yaml",
                        opts: str = "",
                        min_box_ap50: float = 0.0,
                        gpu_count: int = 0,
                        cpu_limit: str = "4",
                        memory_limit: str = "16G"):
        dataset = resourced(
            make_shapes(train_images=train_images, val_images=val_images, image_size=image_size, seed=dataset_seed),
            None, "1", "2G", "dataset")
        after_dataset(dataset.outputs["dataset"], config_file, opts, "train", "val", min_box_ap50, gpu_count,
                      cpu_limit, memory_limit)

    @dsl.pipeline(name="mrcnn-dataset-train-eval",
                  description="Mask R-CNN on a COCO-format dataset: train, COCO AP, serving smoke test")
    def dataset_pipeline(dataset_uri: str,
                         train_split: str = "train2017",
                         val_split: str = "val2017",
                         config_file: str = "mask_rcnn_R_50_FPN_1x.yaml",
                         opts: str = "",
                         min_box_ap50: float = 0.0,
                         gpu_count: int = 8,
                         cpu_limit: str = "64",
                         memory_limit: str = "480G"):
        imported = dsl.importer(artifact_uri=dataset_uri, artifact_class=Dataset, reimport=False)
        imported.set_display_name("dataset")
        after_dataset(imported.output, config_file, opts, train_split, val_split, min_box_ap50, gpu_count, cpu_limit,
                      memory_limit)

    return shapes_pipeline, dataset_pipeline


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="pipeline spec YAML to write")
    parser.add_argument("--variant", choices=("shapes", "dataset"), default="shapes")
    parser.add_argument("--training-image", default=DEFAULT_TRAINING_IMAGE)
    parser.add_argument("--serving-image", default=DEFAULT_SERVING_IMAGE)
    args = parser.parse_args(argv)
    shapes, dataset = build_pipelines(args.training_image, args.serving_image)
    compiler.Compiler().compile(shapes if args.variant == "shapes" else dataset, args.output)
    print(f"wrote {args.output} ({args.variant} variant, images {args.training_image}, {args.serving_image})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
