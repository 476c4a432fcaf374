"""scripts/kubeflow/: the Kubeflow pipeline compiles with the kfp SDK; the compiled spec
wires job inputs -> SageMaker training job -> model -> endpoint; every parameter of the
job is a pipeline input that reaches the step and the SageMaker component argument it
is meant for; the hyperparameters the training job receives are exactly the configured
ones (checked by running the compiled job-inputs step); the default metric definitions
are what `trainer metric-definitions` prints; the PyTorchJob example is well formed."""
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBEFLOW = ROOT / "scripts" / "kubeflow"
COMPONENTS_IMAGE_PARAM = "sagemaker_components_image"


def load_pipeline_module():
    spec = importlib.util.spec_from_file_location("mrcnn_kubeflow_pipeline", KUBEFLOW / "pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pipeline_module():
    return load_pipeline_module()


@pytest.fixture(scope="module")
def compiled(pipeline_module, tmp_path_factory):
    out = tmp_path_factory.mktemp("kfp") / "pipeline.yaml"
    pipeline_module.compile_pipeline(out)
    return yaml.safe_load(out.read_text())


# The steps, found by what their container runs (the SageMaker components' v1 scripts).
STEP_PROGRAMS = {
    "inputs": ["python3", "-c"],
    "training": ["python3", "train/src/sagemaker_training_component.py"],
    "model": ["python3", "model/src/sagemaker_model_component.py"],
    "endpoint": ["python3", "deploy/src/sagemaker_deploy_component.py"],
}


def executor(compiled, task):
    component = compiled["components"][task["componentRef"]["name"]]
    return compiled["deploymentSpec"]["executors"][component["executorLabel"]]["container"]


@pytest.fixture(scope="module")
def steps(compiled):
    tasks = compiled["root"]["dag"]["tasks"]
    found = {}
    for name, task in tasks.items():
        command = executor(compiled, task)["command"][:2]
        kinds = [kind for kind, program in STEP_PROGRAMS.items() if program == command]
        assert len(kinds) == 1, f"task {name} runs {command}, which is none of the expected steps"
        assert kinds[0] not in found, f"two tasks run the {kinds[0]} step"
        found[kinds[0]] = (name, task)
    assert set(found) == set(STEP_PROGRAMS), f"steps found: {sorted(found)}"
    return found


def source_of(task, input_name):
    """('pipeline', param) or ('task', producer, output key) for one task input."""
    parameters = task["inputs"]["parameters"]
    assert input_name in parameters, f"input {input_name} is not set; set: {sorted(parameters)}"
    value = parameters[input_name]
    if "componentInputParameter" in value:
        return ("pipeline", value["componentInputParameter"])
    if "taskOutputParameter" in value:
        out = value["taskOutputParameter"]
        return ("task", out["producerTask"], out["outputParameterKey"])
    raise AssertionError(f"input {input_name} is neither a pipeline parameter nor a task output: {value}")


def test_steps_run_in_order_on_each_others_outputs(steps):
    inputs_name, _ = steps["inputs"]
    training_name, training = steps["training"]
    model_name, model = steps["model"]
    endpoint_name, endpoint = steps["endpoint"]

    for key in ("hyperparameters", "channels", "checkpoint_config"):
        assert source_of(training, key) == ("task", inputs_name, key)
    assert inputs_name in training.get("dependentTasks", [])

    # The model is made from this run's training artefact, named after this run's job.
    assert source_of(model, "model_artifact_url") == ("task", training_name, "model_artifact_url")
    assert source_of(model, "model_name") == ("task", training_name, "job_name")
    assert model.get("dependentTasks") == [training_name]

    assert source_of(endpoint, "model_name_1") == ("task", model_name, "model_name")
    assert endpoint.get("dependentTasks") == [model_name]


# pipeline parameter -> [(step, component input)] it must reach.
PARAMETER_ROUTES = {
    "training_image": [("training", "image")],
    "serving_image": [("model", "image")],
    "train_s3_uri": [("inputs", "train_s3_uri")],
    "val_s3_uri": [("inputs", "val_s3_uri")],
    "weights_s3_uri": [("inputs", "weights_s3_uri")],
    "output_s3_uri": [("training", "model_artifact_path")],
    "checkpoint_s3_uri": [("inputs", "checkpoint_s3_uri")],
    "training_instance_type": [("training", "instance_type")],
    "training_instance_count": [("training", "instance_count")],
    "training_volume_size_gb": [("training", "volume_size")],
    "role_arn": [("training", "role"), ("model", "role")],
    "region": [("training", "region"), ("model", "region"), ("endpoint", "region")],
    "config_file": [("inputs", "config_file")],
    "opts": [("inputs", "opts")],
    "resume": [("inputs", "resume")],
    "eval_only": [("inputs", "eval_only")],
    "extra_hyperparameters": [("inputs", "extra_hyperparameters")],
    "metric_definitions": [("training", "metric_definitions")],
    "max_run_time_s": [("training", "max_run_time"), ("inputs", "max_run_time")],
    "spot_instance": [("training", "spot_instance"), ("inputs", "spot_instance")],
    "max_wait_time_s": [("training", "max_wait_time"), ("inputs", "max_wait_time")],
    "training_input_mode": [("training", "training_input_mode"), ("inputs", "training_input_mode")],
    "training_job_name": [("training", "job_name")],
    "serving_environment": [("model", "environment")],
    "endpoint_name": [("endpoint", "endpoint_name")],
    "update_endpoint": [("endpoint", "update_endpoint")],
    "endpoint_instance_type": [("endpoint", "instance_type_1")],
    "endpoint_instance_count": [("endpoint", "initial_instance_count_1")],
}

EXPECTED_TYPES = {
    "training_instance_count": "NUMBER_INTEGER", "training_volume_size_gb": "NUMBER_INTEGER",
    "max_run_time_s": "NUMBER_INTEGER", "max_wait_time_s": "NUMBER_INTEGER",
    "endpoint_instance_count": "NUMBER_INTEGER", "eval_only": "BOOLEAN", "spot_instance": "BOOLEAN",
    "update_endpoint": "BOOLEAN", "metric_definitions": "STRUCT", "extra_hyperparameters": "STRUCT",
    "serving_environment": "STRUCT",
}
REQUIRED = {"region", "role_arn", "training_image", "serving_image", "train_s3_uri", "val_s3_uri", "output_s3_uri"}


def test_every_job_parameter_is_a_pipeline_input_routed_to_its_step(compiled, steps):
    declared = compiled["root"]["inputDefinitions"]["parameters"]
    assert set(declared) == set(PARAMETER_ROUTES) | {COMPONENTS_IMAGE_PARAM}
    for param, routes in PARAMETER_ROUTES.items():
        assert declared[param]["parameterType"] == EXPECTED_TYPES.get(param, "STRING"), param
        assert declared[param].get("isOptional", False) == (param not in REQUIRED), param
        for step, component_input in routes:
            assert source_of(steps[step][1], component_input) == ("pipeline", param), (param, step)
    # Nothing reaches a step from a pipeline parameter that the table above does not name.
    for step, (_, task) in steps.items():
        for name in task["inputs"]["parameters"]:
            src = source_of(task, name) if "pipelinechannel--" not in name and name != "base_image" else None
            if src and src[0] == "pipeline":
                assert (step, name) in PARAMETER_ROUTES[src[1]], (step, name, src)


# The SageMaker components' command-line interface: each flag must carry the input of
# the same name (or write the named output).
COMPONENT_FLAGS = {
    "training": ["region", "role", "job_name", "image", "training_input_mode", "hyperparameters", "channels",
                 "metric_definitions", "instance_type", "instance_count", "volume_size", "max_run_time",
                 "model_artifact_path", "spot_instance", "max_wait_time", "checkpoint_config"],
    "model": ["region", "role", "model_name", "image", "model_artifact_url", "environment"],
    "endpoint": ["region", "endpoint_name", "update_endpoint", "model_name_1", "instance_type_1",
                 "initial_instance_count_1"],
}
COMPONENT_OUTPUT_FLAGS = {
    "training": ["model_artifact_url", "job_name", "training_image"],
    "model": ["model_name"],
    "endpoint": ["endpoint_name"],
}


def flag_values(args):
    assert len(args) % 2 == 0, args
    pairs = dict(zip(args[0::2], args[1::2]))
    assert len(pairs) == len(args) // 2, "a flag is given twice"
    return pairs


def test_component_arguments_follow_the_sagemaker_components_interface(compiled, steps):
    for step, flags in COMPONENT_FLAGS.items():
        container = executor(compiled, steps[step][1])
        pairs = flag_values(container["args"])
        expected = {f"--{name}": f"{{{{$.inputs.parameters['{name}']}}}}" for name in flags}
        expected.update({f"--{name}_output_path": f"{{{{$.outputs.parameters['{name}'].output_file}}}}"
                         for name in COMPONENT_OUTPUT_FLAGS[step]})
        assert pairs == expected, step


def test_every_step_runs_the_components_image_parameter_uncached(compiled, steps, pipeline_module):
    declared = compiled["root"]["inputDefinitions"]["parameters"][COMPONENTS_IMAGE_PARAM]
    assert declared["defaultValue"] == pipeline_module.SAGEMAKER_COMPONENTS_IMAGE
    channel = f"pipelinechannel--{COMPONENTS_IMAGE_PARAM}"
    for step, (_, task) in steps.items():
        assert executor(compiled, task)["image"] == f"{{{{$.inputs.parameters['{channel}']}}}}", step
        assert source_of(task, channel) == ("pipeline", COMPONENTS_IMAGE_PARAM)
        assert not task.get("cachingOptions", {}).get("enableCache", False), f"{step} would reuse an old run"


# ---- the job-inputs step, run here exactly as compiled ----

PLACEHOLDER = re.compile(r"^\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}$")
OUTPUT_PLACEHOLDER = re.compile(r"^\{\{\$\.outputs\.parameters\['([^']+)'\]\.output_file\}\}$")

BASE_ARGUMENTS = {
    "region": "us-east-1",
    "role_arn": "arn:aws:iam::123456789012:role/sagemaker",
    "training_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mrcnn-training:1",
    "serving_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mrcnn-serving:1",
    "train_s3_uri": "s3://bucket/coco/train",
    "val_s3_uri": "s3://bucket/coco/val",
    "output_s3_uri": "s3://bucket/out",
}


def render(value):
    """A parameter value as the KFP v2 launcher renders it into a command line
    (backend/src/v2/component/launcher_v2.go: numbers with FormatFloat(v, 'f', -1),
    booleans true/false, lists and structs as JSON). Numbers arrive as floats."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def run_inputs_step(compiled, steps, tmp_path, **overrides):
    """Runs the compiled job-inputs container command with this interpreter; returns
    (exit code, stderr, {output name: parsed JSON})."""
    declared = compiled["root"]["inputDefinitions"]["parameters"]
    arguments = {name: spec["defaultValue"] for name, spec in declared.items() if "defaultValue" in spec}
    arguments.update(BASE_ARGUMENTS)
    arguments.update(overrides)
    _, task = steps["inputs"]
    container = executor(compiled, task)
    outputs = {}
    argv = [sys.executable, *container["command"][1:]]
    for arg in container["args"]:
        m = PLACEHOLDER.match(arg)
        o = OUTPUT_PLACEHOLDER.match(arg)
        if m:
            kind, param = source_of(task, m.group(1))
            assert kind == "pipeline"
            argv.append(render(arguments[param]))
        elif o:
            outputs[o.group(1)] = tmp_path / "outputs" / o.group(1) / "data"
            argv.append(str(outputs[o.group(1)]))
        else:
            assert "{{" not in arg, arg
            argv.append(arg)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    values = {name: json.loads(path.read_text()) for name, path in outputs.items() if path.exists()}
    return proc.returncode, proc.stderr, values


def test_training_job_gets_exactly_the_default_hyperparameters(compiled, steps, tmp_path):
    rc, err, out = run_inputs_step(compiled, steps, tmp_path)
    assert rc == 0, err
    assert out["hyperparameters"] == {"config-file": "mask_rcnn_R_50_FPN_1x.yaml"}
    assert [c["ChannelName"] for c in out["channels"]] == ["train", "val"]
    assert out["checkpoint_config"] == {}


def test_training_job_gets_exactly_the_configured_hyperparameters(compiled, steps, tmp_path):
    rc, err, out = run_inputs_step(
        compiled, steps, tmp_path, config_file="mask_rcnn_R_50_FPN_drone_finetune.yaml",
        opts='SOLVER.MAX_ITER 500 OUTPUT_DIR "/opt/ml/output/data/x y"', resume="True", eval_only=True,
        extra_hyperparameters={"sagemaker_mpi_num_of_processes_per_host": 4, "note": "a\"b"},
        weights_s3_uri="s3://bucket/weights/", checkpoint_s3_uri="s3://bucket/ckpt", training_input_mode="FastFile",
        spot_instance=True, max_run_time_s=3600, max_wait_time_s=7200)
    assert rc == 0, err
    assert out["hyperparameters"] == {
        "config-file": "mask_rcnn_R_50_FPN_drone_finetune.yaml",
        "opts": 'SOLVER.MAX_ITER 500 OUTPUT_DIR "/opt/ml/output/data/x y"',
        "resume": "true",
        "eval-only": "true",
        "sagemaker_mpi_num_of_processes_per_host": "4",
        "note": "a\"b",
    }
    assert all(isinstance(v, str) for v in out["hyperparameters"].values())
    by_name = {c["ChannelName"]: c for c in out["channels"]}
    assert list(by_name) == ["train", "val", "weights"]
    for name, uri in (("train", "s3://bucket/coco/train"), ("val", "s3://bucket/coco/val"),
                      ("weights", "s3://bucket/weights/")):
        assert by_name[name]["DataSource"]["S3DataSource"]["S3Uri"] == uri
        assert by_name[name]["InputMode"] == "FastFile"
    assert out["checkpoint_config"] == {"S3Uri": "s3://bucket/ckpt", "LocalPath": "/opt/ml/checkpoints"}


def test_empty_config_file_and_resume_false_are_passed_as_configured(compiled, steps, tmp_path):
    rc, err, out = run_inputs_step(compiled, steps, tmp_path, config_file="", resume="false")
    assert rc == 0, err
    # Empty config-file: the image's own default (MRCNN_DEFAULT_CONFIG) applies.
    assert out["hyperparameters"] == {"resume": "false"}


@pytest.mark.parametrize("overrides, message", [
    ({"resume": "maybe"}, "resume"),
    ({"spot_instance": True}, "checkpoint_s3_uri"),
    ({"spot_instance": True, "checkpoint_s3_uri": "s3://b/c", "max_wait_time_s": 10}, "max_wait_time_s"),
    ({"train_s3_uri": "/local/train"}, "train_s3_uri"),
    ({"extra_hyperparameters": {"opts": "X 1"}}, "opts"),
    ({"training_input_mode": "Stream"}, "training_input_mode"),
])
def test_bad_job_inputs_fail_the_step_with_the_parameter_named(compiled, steps, tmp_path, overrides, message):
    rc, err, out = run_inputs_step(compiled, steps, tmp_path, **overrides)
    assert rc != 0
    assert message in err
    assert out == {}


# ---- metric definitions ----

PRINT_METRIC_DEFINITIONS = """
#include <cstdio>
#include "trainer/engine/events/log_format.h"
int main() { std::printf("%s\\n", mrcnn::engine::MetricDefinitions().dump().c_str()); }
"""


def test_default_metric_definitions_are_the_trainers(compiled, tmp_path):
    # `trainer metric-definitions` prints engine::MetricDefinitions(); build just that
    # function (Torch-free) so the check does not depend on a full trainer build.
    source = tmp_path / "print_metric_definitions.cpp"
    source.write_text(PRINT_METRIC_DEFINITIONS)
    program = tmp_path / "print_metric_definitions"
    cxx = os.environ.get("CXX", "c++")
    build = subprocess.run([cxx, "-std=c++20", "-O0", f"-I{ROOT}", str(source),
                            str(ROOT / "trainer" / "engine" / "events" / "log_format.cpp"), "-lfmt", "-o", str(program)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    printed = subprocess.run([str(program)], capture_output=True, text=True, timeout=60, check=True)
    expected = {d["Name"]: d["Regex"] for d in json.loads(printed.stdout)}
    declared = compiled["root"]["inputDefinitions"]["parameters"]["metric_definitions"]
    assert declared["defaultValue"] == expected, (
        "scripts/kubeflow/metric_definitions.json is stale: regenerate it with "
        "build/bin/trainer metric-definitions > scripts/kubeflow/metric_definitions.json")


def test_metric_definitions_file_is_what_sagemaker_accepts(pipeline_module):
    defs = pipeline_module.load_metric_definitions()
    assert 0 < len(defs) <= 40
    for name, regex in defs.items():
        assert len(regex) <= 500 and re.compile(regex).groups >= 1, name
    assert any("total_loss" in n for n in defs) and any("AP50" in n for n in defs)


def test_command_line_compiles(tmp_path):
    out = tmp_path / "p.yaml"
    proc = subprocess.run([sys.executable, str(KUBEFLOW / "pipeline.py"), "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(out.read_text())["pipelineInfo"]["name"] == "mrcnn-sagemaker-train-deploy"


# ---- the PyTorchJob example ----

def test_pytorchjob_runs_the_entrypoint_train_command():
    job = yaml.safe_load((KUBEFLOW / "pytorchjob.yaml").read_text())
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1
    for role in ("Master", "Worker"):
        pod = specs[role]["template"]["spec"]
        [container] = pod["containers"]
        assert container["name"] == "pytorch"  # the operator injects its variables into this one
        assert "command" not in container, "keep the image's exec-form ENTRYPOINT"
        args = container["args"]
        assert args[:2] == ["train", "--"]
        trainer_args = flag_values(args[2:])
        assert set(trainer_args) <= {"--config-file", "--local-config-file", "--opts", "--resume", "--eval-only"}
        assert (ROOT / "configs" / trainer_args["--config-file"]).is_file()
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/opt/ml/input/data", "/opt/ml/checkpoints", "/opt/ml/model"} <= mounts
        assert pod["terminationGracePeriodSeconds"] > 110  # the entrypoint's default grace period


def test_trainjob_runs_the_entrypoint_train_command_with_the_pytorchjob_mounts():
    """trainjob.yaml (Kubeflow Trainer v2) runs the image as pytorchjob.yaml does: its
    ENTRYPOINT kept, `train --` and the trainer's own flags, the same mounts, and the same
    command line as test-kubeflow-jobs.sh replays with podman."""
    job = yaml.safe_load((KUBEFLOW / "trainjob.yaml").read_text())
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and job["kind"] == "TrainJob"
    trainer = job["spec"]["trainer"]
    assert "command" not in trainer, "keep the image's exec-form ENTRYPOINT"
    assert trainer["args"][:2] == ["train", "--"]
    trainer_args = flag_values(trainer["args"][2:])
    assert set(trainer_args) <= {"--config-file", "--local-config-file", "--opts", "--resume", "--eval-only"}
    assert (ROOT / "configs" / trainer_args["--config-file"]).is_file()
    assert trainer["numNodes"] >= 1
    assert {e["name"]: e["value"] for e in trainer["env"]}["SAGEMAKER_BASE_DIR"] == "/opt/ml"
    [override] = job["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]  # the torch runtime's trainer job
    [container] = override["spec"]["containers"]
    assert container["name"] == "node"
    mounts = {m["mountPath"]: m.get("subPath") for m in container["volumeMounts"]}
    pytorchjob = yaml.safe_load((KUBEFLOW / "pytorchjob.yaml").read_text())
    [master] = pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert mounts == {m["mountPath"]: m.get("subPath") for m in master["volumeMounts"]}
    assert override["spec"]["terminationGracePeriodSeconds"] > 110
    # The podman replay mounts the same folders and passes the same `train --` prefix.
    replay = (KUBEFLOW / "test-kubeflow-jobs.sh").read_text()
    for path in ("/opt/ml/input/data:ro", "/opt/ml/checkpoints", "/opt/ml/model", "/opt/ml/output"):
        assert path in replay, path
    for variable in ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                     "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        assert f"{variable}=" in replay, variable
