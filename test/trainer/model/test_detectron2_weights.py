"""Detectron2 and Caffe2 checkpoints as the trainer reads them without Python
(trainer/model/weights/), held to what torch and numpy themselves read from the same files:
`trainer inspect-weights FILE` lists every tensor (name, dtype, shape, sum) and must agree with
torch.load / pickle.load; with `--model-config` the names the model gets, the re-laid out
class layers and the load summary are checked against an independent mapping written here."""
import json
import os
import pickle
import re
import subprocess
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from caffe2_names import caffe2_name_of_detectron2

BUILD = Path(os.environ.get("MRCNN_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
TRAINER = BUILD / "bin" / "trainer"
DETECTRON2_DATA = Path(__file__).resolve().parents[2] / "data" / "detectron2" / "mask_rcnn_R_50_FPN"

DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
               torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
               torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}

# A small model: ResNet-18 + FPN, narrow heads, 3 classes.
SMALL_CONFIG = """MODEL:
  BACKBONE:
    NAME: resnet18
  FPN:
    OUT_CHANNELS: 32
  ROI_BOX_HEAD:
    FC_DIM: 64
  ROI_MASK_HEAD:
    CONV_DIM: 16
  ROI_HEADS:
    NUM_CLASSES: {classes}
"""


def _inspect(*args):
    run = subprocess.run([str(TRAINER), "inspect-weights", *map(str, args)], capture_output=True, text=True)
    return run


def _lines(run):
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def _as_read(path):
    """name -> (dtype, shape, sum) as the trainer reads the file (before any mapping)."""
    return {line["name"]: (line["dtype"], line["shape"], line["sum"]) for line in _lines(_inspect(path))}


def _expected(tensors):
    out = {}
    for name, value in tensors.items():
        if isinstance(value, (np.ndarray, np.generic)):  # numpy's view, in native byte order
            array = np.asarray(value)
            value = torch.from_numpy(array.astype(array.dtype.newbyteorder("="), order="C"))
        t = value
        out[name] = (DTYPE_NAMES[t.dtype], list(t.shape), float(t.double().sum()))
    return out


def _assert_same(read, expected):
    assert sorted(read) == sorted(expected)
    for name, (dtype, shape, total) in expected.items():
        got = read[name]
        assert got[0] == dtype, name
        assert got[1] == shape, name
        assert got[2] == pytest.approx(total, rel=1e-9, abs=1e-9), name


def _state_dict():
    """Tensors as torch.save meets them in state dicts and beyond: views with offsets, strides
    and zero strides, storages shared by several tensors, every dtype a checkpoint holds."""
    torch.manual_seed(0)
    base = torch.randn(6, 8)
    sd = OrderedDict()
    sd["backbone.bottom_up.stem.conv1.weight"] = torch.randn(4, 3, 7, 7)
    sd["transposed"] = base.t()                      # shares base's storage, strides (1, 8)
    sd["sliced"] = base[1:, ::3]                     # offset 8, strides (8, 3)
    sd["expanded"] = torch.randn(1, 5).expand(3, 5)  # stride 0
    sd["half"] = torch.randn(7).half()
    sd["bfloat"] = torch.randn(3, 2).bfloat16()
    sd["double"] = torch.randn(2, 2, dtype=torch.float64)
    sd["long"] = torch.arange(-3, 9)
    sd["int"] = torch.arange(5, dtype=torch.int32)
    sd["mask"] = torch.tensor([True, False, True])
    sd["bytes"] = torch.arange(250, 256, dtype=torch.uint8)
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 4)
    sd["num_batches_tracked"] = torch.tensor(17)
    sd["parameter"] = torch.nn.Parameter(torch.randn(3))
    return sd


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_torch_save_reads_as_torch_reads_it(tmp_path, zip_format):
    sd = _state_dict()
    path = tmp_path / "model_final.pth"
    torch.save({"model": sd, "optimizer": {"state": {0: {"momentum_buffer": torch.ones(3)}}},
                "scheduler": {"last_epoch": 5}, "iteration": 99}, path,
               _use_new_zipfile_serialization=zip_format)
    loaded = torch.load(path, weights_only=True)["model"]
    _assert_same(_as_read(path), _expected({k: v.detach() for k, v in loaded.items()}))


