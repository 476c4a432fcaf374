"""scripts/kubeflow/container_pipeline.py and run_local.py without containers: both variants
compile; the compiled DAG wires dataset -> train -> evaluate and serve-smoke on the trained
model, with the resources as pipeline parameters; each step's program, taken from the
compiled spec and run here with the host's binaries on their PATH, makes what the next step
reads (a model dir, COCO AP metrics in executor_output.json, a served answer) and fails
with a message naming what is wrong; run_local.py's container runner runs the command as
Kubernetes does, keeps the last lines and exit code, and removes the container.
(scripts/test-containers.sh runs the whole pipeline in the images through kfp.local.)"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBEFLOW = ROOT / "scripts" / "kubeflow"
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build"))
STEPS = ("make-shapes", "train", "evaluate", "serve-smoke")


def load(name):
    sys.path.insert(0, str(KUBEFLOW))
    spec = importlib.util.spec_from_file_location(f"mrcnn_{name}", KUBEFLOW / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_variant(tmp_path, variant, *extra):
    out = tmp_path / f"{variant}.yaml"
    subprocess.run([sys.executable, str(KUBEFLOW / "container_pipeline.py"), "--output", str(out), "--variant",
                    variant, *extra], check=True, capture_output=True, text=True)
    return yaml.safe_load(out.read_text())


@pytest.fixture(scope="module")
def shapes_spec(tmp_path_factory):
    return compile_variant(tmp_path_factory.mktemp("kfp"), "shapes")


def executors(spec):
    return {name.removeprefix("exec-"): e["container"] for name, e in spec["deploymentSpec"]["executors"].items()
            if "container" in e}


def test_shapes_variant_wires_the_steps_on_each_others_outputs(shapes_spec):
    tasks = shapes_spec["root"]["dag"]["tasks"]
    assert set(tasks) == set(STEPS)
    train_in = tasks["train"]["inputs"]["artifacts"]["dataset"]["taskOutputArtifact"]
    assert train_in == {"producerTask": "make-shapes", "outputArtifactKey": "dataset"}
    for step in ("evaluate", "serve-smoke"):
        model = tasks[step]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]
        assert model == {"producerTask": "train", "outputArtifactKey": "model"}
    # The smoke test runs after the gate (evaluate's exit code), not beside it.
    assert "evaluate" in tasks["serve-smoke"]["dependentTasks"]
    for name, task in tasks.items():
        assert task.get("cachingOptions", {}) == {}, f"{name}: caching must be off (a rerun trains again)"
    params = shapes_spec["root"]["inputDefinitions"]["parameters"]
    assert {"gpu_count", "cpu_limit", "memory_limit", "opts", "config_file", "min_box_ap50"} <= set(params)


def test_every_step_runs_its_program_as_the_command_with_the_resources_as_parameters(shapes_spec):
    ex = executors(shapes_spec)
    assert set(ex) == set(STEPS)
    for step, container in ex.items():
        want_image = "localhost/mrcnn-serving:latest" if step == "serve-smoke" else "localhost/mrcnn-training:latest"
        assert container["image"] == want_image
        # `command` replaces the image's ENTRYPOINT on Kubernetes: the whole program is in it.
        assert container["command"][0] in ("sh", "bash") and container["command"][1] == "-c"
        assert "{{$.outputs.output_file}}" in container["args"], f"{step} writes no executor_output.json"
        assert {"name": "MRCNN_PIPELINE_STEP", "value": step.replace("make-shapes", "dataset")} in container["env"]
        resources = container["resources"]
        if step == "make-shapes":
            assert "accelerator" not in resources
        else:
            assert resources["resourceCpuLimit"] == "{{$.inputs.parameters['pipelinechannel--cpu_limit']}}"
            assert resources["resourceMemoryLimit"] == "{{$.inputs.parameters['pipelinechannel--memory_limit']}}"
            assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu"
            assert resources["accelerator"]["resourceCount"] == "{{$.inputs.parameters['pipelinechannel--gpu_count']}}"


def test_dataset_variant_imports_the_dataset_uri_and_names_the_images(tmp_path):
    spec = compile_variant(tmp_path, "dataset", "--training-image", "r.example/t:1", "--serving-image", "r.example/s:1")
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"importer", "train", "evaluate", "serve-smoke"}
    importer = spec["deploymentSpec"]["executors"]["exec-importer"]["importer"]
    assert importer["artifactUri"] == {"runtimeParameter": "uri"}
    assert tasks["importer"]["inputs"]["parameters"]["uri"]["componentInputParameter"] == "dataset_uri"
    ex = executors(spec)
    assert ex["train"]["image"] == "r.example/t:1" and ex["serve-smoke"]["image"] == "r.example/s:1"
    defaults = {k: v.get("defaultValue") for k, v in spec["root"]["inputDefinitions"]["parameters"].items()}
    assert defaults["train_split"] == "train2017" and defaults["val_split"] == "val2017"


# The steps' programs, run here as the images run them: the host's binaries on PATH.


def host_env(tmp_path):
    for exe in ("entrypoint", "trainer", "server"):
        if not (BUILD / "bin" / exe).is_file():
            raise RuntimeError(f"{BUILD / 'bin' / exe} is not built (set MRCNN_BUILD_DIR)")
    env = dict(os.environ, PATH=f"{BUILD / 'bin'}:{os.environ['PATH']}", MRCNN_CONFIG_DIR=str(ROOT / "configs"),
               TMPDIR=str(tmp_path))
    return env


def assert_no_scratch_left(tmp, prefix):
    """A step's scratch folder (mktemp under TMPDIR) is gone once the step has exited."""
    left = sorted(p.name for p in tmp.glob(f"{prefix}.*"))
    assert not left, f"the step left its scratch folders in TMPDIR: {left}"


