"""Kubeflow Pipelines (kfp v2 SDK) definition: train Mask R-CNN as a SageMaker training
job with the project's training image, create a SageMaker model from the job's
model.tar.gz with the serving image, and deploy it to a real-time endpoint.

Steps (each a container of Amazon SageMaker Components for Kubeflow Pipelines, v1
interface, except the first):
  1. job-inputs        builds HyperParameters / channels / CheckpointConfig from the
                       flat pipeline parameters (scripts/kubeflow/job_inputs.py)
  2. training-job      SageMaker CreateTrainingJob, waits; outputs model_artifact_url
  3. model             SageMaker CreateModel(serving image, model_artifact_url)
  4. endpoint          SageMaker CreateEndpointConfig + CreateEndpoint(model)

The component specs are files in scripts/kubeflow/components/ (no download at compile
time); the components' container image is the pipeline parameter
sagemaker_components_image.

Compile:  .venv/bin/python scripts/kubeflow/pipeline.py --output mrcnn_sagemaker_pipeline.yaml
"""
import argparse
import json
import pathlib
import sys
from typing import Dict, List

from kfp import compiler, components, dsl

HERE = pathlib.Path(__file__).resolve().parent
COMPONENTS_DIR = HERE / "components"
# Regenerate with: build/bin/trainer metric-definitions > scripts/kubeflow/metric_definitions.json
METRIC_DEFINITIONS_FILE = HERE / "metric_definitions.json"
JOB_INPUTS_SOURCE = HERE / "job_inputs.py"

SAGEMAKER_COMPONENTS_IMAGE = "public.ecr.aws/kubeflow-on-aws/aws-sagemaker-kfp-components:1.1.2"
PIPELINE_NAME = "mrcnn-sagemaker-train-deploy"


def load_metric_definitions(path: pathlib.Path = METRIC_DEFINITIONS_FILE) -> Dict[str, str]:
    """The trainer's MetricDefinitions list ([{"Name", "Regex"}]) as the component's
    name -> regex map."""
    definitions: List[Dict[str, str]] = json.loads(path.read_text())
    result: Dict[str, str] = {}
    for entry in definitions:
        if set(entry) != {"Name", "Regex"}:
            raise ValueError(f"{path}: every entry needs exactly Name and Regex, got {sorted(entry)}")
        if entry["Name"] in result:
            raise ValueError(f"{path}: metric {entry['Name']!r} is defined twice")
        result[entry["Name"]] = entry["Regex"]
    if not 0 < len(result) <= 40:
        raise ValueError(f"{path}: SageMaker accepts 1 to 40 metric definitions, got {len(result)}")
    return result


def job_inputs_component_text() -> str:
    """A container component that runs job_inputs.py (embedded, so the step needs
    nothing from this repository) with python3 in the components image."""
    spec = {
        "name": "Job inputs",
        "description": "Builds the SageMaker HyperParameters, channels and CheckpointConfig.",
        "inputs": [
            {"name": "config_file", "type": "String"},
            {"name": "opts", "type": "String"},
            {"name": "resume", "type": "String"},
            {"name": "eval_only", "type": "Bool"},
            {"name": "extra_hyperparameters", "type": "JsonObject"},
            {"name": "train_s3_uri", "type": "String"},
            {"name": "val_s3_uri", "type": "String"},
            {"name": "weights_s3_uri", "type": "String"},
            {"name": "training_input_mode", "type": "String"},
            {"name": "checkpoint_s3_uri", "type": "String"},
            {"name": "spot_instance", "type": "Bool"},
            {"name": "max_run_time", "type": "Integer"},
            {"name": "max_wait_time", "type": "Integer"},
        ],
        "outputs": [
            {"name": "hyperparameters", "type": "JsonObject"},
            {"name": "channels", "type": "JsonArray"},
            {"name": "checkpoint_config", "type": "JsonObject"},
        ],
        "implementation": {
            "container": {
                "image": SAGEMAKER_COMPONENTS_IMAGE,
                "command": ["python3", "-c", JOB_INPUTS_SOURCE.read_text()],
                "args": [
                    "--config-file", {"inputValue": "config_file"},
                    "--opts", {"inputValue": "opts"},
                    "--resume", {"inputValue": "resume"},
                    "--eval-only", {"inputValue": "eval_only"},
                    "--extra-hyperparameters", {"inputValue": "extra_hyperparameters"},
                    "--train", {"inputValue": "train_s3_uri"},
                    "--val", {"inputValue": "val_s3_uri"},
                    "--weights", {"inputValue": "weights_s3_uri"},
                    "--input-mode", {"inputValue": "training_input_mode"},
                    "--checkpoint-s3-uri", {"inputValue": "checkpoint_s3_uri"},
                    "--spot-instance", {"inputValue": "spot_instance"},
                    "--max-run-time", {"inputValue": "max_run_time"},
                    "--max-wait-time", {"inputValue": "max_wait_time"},
                    "--hyperparameters-out", {"outputPath": "hyperparameters"},
                    "--channels-out", {"outputPath": "channels"},
                    "--checkpoint-config-out", {"outputPath": "checkpoint_config"},
                ],
            }
        },
    }
    return json.dumps(spec)  # JSON is YAML


