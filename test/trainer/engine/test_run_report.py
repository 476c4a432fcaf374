"""The run report (output/data/report.html) of a real training job, rendered by a real
headless browser (Debian's Chromium): the page has the expected title, loss/lr/AP plots,
the COCO table per category and the validation pictures, and its screenshot is not blank."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest
from engine_test_job import TINY_MODEL_OPTS, TRAINER, make_shapes

OPTS = " ".join(TINY_MODEL_OPTS + [
    "SOLVER.IMS_PER_BATCH 2", "SOLVER.MAX_ITER 6", "SOLVER.WARMUP_ITERS 2", "SOLVER.CHECKPOINT_PERIOD 0",
    "TEST.EVAL_PERIOD 3", "SEED 5",
])


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("no headless browser: scripts/setup.sh installs Debian's chromium")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    shapes = make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=3, seed=6)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_", "MASTER_"))}
    env["MRCNN_CONFIG_DIR"] = str(pathlib.Path(__file__).resolve().parents[3] / "configs")
    proc = subprocess.run([str(TRAINER), "train", "--base-dir", str(root), "--config-file",
                           "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "--opts", OPTS],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path = root / "output" / "data" / "report.html"
    assert f"[report] wrote {path}" in proc.stdout
    return path


def test_report_holds_the_run(report):
    html = report.read_text()
    assert re.search(r"<title>Mask R-CNN training run \(.*\)</title>", html)
    for title in ("Training losses", "Learning rate", "COCO AP at each evaluation"):
        assert f'aria-label="{title}"' in html, title
    assert html.count("<polyline") >= 3  # loss curves and lr over 6 iterations
    for category in ("circle", "square", "triangle"):
        assert f"<td>{category}</td>" in html
    assert html.count('src="data:image/png;base64,') == 3  # the 3 validation images
    assert "SOLVER:" in html and "MAX_ITER: 6" in html  # the config used
    assert "images/s" in html


def test_report_renders_in_a_headless_browser(report, tmp_path):
    from PIL import Image, ImageStat
    exe = browser()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2200"]
    shot = tmp_path / "report.png"
    subprocess.run([exe, *flags, f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=120,
                   check=True)
    dom = subprocess.run([exe, *flags, "--dump-dom", report.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "<title>Mask R-CNN training run" in dom
    assert dom.count("<svg") >= 3 and dom.count("<img") == 3
    picture = Image.open(shot).convert("RGB")
    assert picture.size == (1280, 2200)
    stats = ImageStat.Stat(picture)
    assert max(stats.stddev) > 20, "the screenshot is blank"  # text, plots and pictures on white
    # The plots are drawn: their colours (the first series' blue, #1f77b4) are on the page.
    pixels = picture.get_flattened_data() if hasattr(picture, "get_flattened_data") else picture.getdata()
    assert any(abs(r - 0x1f) < 24 and abs(g - 0x77) < 24 and abs(b - 0xb4) < 24 for r, g, b in pixels), \
        "no plotted line in the screenshot"
    picture.save(pathlib.Path(os.environ.get("MRCNN_REPORT_SCREENSHOT", tmp_path / "kept.png")))
