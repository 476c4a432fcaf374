"""Oracle: our SM_* variables against the public sagemaker-training toolkit.

Both read the same temporary /opt/ml tree (the toolkit through
SAGEMAKER_BASE_DIR, which it reads once at import, hence one subprocess per
case; ours through build*/tests/print_training_env) under the same environment,
and every SM_* variable and the hyperparameter argv must be byte-identical.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
PRINTER = BUILD / "tests" / "print_training_env"

TOOLKIT_SCRIPT = r"""
import json, logging
logging.disable(logging.CRITICAL)
from sagemaker_training import environment
env = environment.Environment()
print(json.dumps({"sm": env.to_env_vars(), "argv": env.to_cmd_args()}))
"""

EXAMPLE_RESOURCES = {
    "current_host": "algo-2",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "homogeneousCluster",
    "hosts": ["algo-1", "algo-2"],
    "instance_groups": [
        {"instance_group_name": "homogeneousCluster", "instance_type": "ml.p4d.24xlarge",
         "hosts": ["algo-2", "algo-1"]}
    ],
    "network_interface_name": "eth0",
}


def v3_encoded(values: dict) -> dict:
    """hyperparameters.json as the SageMaker Python SDK v3 (ModelTrainer) writes it: strings as
    they are, every other value json.dumps'd (Python's default separators)."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def v2_encoded(values: dict) -> dict:
    """The v2 framework estimators' encoding: every value json.dumps'd, strings included."""
    return {k: json.dumps(v) for k, v in values.items()}


# What SDK users pass for the hyperparameters this project's trainer reads, plus the
# framework keys SDK v3's local mode sets (it rewrites a local source dir to /opt/ml/code).
SDK_VALUES = {
    "sagemaker_program": "train.py", "sagemaker_submit_directory": "/opt/ml/code",
    "config-file": "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml", "local-config-file": "mine.yaml",
    "opts": ["SOLVER.MAX_ITER", "100", "SOLVER.STEPS", "[60, 80]"], "resume": True, "eval-only": False,
    "lr": 0.02, "tiny": 1e-05, "sizes": [1, 2], "d": {"b": 1, "a": "x"}, "none": None, "name": "run one",
}


CASES = {
    "sdk_encoded": dict(
        hyperparameters={
            "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/src.tar.gz"',
            "sagemaker_container_log_level": "20", "sagemaker_mpi_enabled": "true",
            "sagemaker_region": '"us-west-2"', "_tuning_objective_metric": '"loss"',
            "epochs": "10", "lr": "0.001", "flag": "true", "off": "false", "lst": "[1,2]", "raw": "adam",
            "d": '{"b":1,"a":"x"}', "tiny": "1e-05", "big": "1e16", "x": "5", "uni": '"h\u00e9\u00e9"',
            "use-amp": "true", "none": "null", "nan": "NaN", "inf": "-Infinity", "words": '["a","it\'s"]', "neg": "-2.5", "e15": "1e15",
        },
        resources=EXAMPLE_RESOURCES,
        inputs={"train": {"ContentType": "application/json", "TrainingInputMode": "File",
                          "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
                "val": {"TrainingInputMode": "Pipe"}},
        entry_point="train.py",
        env={"TRAINING_JOB_NAME": "job-1"},
    ),
    # ModelTrainer's local mode: its resourceconfig.json names "ethwe" and has no instance groups.
    "sdk_v3_local_mode": dict(
        hyperparameters=v3_encoded(SDK_VALUES),
        resources={"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "ethwe",
                   "current_instance_type": "local"},
        inputs={"train": {"TrainingInputMode": "File"}},
        entry_point="train.py",
        env={"TRAINING_JOB_NAME": "local-v3"},
    ),
    "sdk_v3_opts_as_text": dict(
        hyperparameters=v3_encoded({"opts": "SOLVER.MAX_ITER 100 MODEL.WEIGHTS ''", "resume": "True",
                                    "eval-only": "false", "config-file": "my.yaml"}),
        resources={"current_host": "algo-1", "hosts": ["algo-1"]},
        inputs={},
        entry_point="",
        env={},
    ),
    "minimal_single_host": dict(
        hyperparameters={},
        resources={"current_host": "algo-1", "hosts": ["algo-1"]},
        inputs={},
        entry_point="",
        env={},
    ),
    "raw_api_typed_values": dict(
        hyperparameters={"epochs": 3, "flag": False, "ratio": 0.25, "name": "plain", "lst": [1, "a"]},
        resources={"current_host": "algo-1", "hosts": ["algo-1", "algo-10", "algo-2"],
                   "network_interface_name": "ens5"},
        inputs={"train": {"TrainingInputMode": "FastFile"}},
        entry_point="",
        env={},
    ),
    # SageMaker writes algo-1..algo-N in that order; from ten hosts on, sorting as strings
    # would move algo-10..algo-12 before algo-2.
    "twelve_hosts": dict(
        hyperparameters={"sagemaker_pytorch_ddp_enabled": "true"},
        resources={"current_host": "algo-2", "current_instance_type": "ml.p4d.24xlarge",
                   "current_group_name": "homogeneousCluster",
                   "hosts": [f"algo-{n}" for n in range(1, 13)],
                   "network_interface_name": "eth0"},
        inputs={"train": {"TrainingInputMode": "File"}},
        entry_point="",
        env={"TRAINING_JOB_NAME": "big-12"},
    ),
    "heterogeneous_with_topology": dict(
        hyperparameters={
            "sagemaker_program": '"launch.sh"', "sagemaker_container_log_level": "10",
            "sagemaker_distribution_instance_groups": '["gpus"]', "sagemaker_pytorch_ddp_enabled": "true",
            "batch": "8", "name": "run 1",
        },
        resources={
            "current_host": "algo-3", "current_instance_type": "ml.c5.xlarge", "current_group_name": "cpus",
            "hosts": ["algo-1", "algo-2", "algo-3"],
            "instance_groups": [
                {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-2", "algo-1"]},
                {"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "hosts": ["algo-3"]},
            ],
            "network_interface_name": "eth0",
            "topology": [{"hostName": "algo-1", "capacityUnitId": "u1"}],
        },
        inputs={"train": {"TrainingInputMode": "File"}},
        entry_point="launch.sh",
        env={"TRAINING_JOB_NAME": "hetero-7", "SAGEMAKER_TRAINING_MODULE": "mod:main",
             "SM_HP_MP_PARAMETERS": '{"partitions": 2}'},
    ),
}


def write_tree(base: Path, case: dict) -> None:
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(case["hyperparameters"]))
    (config / "resourceconfig.json").write_text(json.dumps(case["resources"]))
    (config / "inputdataconfig.json").write_text(json.dumps(case["inputs"]))
    # The toolkit creates base/code at import; create it for both.
    (base / "code").mkdir()


def clean_env(base: Path, extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "SAGEMAKER_")) and k not in ("TRAINING_JOB_NAME", "CURRENT_HOST")}
    env["SAGEMAKER_BASE_DIR"] = str(base)
    env.update(extra)
    return env