def run_step(spec, step, args, env):
    """The step's compiled command with ARGS in place of its placeholders."""
    command = executors(spec)[step]["command"]
    return subprocess.run([*command, *[str(a) for a in args]], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def trained(shapes_spec, tmp_path_factory):
    """make-shapes then train, the tiny model a few iterations."""
    tmp = tmp_path_factory.mktemp("steps")
    env = host_env(tmp)
    data, model = tmp / "dataset", tmp / "model"
    r = run_step(shapes_spec, "make-shapes", [data, 12, 4, 64, 3, tmp / "out-data" / "executor_output.json",
                                             "uri://dataset"], env)
    assert r.returncode == 0, r.stdout + r.stderr
    record = json.loads((tmp / "out-data" / "executor_output.json").read_text())
    assert record["artifacts"]["dataset"]["artifacts"][0] == {"uri": "uri://dataset",
                                                              "metadata": {"train_images": 12, "val_images": 4}}
    opts = ("MODEL.FPN.OUT_CHANNELS 32 MODEL.ROI_BOX_HEAD.FC_DIM 64 MODEL.ROI_MASK_HEAD.CONV_DIM 32 "
            "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64 "
            "SOLVER.IMS_PER_BATCH 2 SOLVER.MAX_ITER 3 SOLVER.WARMUP_ITERS 1 DATALOADER.NUM_WORKERS 1")
    r = run_step(shapes_spec, "train", [data, model, "mask_rcnn_R_50_FPN_shapes_cpu.yaml", opts, "train", "val",
                                        tmp / "out-train" / "executor_output.json", "uri://model"], env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert_no_scratch_left(tmp, "opt_ml")
    return tmp, env, data, model, r


def test_train_step_writes_the_model_artifact_and_its_executor_output(trained):
    tmp, _, _, model, r = trained
    for f in ("model.safetensors", "config.yaml", "classes.json"):
        assert (model / f).stat().st_size > 0, f
    assert (model / "training-output" / "metrics.jsonl").stat().st_size > 0
    hps = next(line for line in r.stdout.splitlines() if line.startswith("hyperparameters: "))
    hps = {k: json.loads(v) for k, v in json.loads(hps.removeprefix("hyperparameters: ")).items()}
    assert hps["config-file"] == "mask_rcnn_R_50_FPN_shapes_cpu.yaml"
    assert hps["opts"].startswith("DATASETS.TRAIN [train] DATASETS.TEST [val] MODEL.FPN.OUT_CHANNELS 32")
    record = json.loads((tmp / "out-train" / "executor_output.json").read_text())
    assert record["artifacts"]["model"]["artifacts"][0]["uri"] == "uri://model"


def test_train_step_refuses_a_split_that_is_not_a_folder_name(shapes_spec, trained):
    tmp, env, data, _, _ = trained
    r = run_step(shapes_spec, "train", [data, tmp / "m2", "x.yaml", "", "../train", "val", tmp / "o" / "e.json", "u"],
                 env)
    assert r.returncode == 2 and 'split name "../train" must be a folder name' in r.stdout


def test_evaluate_step_reports_coco_ap_as_metrics_and_gates_on_the_floor(shapes_spec, trained):
    tmp, env, data, model, _ = trained
    out = tmp / "out-eval" / "executor_output.json"
    r = run_step(shapes_spec, "evaluate", [data, model, "val", 0.0, tmp / "results", out, "uri://m", "uri://r"], env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "predicting on cpu" in r.stdout  # no /dev/nvidia0 here
    assert_no_scratch_left(tmp, "eval")
    record = json.loads(out.read_text())["artifacts"]
    metrics = record["metrics"]["artifacts"][0]
    assert metrics["uri"] == "uri://m" and record["results"]["artifacts"][0]["uri"] == "uri://r"
    bbox = json.loads((tmp / "results" / "bbox.json").read_text())["stats"]
    segm = json.loads((tmp / "results" / "segm.json").read_text())["stats"]
    assert metrics["metadata"] == {f"{p}_{k}": round(s[k], 4) for p, s in (("box", bbox), ("mask", segm))
                                   for k in ("AP", "AP50", "AP75")}
    # A floor above what the model reaches fails the step, saying why.
    r = run_step(shapes_spec, "evaluate", [data, model, "val", 1.5, tmp / "results2", out, "u", "u"], env)
    assert r.returncode == 1 and "is below the floor min_box_ap50=1.5" in r.stderr


def test_evaluate_step_names_a_missing_split(shapes_spec, trained):
    tmp, env, data, model, _ = trained
    r = run_step(shapes_spec, "evaluate", [data, model, "test", 0.0, tmp / "r3", tmp / "o3" / "e.json", "u", "u"], env)
    assert r.returncode == 1 and f"no {data}/annotations/instances_test.json in the dataset" in r.stdout


def test_serve_smoke_step_serves_the_model_and_keeps_the_answer(shapes_spec, trained):
    tmp, env, data, model, _ = trained
    answer = tmp / "answer"
    r = run_step(shapes_spec, "serve-smoke", [data, model, "val", answer, tmp / "o4" / "executor_output.json",
                                              "uri://a"], env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "/ping 200" in r.stdout
    assert_no_scratch_left(tmp, "serve")
    body = json.loads((answer / "answer.json").read_text())
    assert (body["width"], body["height"]) == (64, 64) and isinstance(body["detections"], list)
    sent = [p.name for p in answer.iterdir() if p.suffix in (".png", ".jpg")]
    assert sent == ["000001.png"]
    record = json.loads((tmp / "o4" / "executor_output.json").read_text())
    assert record["artifacts"]["answer"]["artifacts"][0] == {"uri": "uri://a", "metadata": {"image": "000001.png"}}


def test_serve_smoke_step_fails_with_the_servers_lines_when_the_model_is_broken(shapes_spec, trained):
    tmp, env, data, model, _ = trained
    broken = tmp / "broken-model"
    broken.mkdir()
    for f in ("config.yaml", "classes.json"):
        (broken / f).write_bytes((model / f).read_bytes())
    (broken / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes()[:1000])
    r = run_step(shapes_spec, "serve-smoke", [data, broken, "val", tmp / "a5", tmp / "o5" / "e.json", "u"], env)
    assert r.returncode == 1 and "serve-smoke: the server exited:" in r.stdout
    assert "model.safetensors" in r.stdout


# run_local.py's container runner, against a stand-in for the docker client.


class FakeContainer:
    def __init__(self, chunks, code):
        self.chunks, self.code, self.removed = chunks, code, False

    def logs(self, stream, follow):
        assert stream and follow
        return iter(self.chunks)

    def wait(self):
        return {"StatusCode": self.code}

    def remove(self, force):
        self.removed = force


class FakeClient:
    def __init__(self, container, images=("localhost/mrcnn-training:latest",)):
        self.container, self.known, self.run_kwargs = container, images, None
        client = self

        class Images:
            def list(self, name):
                return [name] if name in client.known else []

        class Containers:
            def run(self, **kwargs):
                client.run_kwargs = kwargs
                return client.container

        self.images, self.containers = Images(), Containers()


def test_container_runner_runs_the_command_as_kubernetes_does_and_keeps_the_tail(capsys):
    run_local = load("run_local")
    lines = [f"line {i}".encode() for i in range(60)]
    chunks = [b"\n".join(lines[:30]) + b"\nline 3", b"0-tail\n" + b"\n".join(lines[31:]) + b"\nno newline"]
    container = FakeContainer(chunks, 3)
    client = FakeClient(container)
    runner = run_local.ContainerSteps(prefix="p")
    code = runner(client, "localhost/mrcnn-training", ["sh", "-c", "prog", "x", "/r/task/executor_output.json"],
                  {"/r": {"bind": "/r"}}, environment={"MRCNN_PIPELINE_STEP": "train"}, network_mode="none")
    assert code == 3 and container.removed
    kw = client.run_kwargs
    assert kw["entrypoint"] == ["sh"] and kw["command"] == ["-c", "prog", "x", "/r/task/executor_output.json"]
    assert kw["name"] == "p-train" and kw["network_mode"] == "none" and kw["detach"]
    assert kw["image"] == "localhost/mrcnn-training:latest"
    step = runner.steps[0]
    assert step.name == "train" and step.exit_code == 3 and step.executor_output == "/r/task/executor_output.json"
    # A line split across two reads is one line; the last 40 are kept, the unterminated one too.
    want = [f"line {i}" for i in range(21, 30)] + ["line 30-tail"] + [f"line {i}" for i in range(31, 60)]
    assert list(step.tail) == want + ["no newline"]


def test_container_runner_refuses_an_image_that_is_not_there():
    run_local = load("run_local")
    client = FakeClient(FakeContainer([], 0), images=())
    runner = run_local.ContainerSteps(prefix="p")
    assert runner(client, "localhost/mrcnn-serving", ["bash"], {}, environment={}) == 125
    assert client.run_kwargs is None
    assert "image localhost/mrcnn-serving:latest is not here" in runner.steps[0].tail[0]
