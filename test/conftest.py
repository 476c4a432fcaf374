"""The order pytest runs the test modules in: the slowest first, the rest as collected.

scripts/test.sh runs the modules on every core (pytest-xdist, `--dist loadscope
--no-loadscope-reorder`: a module stays on one worker, and workers take modules in this
order). A module of several minutes taken last would run alone while the other cores idle; taken
first, the short ones fill in around it. The list is an order only: a module not in it still
runs, after those in it. Figures: pytest's `--durations` in CI's log (bench/RESULTS.md, "CI time").
"""
import pathlib

TEST_ROOT = pathlib.Path(__file__).resolve().parent

# Slowest first (seconds per module on a 2-vCPU x86-64 machine, 2026-11-28, run beside another
# worker).
SLOWEST_FIRST = [
    "trainer/model/test_tiled_predict.py",  # trains the shapes model the tiles tests share (~120 s)
    "oracle/model/test_model_parity.py",  # ResNet-50-FPN at 800x1333 against torchvision (~450 s)
    "trainer/engine/test_faults_checkpoint.py",  # ~110 s
    "trainer/model/test_detectron2_parity.py",  # 27 predict runs of the Detectron2 golden models (~150 s)
    "trainer/engine/test_detectron2_zoo_job.py",  # three zoo-config training jobs (~45 s)
    "download/test_weights_download.py",  # two zoo-config training runs, four failing jobs
    "trainer/engine/test_keypoint_demo.py",  # trains the keypoint demo, 300 iterations (~145 s)
    "trainer/model/test_reduced_precision_ap.py",
    "serving/test_server_tiles.py",
    "trainer/model/test_tiled_evaluation.py",
    "trainer/engine/test_mlflow_tracking.py",
    "trainer/engine/test_amp_cpu.py",
    "serving/test_server_soak.py",
    "trainer/engine/test_tensorboard_events.py",
    "trainer/engine/test_train_resume.py",
    "trainer/engine/test_train_distributed.py",
]


def pytest_collection_modifyitems(session, config, items):
    rank = {TEST_ROOT / name: i for i, name in enumerate(SLOWEST_FIRST)}
    missing = [name for name in SLOWEST_FIRST if not (TEST_ROOT / name).is_file()]
    if missing:
        raise FileNotFoundError(f"test/conftest.py: SLOWEST_FIRST names {missing}, which do not exist: "
                                "remove or rename them there")
    # A stable sort: each module's tests keep their order and stay together.
    items.sort(key=lambda item: rank.get(item.path.resolve(), len(rank)))