def test_a_bare_state_dict_is_read_as_the_model(tmp_path):
    sd = _state_dict()
    torch.save(sd, tmp_path / "bare.pth")
    run = _inspect(tmp_path / "bare.pth")
    _assert_same({line["name"]: (line["dtype"], line["shape"], line["sum"]) for line in _lines(run)},
                 _expected({k: v.detach() for k, v in sd.items()}))
    assert "Detectron2 checkpoint (torch zip)" in run.stderr


def _numpy_model():
    rng = np.random.default_rng(0)
    return {
        "backbone.bottom_up.stem.conv1.weight": rng.standard_normal((4, 3, 7, 7)).astype(np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((3, 5)).astype(np.float32)),
        "big_endian": rng.standard_normal(6).astype(">f4"),
        "transposed": rng.standard_normal((4, 6)).astype(np.float32).T,  # neither C nor F contiguous after slicing
        "strided": rng.standard_normal((4, 6)).astype(np.float32)[::2, 1::2],
        "half": rng.standard_normal(5).astype(np.float16),
        "double": rng.standard_normal((2, 3)),
        "long": np.arange(-4, 4, dtype=np.int64),
        "bool": np.array([True, False]),
        "zero_d": np.array(1.25, dtype=np.float32),
        "numpy_scalar": np.float32(3.5),
    }


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_model_zoo_pickles_of_numpy_arrays(tmp_path, protocol):
    model = _numpy_model()
    path = tmp_path / "model_final_f10217.pkl"
    with open(path, "wb") as f:
        pickle.dump({"model": {**model, "step": 3, "name": "not a tensor"}, "__author__": "Detectron2 Model Zoo"},
                    f, protocol=protocol)
    run = _inspect(path)
    _assert_same({line["name"]: (line["dtype"], line["shape"], line["sum"]) for line in _lines(run)},
                 _expected(model))
    assert "Detectron2 checkpoint (pickle, __author__ 'Detectron2 Model Zoo')" in run.stderr
    assert "2 other entries skipped" in run.stderr


def test_caffe2_blobs_without_their_momentum(tmp_path):
    rng = np.random.default_rng(1)
    blobs = {"conv1_w": rng.standard_normal((4, 3, 7, 7)).astype(np.float32),
             "res_conv1_bn_s": rng.standard_normal(4).astype(np.float32),
             "res2_0_branch2a_w": rng.standard_normal((2, 4, 1, 1)).astype(np.float32)}
    momentum = {name + "_momentum": np.zeros_like(value) for name, value in blobs.items()}
    for layout in ("blobs", "flat"):
        content = {"blobs": {**blobs, **momentum}} if layout == "blobs" else {**blobs, **momentum}
        path = tmp_path / f"{layout}.pkl"
        with open(path, "wb") as f:
            pickle.dump(content, f, protocol=2)
        run = _inspect(path)
        _assert_same({line["name"]: (line["dtype"], line["shape"], line["sum"]) for line in _lines(run)},
                     _expected(blobs))
        assert "Caffe2 checkpoint" in run.stderr and "matching heuristics" in run.stderr