job_inputs_op = components.load_component_from_text(job_inputs_component_text())
training_job_op = components.load_component_from_file(str(COMPONENTS_DIR / "sagemaker_training_job.yaml"))
model_op = components.load_component_from_file(str(COMPONENTS_DIR / "sagemaker_model.yaml"))
endpoint_op = components.load_component_from_file(str(COMPONENTS_DIR / "sagemaker_endpoint.yaml"))

DEFAULT_METRIC_DEFINITIONS = load_metric_definitions()


@dsl.pipeline(
    name=PIPELINE_NAME,
    description="Mask R-CNN: SageMaker training job (training image) -> SageMaker model "
    "(serving image) -> real-time endpoint.",
)
def mrcnn_sagemaker_pipeline(
    # Where and as whom.
    region: str,
    role_arn: str,
    # Images (ECR URIs) built from Dockerfile (or Dockerfile.dronetraining) and the serving Dockerfile.
    training_image: str,
    serving_image: str,
    # Data: COCO channels (annotations.json + images/), optional safetensors weights.
    train_s3_uri: str,
    val_s3_uri: str,
    output_s3_uri: str,
    weights_s3_uri: str = "",
    checkpoint_s3_uri: str = "",
    training_input_mode: str = "File",
    # Hyperparameters as `trainer train` expects them (trainer/engine/config/job_config.h).
    config_file: str = "mask_rcnn_R_50_FPN_1x.yaml",
    opts: str = "",
    resume: str = "",
    eval_only: bool = False,
    extra_hyperparameters: dict = {},
    metric_definitions: dict = DEFAULT_METRIC_DEFINITIONS,
    # Training resources.
    training_job_name: str = "",
    training_instance_type: str = "ml.p4d.24xlarge",
    training_instance_count: int = 1,
    training_volume_size_gb: int = 100,
    max_run_time_s: int = 86400,
    spot_instance: bool = False,
    max_wait_time_s: int = 172800,
    # Serving.
    serving_environment: dict = {},
    endpoint_name: str = "",
    update_endpoint: bool = False,
    endpoint_instance_type: str = "ml.g5.xlarge",
    endpoint_instance_count: int = 1,
    sagemaker_components_image: str = SAGEMAKER_COMPONENTS_IMAGE,
):
    """`config_file` is a config shipped in the image (empty: the image's default,
    MRCNN_DEFAULT_CONFIG); `opts` are "KEY VALUE ..." overrides; `resume` is
    "true", "false" or empty (resume when a checkpoint exists, for spot restarts);
    `extra_hyperparameters` are passed through (e.g. sagemaker_* keys)."""
    inputs = job_inputs_op(
        config_file=config_file,
        opts=opts,
        resume=resume,
        eval_only=eval_only,
        extra_hyperparameters=extra_hyperparameters,
        train_s3_uri=train_s3_uri,
        val_s3_uri=val_s3_uri,
        weights_s3_uri=weights_s3_uri,
        training_input_mode=training_input_mode,
        checkpoint_s3_uri=checkpoint_s3_uri,
        spot_instance=spot_instance,
        max_run_time=max_run_time_s,
        max_wait_time=max_wait_time_s,
    )
    inputs.set_display_name("job inputs")

    training = training_job_op(
        region=region,
        role=role_arn,
        job_name=training_job_name,
        image=training_image,
        training_input_mode=training_input_mode,
        hyperparameters=inputs.outputs["hyperparameters"],
        channels=inputs.outputs["channels"],
        metric_definitions=metric_definitions,
        instance_type=training_instance_type,
        instance_count=training_instance_count,
        volume_size=training_volume_size_gb,
        max_run_time=max_run_time_s,
        model_artifact_path=output_s3_uri,
        spot_instance=spot_instance,
        max_wait_time=max_wait_time_s,
        checkpoint_config=inputs.outputs["checkpoint_config"],
    )
    training.set_display_name("SageMaker training job")

    # The model is named after the training job: unique per run and traceable to it.
    model = model_op(
        region=region,
        role=role_arn,
        model_name=training.outputs["job_name"],
        image=serving_image,
        model_artifact_url=training.outputs["model_artifact_url"],
        environment=serving_environment,
    )
    model.set_display_name("SageMaker model")

    endpoint = endpoint_op(
        region=region,
        endpoint_name=endpoint_name,
        update_endpoint=update_endpoint,
        model_name_1=model.outputs["model_name"],
        instance_type_1=endpoint_instance_type,
        initial_instance_count_1=endpoint_instance_count,
    )
    endpoint.set_display_name("SageMaker endpoint")

    for task in (inputs, training, model, endpoint):
        task.set_container_image(sagemaker_components_image)
        # Every step creates AWS resources (or feeds one that does): a rerun must rerun.
        task.set_caching_options(False)


def compile_pipeline(output: pathlib.Path) -> pathlib.Path:
    compiler.Compiler().compile(pipeline_func=mrcnn_sagemaker_pipeline, package_path=str(output))
    return output


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=pathlib.Path, default=pathlib.Path(f"{PIPELINE_NAME}.yaml"),
                        help="where to write the compiled pipeline (IR YAML)")
    args = parser.parse_args(argv)
    print(compile_pipeline(args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