def run_toolkit(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", TOOLKIT_SCRIPT], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_ours(env: dict, entry_point: str) -> dict:
    assert PRINTER.exists(), f"{PRINTER} is not built (set MRCNN_BUILD_DIR to the build dir)"
    out = subprocess.run([str(PRINTER), "--entry-point", entry_point], env=env, check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sm_variables_match_the_public_toolkit(tmp_path, name):
    case = CASES[name]
    base = tmp_path / "ml"
    write_tree(base, case)
    env = clean_env(base, case["env"])
    theirs = run_toolkit(env)
    ours = run_ours(env, case["entry_point"])

    assert sorted(ours["sm"]) == sorted(theirs["sm"])
    mismatched = {k: (ours["sm"][k], theirs["sm"][k]) for k in theirs["sm"] if ours["sm"][k] != theirs["sm"][k]}
    assert mismatched == {}
    assert ours["argv"] == theirs["argv"]


def test_world_from_the_same_tree(tmp_path):
    case = CASES["raw_api_typed_values"]
    base = tmp_path / "ml"
    write_tree(base, case)
    ours = run_ours(clean_env(base, {"CUDA_VISIBLE_DEVICES": "0,1,2"}), "")
    assert ours["world"] == {"launcher": "sagemaker", "node_rank": 0, "nnodes": 3, "nproc_per_node": 3,
                             "master_addr": "algo-1", "master_port": 29500}


@pytest.mark.parametrize("current", ["algo-1", "algo-2", "algo-10", "algo-12"])
def test_twelve_hosts_node_rank_and_master_match_the_toolkit(tmp_path, current):
    case = dict(CASES["twelve_hosts"])
    case["resources"] = dict(case["resources"], current_host=current)
    base = tmp_path / "ml"
    write_tree(base, case)
    env = clean_env(base, case["env"])
    theirs = json.loads(run_toolkit(env)["sm"]["SM_TRAINING_ENV"])
    ours = run_ours(env, "")
    # The toolkit's torchrun launcher passes --node_rank hosts.index(current_host) and
    # --master_addr master_hostname.
    assert ours["world"]["node_rank"] == theirs["hosts"].index(current) == int(current[5:]) - 1
    assert ours["world"]["nnodes"] == len(theirs["hosts"]) == 12
    assert ours["world"]["master_addr"] == theirs["master_hostname"] == "algo-1"
    assert json.loads(ours["sm"]["SM_HOSTS"]) == theirs["hosts"] == [f"algo-{n}" for n in range(1, 13)]


def test_bad_tree_is_reported_with_file_and_field(tmp_path):
    base = tmp_path / "ml"
    write_tree(base, dict(hyperparameters={}, resources={"current_host": "algo-3", "hosts": ["algo-2", "algo-1"]},
                          inputs={}))
    out = subprocess.run([str(PRINTER)], env=clean_env(base, {}), capture_output=True, text=True)
    assert out.returncode == 1
    assert 'resourceconfig.json: "current_host" must be one of "hosts" ["algo-2","algo-1"], got "algo-3"' in out.stderr


def test_sdk_v3_and_v2_encodings_give_the_same_argv_and_values(tmp_path):
    seen = []
    for name, encode in (("v2", v2_encoded), ("v3", v3_encoded)):
        base = tmp_path / name / "ml"
        write_tree(base, dict(hyperparameters=encode(SDK_VALUES), resources={"current_host": "algo-1",
                              "hosts": ["algo-1"]}, inputs={}))
        ours = run_ours(clean_env(base, {}), "train.py")
        seen.append((ours["argv"], ours["sm"]["SM_HPS"], ours["sm"]["SM_USER_ARGS"]))
    assert seen[0] == seen[1]
    argv = seen[1][0]
    assert argv[argv.index("--opts") + 1] == "['SOLVER.MAX_ITER', '100', 'SOLVER.STEPS', '[60, 80]']"
    assert argv[argv.index("--resume") + 1] == "True"
    assert argv[argv.index("--config-file") + 1] == "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"