def test_files_it_cannot_read_are_refused_with_the_file_and_the_fix(tmp_path):
    torch.save({"model": {"w": torch.ones(3)}}, tmp_path / "stored.pth")
    with zipfile.ZipFile(tmp_path / "stored.pth") as src, \
            zipfile.ZipFile(tmp_path / "rezipped.pth", "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            dst.writestr(item.filename, src.read(item.filename))
    run = _inspect(tmp_path / "rezipped.pth")
    assert run.returncode != 0
    assert str(tmp_path / "rezipped.pth") in run.stderr and "is compressed" in run.stderr and "zip -0" in run.stderr

    (tmp_path / "notes.txt").write_text("not a checkpoint")
    run = _inspect(tmp_path / "notes.txt")
    assert run.returncode != 0 and "notes.txt: neither a torch.save file nor a pickle" in run.stderr

    data = (tmp_path / "stored.pth").read_bytes()
    (tmp_path / "cut.pth").write_bytes(data[: len(data) // 2])
    run = _inspect(tmp_path / "cut.pth")
    assert run.returncode != 0 and "cut.pth" in run.stderr


# --- names: ours <- Detectron2's, written here independently of the C++ table -------------

def _detectron2_name(ours):
    rules = [
        (r"backbone\.body\.conv1\.weight", "backbone.bottom_up.stem.conv1.weight"),
        (r"backbone\.body\.bn1\.(\w+)", r"backbone.bottom_up.stem.conv1.norm.\1"),
        (r"backbone\.body\.layer(\d)\.(\d+)\.conv(\d)\.weight", None),
        (r"backbone\.body\.layer(\d)\.(\d+)\.bn(\d)\.(\w+)", None),
        (r"backbone\.body\.layer(\d)\.(\d+)\.downsample\.0\.weight", None),
        (r"backbone\.body\.layer(\d)\.(\d+)\.downsample\.1\.(\w+)", None),
        (r"backbone\.fpn\.inner_blocks\.(\d)\.0\.(\w+)", None),
        (r"backbone\.fpn\.layer_blocks\.(\d)\.0\.(\w+)", None),
        (r"rpn\.head\.conv\.0\.0\.(\w+)", r"proposal_generator.rpn_head.conv.\1"),
        (r"rpn\.head\.cls_logits\.(\w+)", r"proposal_generator.rpn_head.objectness_logits.\1"),
        (r"rpn\.head\.bbox_pred\.(\w+)", r"proposal_generator.rpn_head.anchor_deltas.\1"),
        (r"roi_heads\.box_head\.fc6\.(\w+)", r"roi_heads.box_head.fc1.\1"),
        (r"roi_heads\.box_head\.fc7\.(\w+)", r"roi_heads.box_head.fc2.\1"),
        (r"roi_heads\.box_predictor\.(\w+)\.(\w+)", r"roi_heads.box_predictor.\1.\2"),
        (r"roi_heads\.mask_head\.(\d)\.0\.(\w+)", None),
        (r"roi_heads\.mask_predictor\.conv5_mask\.(\w+)", r"roi_heads.mask_head.deconv.\1"),
        (r"roi_heads\.mask_predictor\.mask_fcn_logits\.(\w+)", r"roi_heads.mask_head.predictor.\1"),
    ]
    for pattern, replacement in rules:
        m = re.fullmatch(pattern, ours)
        if not m:
            continue
        if replacement is not None:
            return m.expand(replacement)
        g = m.groups()
        if "downsample.0" in ours:
            return f"backbone.bottom_up.res{int(g[0]) + 1}.{g[1]}.shortcut.weight"
        if "downsample.1" in ours:
            return f"backbone.bottom_up.res{int(g[0]) + 1}.{g[1]}.shortcut.norm.{g[2]}"
        if ".conv" in ours and "layer" in ours:
            return f"backbone.bottom_up.res{int(g[0]) + 1}.{g[1]}.conv{g[2]}.weight"
        if ".bn" in ours:
            return f"backbone.bottom_up.res{int(g[0]) + 1}.{g[1]}.conv{g[2]}.norm.{g[3]}"
        if "inner_blocks" in ours:
            return f"backbone.fpn_lateral{int(g[0]) + 2}.{g[1]}"
        if "layer_blocks" in ours:
            return f"backbone.fpn_output{int(g[0]) + 2}.{g[1]}"
        if "mask_head" in ours:
            return f"roi_heads.mask_head.mask_fcn{int(g[0]) + 1}.{g[1]}"
    raise AssertionError(f"no Detectron2 name for {ours}")


def _model_keys(tmp_path, classes=3):
    config = tmp_path / f"config_{classes}.yaml"
    config.write_text(SMALL_CONFIG.format(classes=classes))
    lines = _lines(_inspect("--model-config", config, "--model-keys"))
    return config, {line["name"]: line["shape"] for line in lines}


def _detectron2_checkpoint(keys):
    """A Detectron2 state dict for the model with these keys, and what our model must get from
    it: the class layers in Detectron2's layout (cls_score background last, no background
    rows in bbox_pred and the mask predictor)."""
    torch.manual_seed(2)
    detectron2, ours = OrderedDict(), {}
    for name, shape in keys.items():
        value = torch.randn(shape)
        if name.endswith("running_var"):
            value = value.abs() + 0.5
        d2 = value
        if "cls_score" in name:
            d2 = torch.cat([value[1:], value[:1]])
        elif "bbox_pred" in name and name.startswith("roi_heads"):
            value[:4] = 0
            d2 = value[4:]
        elif "mask_fcn_logits" in name:
            value[:1] = 0
            d2 = value[1:]
        detectron2[_detectron2_name(name)] = d2.clone()
        ours[name] = value
    return detectron2, ours


def test_a_detectron2_checkpoint_maps_onto_the_model(tmp_path):
    config, keys = _model_keys(tmp_path)
    detectron2, ours = _detectron2_checkpoint(keys)
    detectron2["proposal_generator.anchor_generator.cell_anchors.0"] = torch.randn(3, 4)
    detectron2["pixel_mean"] = torch.randn(3, 1, 1)
    detectron2["roi_heads.keypoint_head.conv_fcn1.weight"] = torch.randn(2, 2)
    detectron2["roi_heads.box_predictor.cls_score.weight"] = detectron2["roi_heads.box_predictor.cls_score.weight"].half()
    ours["roi_heads.box_predictor.cls_score.weight"] = ours["roi_heads.box_predictor.cls_score.weight"].half().float()
    path = tmp_path / "model_final.pth"
    torch.save({"model": detectron2, "__author__": "test", "iteration": 3}, path)

    run = _inspect(path, "--model-config", config)
    lines = _lines(run)
    summary = lines[-1]["summary"]
    mapped = {line["name"]: line for line in lines[:-1]}
    assert sorted(mapped) == sorted(keys)
    for name, value in ours.items():
        assert mapped[name]["shape"] == list(value.shape), name
        assert mapped[name]["sum"] == pytest.approx(float(value.double().sum()), rel=1e-6, abs=1e-6), name
        assert mapped[name]["checkpoint_key"] == _detectron2_name(name)
    assert summary["loaded"] == summary["model_tensors"] == len(keys)
    assert (summary["shape_skipped"], summary["unknown"], summary["ignored"], summary["missing"]) == (0, 1, 2, 0)
    assert f"[weights] loaded {len(keys)} of {len(keys)} tensors of the model from {path}" in run.stderr
    assert "roi_heads.keypoint_head.conv_fcn1.weight" in run.stderr


def test_other_classes_skip_the_class_layers_with_a_line_each(tmp_path):
    _, keys = _model_keys(tmp_path, classes=3)
    detectron2, _ = _detectron2_checkpoint(keys)
    path = tmp_path / "model_final.pth"
    torch.save({"model": detectron2}, path)
    config, keys5 = _model_keys(tmp_path, classes=5)
    run = _inspect(path, "--model-config", config)
    summary = _lines(run)[-1]["summary"]
    class_layers = [k for k in keys5 if re.search(r"cls_score|box_predictor\.bbox_pred|mask_fcn_logits", k)]
    assert len(class_layers) == 6
    assert summary["shape_skipped"] == 6 and summary["missing"] == 6
    assert summary["loaded"] == len(keys5) - 6
    assert ("[weights] skipped roi_heads.box_predictor.cls_score.weight: shape [4, 64] in the file "
            "(as roi_heads.box_predictor.cls_score.weight), [6, 64] in the model") in run.stderr
    assert "skipped roi_heads.box_predictor.bbox_pred.bias: shape [16] in the file" in run.stderr
    assert "skipped roi_heads.mask_head.predictor.weight: shape [4, 16, 1, 1]" in run.stderr


def _caffe2_name(ours):
    """Caffe2's blob name for a ResNet body tensor of ours (scale/shift norms only)."""
    param = {"weight": "s", "bias": "b"}
    if ours == "backbone.body.conv1.weight":
        return "conv1_w"
    if m := re.fullmatch(r"backbone\.body\.bn1\.(weight|bias)", ours):
        return "res_conv1_bn_" + param[m[1]]
    if m := re.fullmatch(r"backbone\.body\.layer(\d)\.(\d+)\.conv(\d)\.weight", ours):
        return f"res{int(m[1]) + 1}_{m[2]}_branch2{'abc'[int(m[3]) - 1]}_w"
    if m := re.fullmatch(r"backbone\.body\.layer(\d)\.(\d+)\.bn(\d)\.(weight|bias)", ours):
        return f"res{int(m[1]) + 1}_{m[2]}_branch2{'abc'[int(m[3]) - 1]}_bn_{param[m[4]]}"
    if m := re.fullmatch(r"backbone\.body\.layer(\d)\.(\d+)\.downsample\.0\.weight", ours):
        return f"res{int(m[1]) + 1}_{m[2]}_branch1_w"
    if m := re.fullmatch(r"backbone\.body\.layer(\d)\.(\d+)\.downsample\.1\.(weight|bias)", ours):
        return f"res{int(m[1]) + 1}_{m[2]}_branch1_bn_{param[m[3]]}"
    raise AssertionError(f"no Caffe2 name for {ours}")


def test_a_caffe2_imagenet_backbone_loads_the_body(tmp_path):
    """R-18 in Caffe2's names (as ImageNetPretrained/MSRA/R-50.pkl names R-50): only scale and
    shift for the norms, whose running statistics become 0 and 1; the classifier is dropped."""
    config, keys = _model_keys(tmp_path)
    rng = np.random.default_rng(3)
    blobs, expected = {}, {}
    for name, shape in keys.items():
        if not name.startswith("backbone.body.") or "running" in name:
            continue
        value = rng.standard_normal(shape).astype(np.float32)
        blobs[_caffe2_name(name)] = value
        expected[name] = float(value.astype(np.float64).sum())
    blobs["fc1000_w"] = rng.standard_normal((1000, 512)).astype(np.float32)
    blobs["fc1000_b"] = rng.standard_normal(1000).astype(np.float32)
    path = tmp_path / "R-18.pkl"
    with open(path, "wb") as f:
        pickle.dump(blobs, f, protocol=2)

    run = _inspect(path, "--model-config", config)
    lines = _lines(run)
    summary = lines[-1]["summary"]
    mapped = {line["name"]: line for line in lines[:-1]}
    running = [k for k in keys if k.startswith("backbone.body.") and "running" in k]
    assert sorted(mapped) == sorted(list(expected) + running)
    for name, total in expected.items():
        assert mapped[name]["sum"] == pytest.approx(total, rel=1e-6, abs=1e-6), name
    for name in running:
        assert mapped[name]["sum"] == (0.0 if name.endswith("mean") else keys[name][0])
    assert summary["ignored"] == 2 and summary["unknown"] == 0 and summary["shape_skipped"] == 0
    assert summary["missing"] == len([k for k in keys if not k.startswith("backbone.body.")])
    assert "running_mean/running_var buffers of norms are not in the file: set to 0 and 1" in run.stderr


@pytest.mark.skipif(not DETECTRON2_DATA.is_dir(), reason="no golden data from Detectron2 (test/data/detectron2)")
def test_detectron2s_own_pth_and_pkl_read_identically():
    pth = _as_read(DETECTRON2_DATA / "model_final.pth")
    pkl = _as_read(DETECTRON2_DATA / "model_final.pkl")
    assert sorted(pth) == sorted(pkl)
    for name, (dtype, shape, total) in pth.items():
        assert pkl[name][1] == shape, name
        assert pkl[name][2] == pytest.approx(total, rel=1e-6, abs=1e-6), name
    torch_view = torch.load(DETECTRON2_DATA / "model_final.pth", weights_only=False)
    state = torch_view.get("model", torch_view)
    _assert_same(pth, _expected({k: v for k, v in state.items() if isinstance(v, torch.Tensor)}))


GOLDEN = Path(__file__).resolve().parents[2] / "data" / "detectron2"
GOLDEN_CHECKPOINTS = sorted(GOLDEN.glob("*/model_final.p*")) if GOLDEN.is_dir() else []


def _model_builds(config):
    run = _inspect("--model-config", config, "--model-keys")
    return run.returncode == 0


@pytest.mark.parametrize("checkpoint", GOLDEN_CHECKPOINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detectron2s_checkpoints_fill_the_model_of_their_config(checkpoint):
    """Detectron2's own files (scripts/detectron2_golden.py) onto the model their config.yaml
    describes: every tensor of the model comes from the file, nothing is left over."""
    config = checkpoint.parent / "config.yaml"
    if not _model_builds(config):
        pytest.skip(f"this build cannot make the model of {config}")
    run = _inspect(checkpoint, "--model-config", config)
    summary = _lines(run)[-1]["summary"]
    assert summary["loaded"] == summary["model_tensors"] > 0, run.stderr
    assert (summary["shape_skipped"], summary["unknown"], summary["missing"]) == (0, 0, 0), run.stderr


@pytest.mark.skipif(not (GOLDEN / "mask_rcnn_R_101_C4").is_dir(), reason="no golden data from Detectron2")
def test_a_caffe2_backbone_fills_a_c4_models_body_and_its_res5_head(tmp_path):
    """The ImageNet backbone in Caffe2's names (as ImageNetPretrained/MSRA/R-101.pkl) onto
    Detectron2's R101-C4: res2-4 go to the body, res5 to the box head (Res5ROIHeads), as
    Detectron2's matching heuristics put them."""
    variant = GOLDEN / "mask_rcnn_R_101_C4"
    if not _model_builds(variant / "config.yaml"):
        pytest.skip("this build cannot make the C4 model")
    state = torch.load(variant / "model_final.pth", weights_only=False)["model"]
    blobs = {}
    for name, value in state.items():
        if (c2 := caffe2_name_of_detectron2(name)) is not None:
            blobs[c2] = value.numpy()
    assert "res5_2_branch2c_bn_b" in blobs
    blobs["fc1000_w"] = np.zeros((1000, 2048), np.float32)
    path = tmp_path / "R-101.pkl"
    with open(path, "wb") as f:
        pickle.dump(blobs, f, protocol=2)
    run = _inspect(path, "--model-config", variant / "config.yaml")
    lines = _lines(run)
    summary = lines[-1]["summary"]
    mapped = {line["name"]: line for line in lines[:-1]}
    assert summary["unknown"] == 0 and summary["shape_skipped"] == 0 and summary["ignored"] == 1, run.stderr
    assert mapped["backbone.body.layer3.22.conv3.weight"]["checkpoint_key"] == "res4_22_branch2c_w"
    assert mapped["roi_heads.box_head.layer4.2.bn3.bias"]["checkpoint_key"] == "res5_2_branch2c_bn_b"
    assert mapped["roi_heads.box_head.layer4.0.downsample.0.weight"]["sum"] == pytest.approx(
        float(state["roi_heads.res5.0.shortcut.weight"].double().sum()), rel=1e-6)
    assert mapped["backbone.body.bn1.running_var"]["sum"] == mapped["backbone.body.bn1.running_var"]["shape"][0]
    assert not any(name.startswith("roi_heads.box_predictor") for name in mapped)
