"""trainer/model/'s rooms depend on each other one way (trainer/model/README.md, "Rooms").

Every `#include "trainer/model/..."` in trainer/model/ is checked against what its room may
include:

    the top     (mask_rcnn, parts, registry, config, ...) the top, backbone/fast_conv.h
    backbone/   the top, backbone/
    rpn/        the top, rpn/, backbone/fast_conv.h
    roi_heads/  the top, roi_heads/, backbone/fast_conv.h
    retinanet/  the top, retinanet/, backbone/fast_conv.h, rpn/detectron2_anchors.h (RetinaNet's
                dense head and stage in place of the RPN and ROI heads, on Detectron2's anchors)
    inference/  anything of trainer/model (the inference API over the model)
    tiles/      anything of trainer/model (tiled inference, part of that API)
    weights/    weights/ only (Detectron2 and Caffe2 checkpoints read and mapped to our
                names; it knows the model as a torch::nn::Module, nothing of its parts)

so the network knows nothing of the inference API, the RPN nothing of the ROI heads (and the
other way round), and the backbone nothing of the heads. Nothing in trainer/model includes the
engine, the commands or the server.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODEL = ROOT / "trainer" / "model"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
FAST_CONV = "trainer/model/backbone/fast_conv.h"
ROOMS = {
    "backbone": {"trainer/model/backbone/"},
    "rpn": {"trainer/model/rpn/", FAST_CONV},
    "roi_heads": {"trainer/model/roi_heads/", FAST_CONV},
    "retinanet": {"trainer/model/retinanet/", FAST_CONV, "trainer/model/rpn/detectron2_anchors.h"},
    "inference": {"trainer/model/"},
    "tiles": {"trainer/model/"},
    "weights": {"trainer/model/weights/"},
}


def is_top(target):
    return target.startswith("trainer/model/") and "/" not in target[len("trainer/model/"):]


def sources(room):
    folder = MODEL if room is None else MODEL / room
    pattern = "*" if room is None else "**/*"
    return sorted(p for p in folder.glob(pattern) if p.is_file() and p.suffix in {".h", ".cpp"})


def offenders(paths, allowed):
    found = []
    for path in paths:
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if not target.startswith("trainer/model/"):
                continue
            if is_top(target) or any(target.startswith(a) or target == a for a in allowed):
                continue
            found.append(f"{path.name} includes {target}")
    return found


def test_every_room_has_rules():
    rooms = sorted(p.name for p in MODEL.iterdir() if p.is_dir())
    assert rooms == sorted(ROOMS), "a new folder in trainer/model/ needs its rules here"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_include_one_way(room):
    assert sources(room), f"trainer/model/{room}/ has no sources"
    found = offenders(sources(room), ROOMS[room])
    assert not found, f"trainer/model/{room}/ may not include these:\n" + "\n".join(found)


def test_the_top_includes_no_room_but_the_fast_convolution():
    found = offenders(sources(None), {FAST_CONV})
    assert not found, "trainer/model/'s top may not include these:\n" + "\n".join(found)


def test_the_model_includes_nothing_above_it():
    found = []
    for path in sources(None) + [p for room in ROOMS for p in sources(room)]:
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if target.startswith(("trainer/engine/", "trainer/commands/", "serving/", "entrypoint/")):
                found.append(f"{path.relative_to(ROOT)} includes {target}")
    assert not found, "\n".join(found)


def test_the_rules_refuse_what_they_should(tmp_path):
    assert is_top("trainer/model/mask_rcnn.h") and not is_top("trainer/model/rpn/x.h")
    rpn = tmp_path / "rpn_stage.cpp"
    rpn.write_text('#include "trainer/model/mask_rcnn.h"\n#include "trainer/model/backbone/fast_conv.h"\n'
                   '#include "trainer/model/roi_heads/x.h"\n#include "trainer/model/inference/y.h"\n')
    assert offenders([rpn], ROOMS["rpn"]) == [
        "rpn_stage.cpp includes trainer/model/roi_heads/x.h",
        "rpn_stage.cpp includes trainer/model/inference/y.h",
    ]
    assert offenders([rpn], ROOMS["inference"]) == []
    sample = '#include <vector>\n#include "trainer/model/rpn/a.h"\n  # include "kernels/ops.h"\n'
    assert INCLUDE.findall(sample) == ["trainer/model/rpn/a.h", "kernels/ops.h"]
