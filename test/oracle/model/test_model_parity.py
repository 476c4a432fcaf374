"""The C++ Mask R-CNN against torchvision's maskrcnn_resnet50_fpn with identical weights.

Weights go through scripts/convert_weights.py (the real conversion path); the C++ side
runs through build/tests/model_parity_probe, which dumps every stage to safetensors.

Parity runs at precision fp32, which is torchvision's algorithm (the probe's default mode;
MRCNN_CPU_WINOGRAD=0 makes sure no fast path runs). The fast path of precision fp32-fast
rounds differently (Winograd's ~1e-5 relative), which random weights amplify into ~0.05 px
proposal differences; test_winograd_inference_close_to_direct bounds that on its own.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision
from safetensors.torch import load_file, save_file
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops

from conftest import REPO

CONVERT = REPO / "scripts" / "convert_weights.py"
THREADS = 2
DIRECT_CONV = {**os.environ, "MRCNN_CPU_WINOGRAD": "0"}


def randomise(model, seed):
    """Non-trivial BN statistics and peaky class scores, so every stage is exercised and
    random-weight detections do not tie (near-uniform softmax scores would make the top-k
    order depend on rounding). The box regressions (RPN and box head) are damped: random deltas make boxes a
    few hundredths of a pixel tall, whose IoUs (hence NMS) flip with float rounding that
    differs between CPUs' convolution kernels."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, misc_nn_ops.FrozenBatchNorm2d)):
                n = m.running_mean.numel()
                m.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
        model.roi_heads.box_predictor.cls_score.weight.mul_(40.0)
        model.rpn.head.cls_logits.weight.mul_(20.0)
        model.roi_heads.box_predictor.bbox_pred.weight.mul_(0.1)
        model.rpn.head.bbox_pred.weight.mul_(0.1)


def freeze_batchnorm(module):
    """Replaces eval-mode BatchNorm2d by torchvision's FrozenBatchNorm2d with the same
    statistics: the same function (torchvision's pretrained detection models use exactly
    this), computed in the same operation order as the C++ backbone, so the comparison
    measures our implementation rather than BN's two algebraic forms (which differ by
    ~1e-6 relative, enough to reorder near-tied proposals)."""
    for name, child in module.named_children():
        if isinstance(child, torch.nn.BatchNorm2d):
            frozen = misc_nn_ops.FrozenBatchNorm2d(child.num_features, eps=child.eps)
            for key in ("weight", "bias", "running_mean", "running_var"):
                getattr(frozen, key).copy_(getattr(child, key).detach())
            setattr(module, name, frozen)
        else:
            freeze_batchnorm(child)


def convert(tmp_path, model, name, overrides):
    ckpt = tmp_path / f"{name}.pth"
    torch.save(model.state_dict(), ckpt)
    out = tmp_path / name
    cmd = [sys.executable, str(CONVERT), "--checkpoint", str(ckpt), "--output", str(out)]
    for key, value in overrides.items():
        cmd += ["--set", f"{key}={value}"]
    subprocess.run(cmd, check=True)
    return out


def run_probe(probe, model_dir, inputs, tmp_path, mode, winograd=False, extra=()):
    tag = f"{mode}_winograd" if winograd else mode
    tag += "".join(extra).replace("-", "_")
    src = tmp_path / f"in_{tag}.safetensors"
    dst = tmp_path / f"out_{tag}.safetensors"
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(src))
    subprocess.run([str(probe), "--model-dir", str(model_dir), "--input", str(src), "--output", str(dst),
                    "--mode", mode, "--threads", str(THREADS), *extra], check=True,
                   env=None if winograd else DIRECT_CONV)
    return load_file(str(dst))


def make_images(seed, shapes):
    g = torch.Generator().manual_seed(seed)
    images = []
    for h, w in shapes:
        # Smooth structure plus noise, so features are not just noise statistics.
        yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
        base = torch.stack([torch.sin(6 * xx + c) * torch.cos(4 * yy - c) for c in range(3)]) * 0.4 + 0.5
        images.append((base + 0.1 * torch.rand(3, h, w, generator=g)).clamp(0, 1))
    return images


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


def mask_iou(a, b):
    a, b = a >= 0.5, b >= 0.5
    union = (a | b).sum().item()
    return 1.0 if union == 0 else (a & b).sum().item() / union


def compare_eval(tv, ours, images):
    """Every torchvision detection has a counterpart; returns (detections, thin), thin
    counting those with an aspect ratio of 10 or more whose mask has clear pixels."""
    torch.set_num_threads(THREADS)
    with torch.no_grad():
        original_sizes = [tuple(img.shape[-2:]) for img in images]
        batch, _ = tv.transform(images)
        assert batch.tensors.shape == ours["batch"].shape
        assert torch.allclose(batch.tensors, ours["batch"], atol=1e-5)
        features = tv.backbone(batch.tensors)
        for level, feat in enumerate(features.values()):
            err = rel_err(ours[f"feature.{level}"], feat)
            assert err <= 1e-4, f"FPN level {level}: relative error {err}"
        proposals, _ = tv.rpn(batch, features)
        for i, props in enumerate(proposals):
            mine = ours[f"proposals.{i}"]
            assert mine.shape == props.shape, f"image {i}: {mine.shape[0]} proposals vs {props.shape[0]}"
            assert (mine - props).abs().max().item() <= 1e-3, f"image {i}: proposals differ"
        detections, _ = tv.roi_heads(features, proposals, batch.image_sizes)
        detections = tv.transform.postprocess(detections, batch.image_sizes, original_sizes)
    total = thin = 0
    for i, det in enumerate(detections):
        boxes, scores, labels = ours[f"boxes.{i}"], ours[f"scores.{i}"], ours[f"labels.{i}"]
        assert boxes.shape == det["boxes"].shape, f"image {i}: {boxes.shape[0]} detections vs {det['boxes'].shape[0]}"
        total += boxes.shape[0]
        used = set()
        for k in range(det["boxes"].shape[0]):
            # The same detection: same label, box within 1e-2 px, score within 1e-4.
            close = ((boxes - det["boxes"][k]).abs().max(dim=1).values <= 1e-2) & (labels == det["labels"][k]) & (
                (scores - det["scores"][k]).abs() <= 1e-4)
            candidates = [j for j in torch.where(close)[0].tolist() if j not in used]
            assert candidates, f"image {i}: torchvision detection {k} ({det['boxes'][k].tolist()}, " \
                               f"{det['scores'][k].item()}) has no counterpart"
            j = candidates[0]
            used.add(j)
            mine, theirs = ours[f"masks.{i}"][j, 0], det["masks"][k, 0]
            iou = mask_iou(mine, theirs)
            # Small masks: one pixel whose probability sits at the 0.5 threshold moves the
            # IoU by over 1%; a real difference flips pixels that are clearly on one side. The
            # paste is torchvision's bit for bit (issue 54), so only the mask logits' float
            # differences (~1e-6) can move a pixel: 1e-3 from 0.5 is already clear.
            clear_flips = (((mine >= 0.5) != (theirs >= 0.5)) & ((theirs - 0.5).abs() > 1e-3)).sum().item()
            assert iou >= 0.99 or clear_flips == 0, f"image {i} detection {k}: mask IoU {iou}, {clear_flips} clear flips"
            # Whatever the IoU: no pixel whose probability is far from 0.5 may flip (issue 25
            # was thin boxes whose masks covered up to 2.9x torchvision's pixels).
            far = (theirs < 0.3) | (theirs > 0.7)
            far_flips = (((mine >= 0.5) != (theirs >= 0.5)) & far).sum().item()
            assert far_flips == 0, f"image {i} detection {k} (box {det['boxes'][k].tolist()}): " \
                                   f"{(mine >= 0.5).sum().item()} mask pixels vs torchvision " \
                                   f"{(theirs >= 0.5).sum().item()}, {far_flips} far from 0.5 differ"
            x1, y1, x2, y2 = det["boxes"][k].tolist()
            if max(x2 - x1, y2 - y1) >= 10 * max(min(x2 - x1, y2 - y1), 1e-6) and bool((theirs > 0.7).any()):
                thin += 1
    return total, thin


@pytest.mark.parametrize("num_classes,shapes,min_size,max_size,min_detections,min_thin", [
    (5, [(240, 320), (400, 260), (150, 500)], 320, 560, 150, 0),
    # 90 peaky classes spread the detections over many per-class NMS groups: fewer survive.
    (91, [(480, 640), (300, 420), (500, 380)], 800, 1333, 60, 0),
    # Issue 25's shapes: a wide, a 4:1 tall (resized to 1333x333) and a square image, with
    # the default sizes; random boxes there include many thin ones (aspect ratio >= 10).
    (91, [(333, 517), (1200, 300), (640, 640)], 800, 1333, 150, 50),
])
def test_inference_matches_torchvision(probe, tmp_path, num_classes, shapes, min_size, max_size, min_detections,
                                       min_thin):
    torch.manual_seed(0)
    tv = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes, min_size=min_size, max_size=max_size,
        box_score_thresh=0.0)
    randomise(tv, 1)
    freeze_batchnorm(tv)
    tv.eval()
    model_dir = convert(tmp_path, tv, "eval", {
        "MODEL.ROI_HEADS.SCORE_THRESH_TEST": 0.0, "INPUT.MIN_SIZE_TEST": min_size, "INPUT.MAX_SIZE_TEST": max_size})
    images = make_images(2, shapes)
    ours = run_probe(probe, model_dir, {f"image.{i}": img for i, img in enumerate(images)}, tmp_path, "eval")
    total, thin = compare_eval(tv, ours, images)
    assert total >= min_detections, f"only {total} detections: the comparison would be too weak"
    assert thin >= min_thin, f"only {thin} thin detections with a mask: the thin-box comparison would be too weak"


def test_winograd_inference_close_to_direct(probe, tmp_path):
    """The CPU inference fast path of precision fp32-fast (Winograd F(6x6)/F(4x4)/F(2x2) for
    every 3x3 stride-1 convolution, RoIs laid out as a grid on one canvas, FrozenBN folded into
    the convolutions, deconvolution as GEMM, label-only mask logits) against precision fp32
    (the direct path) on the same model and images: the same detections up to its rounding."""
    torch.manual_seed(0)
    tv = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=5, min_size=320, max_size=560, box_score_thresh=0.0)
    randomise(tv, 1)
    freeze_batchnorm(tv)
    model_dir = convert(tmp_path, tv, "eval", {
        "MODEL.ROI_HEADS.SCORE_THRESH_TEST": 0.0, "INPUT.MIN_SIZE_TEST": 320, "INPUT.MAX_SIZE_TEST": 560})
    images = make_images(2, [(240, 320), (400, 260), (150, 500)])
    inputs = {f"image.{i}": img for i, img in enumerate(images)}
    direct = run_probe(probe, model_dir, inputs, tmp_path, "eval")
    # Without MRCNN_CPU_WINOGRAD=0 too: precision fp32 alone must keep the fast path off.
    default_fp32 = run_probe(probe, model_dir, inputs, tmp_path, "eval", winograd=True)
    for name, value in direct.items():
        assert torch.equal(default_fp32[name], value), f"{name}: precision fp32 ran something else than the direct path"
    fast = run_probe(probe, model_dir, inputs, tmp_path, "eval", winograd=True, extra=("--cpu-mode", "fp32-fast"))
    for level in range(5):
        err = rel_err(fast[f"feature.{level}"], direct[f"feature.{level}"])
        assert 0 < err <= 1e-4, f"FPN level {level}: relative error {err} (0 means the fast path did not run)"
    matched = total = 0
    for i in range(len(images)):
        boxes, scores, labels = fast[f"boxes.{i}"], fast[f"scores.{i}"], fast[f"labels.{i}"]
        ref_boxes, ref_scores, ref_labels = direct[f"boxes.{i}"], direct[f"scores.{i}"], direct[f"labels.{i}"]
        total += ref_boxes.shape[0]
        assert abs(boxes.shape[0] - ref_boxes.shape[0]) <= 0.02 * ref_boxes.shape[0] + 1
        used = set()
        for k in range(ref_boxes.shape[0]):
            close = ((boxes - ref_boxes[k]).abs().max(dim=1).values <= 0.5) & (labels == ref_labels[k]) & (
                (scores - ref_scores[k]).abs() <= 1e-3)
            candidates = [j for j in torch.where(close)[0].tolist() if j not in used]
            if not candidates:
                continue
            j = candidates[0]
            used.add(j)
            iou = mask_iou(fast[f"masks.{i}"][j, 0], direct[f"masks.{i}"][k, 0])
            assert iou >= 0.97, f"image {i} detection {k}: mask IoU {iou}"
            matched += 1
    assert total >= 150, f"only {total} detections: the comparison would be too weak"
    assert matched >= 0.98 * total, f"only {matched} of {total} detections have a counterpart"


@pytest.mark.parametrize("fixed_mask_rows", ["0", "1"])
def test_losses_match_torchvision(probe, tmp_path, fixed_mask_rows):
    """Training losses and their gradients on the same images and targets. Sampling takes every candidate
    (batch sizes far above the candidate counts), which makes it deterministic on both
    sides without sharing random streams."""
    torch.manual_seed(3)
    huge = 10_000_000
    body = torchvision.models.resnet50(weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d)
    # 500 proposals per image rather than 2000: with fixed mask rows the mask head runs over every
    # proposal (the row count is min(positives cap, proposals), and the cap is huge here), which
    # at 2000 made this case 3.5 minutes of CI. Still over 1000 candidates per image before NMS,
    # so the training step's grouped NMS is what runs.
    tv = torchvision.models.detection.MaskRCNN(
        _resnet_fpn_extractor(body, 3), num_classes=5, min_size=320, max_size=512,
        rpn_batch_size_per_image=huge, box_batch_size_per_image=huge,
        rpn_pre_nms_top_n_train=1000, rpn_post_nms_top_n_train=500)
    randomise(tv, 4)
    with torch.no_grad():
        tv.roi_heads.box_predictor.cls_score.weight.div_(40.0)  # keep the classifier loss in a sane range
        # Unsaturated objectness: randomise's x20 makes many sigmoid scores exactly 1.0, and
        # which of those tied proposals make the post-NMS cut is each side's sort order
        # (torchvision's unstable sort of the kept boxes, our training step's stable sort
        # over fixed-size rows), not arithmetic.
        tv.rpn.head.cls_logits.weight.div_(1000.0)
    model_dir = convert(tmp_path, tv, "train", {
        "MODEL.RPN.BATCH_SIZE_PER_IMAGE": huge, "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE": huge,
        "MODEL.RPN.PRE_NMS_TOPK_TRAIN": 1000, "MODEL.RPN.POST_NMS_TOPK_TRAIN": 500,
        "INPUT.MIN_SIZE_TRAIN": "[320]", "INPUT.MAX_SIZE_TRAIN": 512})
    shapes = [(240, 320), (300, 200)]
    images = make_images(5, shapes)
    targets = []
    g = torch.Generator().manual_seed(6)
    for h, w in shapes:
        n = 3
        x1 = torch.rand(n, generator=g) * w * 0.5
        y1 = torch.rand(n, generator=g) * h * 0.5
        bw = 20 + torch.rand(n, generator=g) * w * 0.4
        bh = 20 + torch.rand(n, generator=g) * h * 0.4
        boxes = torch.stack([x1, y1, (x1 + bw).clamp(max=w - 1), (y1 + bh).clamp(max=h - 1)], 1)
        masks = torch.zeros(n, h, w, dtype=torch.uint8)
        for k, (a, b, c, d) in enumerate(boxes.round().long().tolist()):
            masks[k, b:d, a:(a + c) // 2 + 1] = 1  # left part of the box, so the target is not the box itself
        targets.append({"boxes": boxes, "labels": torch.randint(1, 5, (n,), generator=g), "masks": masks})
    inputs = {f"image.{i}": img for i, img in enumerate(images)}
    for i, t in enumerate(targets):
        for key, value in t.items():
            inputs[f"target.{i}.{key}"] = value
    # Both ways of choosing the mask head's rows: padded to a fixed count (the GPU's, no
    # host read) and exactly the positives (the CPU's).
    ours = run_probe(probe, model_dir, inputs, tmp_path, "train", extra=("--fixed-mask-rows", fixed_mask_rows))
    torch.set_num_threads(THREADS)
    tv.train()
    losses = tv(images, [{k: v.clone() for k, v in t.items()} for t in targets])
    assert set(losses) == {k[len("loss."):] for k in ours if k.startswith("loss.")}
    for name, value in losses.items():
        mine = ours[f"loss.{name}"].item()
        assert abs(mine - value.item()) <= 1e-4, f"{name}: ours {mine} vs torchvision {value.item()}"
    # Gradients too: our step computes its losses over fixed-size, masked rows (no host
    # syncs), torchvision over the selected rows; with sampling taking every candidate both
    # must give the same gradients, up to the order of the sums.
    sum(losses.values()).backward()
    params = dict(tv.named_parameters())
    grads = {k[len("grad."):]: v for k, v in ours.items() if k.startswith("grad.")}
    assert len(grads) >= 8, sorted(grads)
    for name, mine in grads.items():
        theirs = params[name].grad
        scale = theirs.abs().max().item()
        assert scale > 0, f"{name}: torchvision's gradient is all zero: the comparison would be empty"
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-4 * scale, msg=lambda m: f"{name}: {m}")


def test_predict_writes_coco_results(trainer_bin, tmp_path):
    """`trainer predict` end to end: PNG files in, COCO results with RLE masks out, equal
    to torchvision on the same decoded pixels."""
    from PIL import Image
    from pycocotools import mask as mask_utils

    torch.manual_seed(7)
    tv = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=5, min_size=256, max_size=400, box_score_thresh=0.3)
    randomise(tv, 8)
    freeze_batchnorm(tv)
    tv.eval()
    classes = tmp_path / "ann.json"
    files = []
    images = make_images(9, [(200, 300), (260, 180)])
    for i, img in enumerate(images):
        path = tmp_path / f"img{i}.png"
        Image.fromarray((img * 255).round().byte().permute(1, 2, 0).numpy()).save(path)
        files.append(path)
    classes.write_text(json.dumps({
        "images": [{"id": 42 + i, "file_name": p.name, "height": 1, "width": 1} for i, p in enumerate(files)],
        "categories": [{"id": cid, "name": f"c{cid}"} for cid in (3, 7, 11)] + [{"id": 20, "name": "c20"}],
    }))
    ckpt = tmp_path / "p.pth"
    torch.save(tv.state_dict(), ckpt)
    model_dir = tmp_path / "model"
    subprocess.run([sys.executable, str(CONVERT), "--checkpoint", str(ckpt), "--output", str(model_dir),
                    "--classes", str(classes), "--set", "INPUT.MIN_SIZE_TEST=256", "--set", "INPUT.MAX_SIZE_TEST=400"],
                   check=True)
    out = tmp_path / "results.json"
    subprocess.run([str(trainer_bin), "predict", "--model-dir", str(model_dir), "--images", *map(str, files),
                    "--output", str(out), "--annotations", str(classes), "--score-threshold", "0.3",
                    "--threads", str(THREADS)], check=True, env=DIRECT_CONV)
    results = json.loads(out.read_text())
    torch.set_num_threads(THREADS)
    with torch.no_grad():
        decoded = [torch.from_numpy(np.asarray(Image.open(p).convert("RGB"))).permute(2, 0, 1).float() / 255
                   for p in files]
        # `trainer predict` runs one image per forward by default (--batch-size 1); padding
        # depends on the batch, so torchvision runs image by image too.
        expected = [tv([img])[0] for img in decoded]
    id_of_label = {1: 3, 2: 7, 3: 11, 4: 20}
    total = 0
    for i, det in enumerate(expected):
        keep = det["scores"] > 0.3  # --score-threshold is applied before NMS, like box_score_thresh
        mine = [r for r in results if r["image_id"] == 42 + i]
        assert len(mine) == int(keep.sum()), f"image {i}: {len(mine)} results vs {int(keep.sum())}"
        total += len(mine)
        for box, score, label, m in zip(det["boxes"][keep], det["scores"][keep], det["labels"][keep],
                                        det["masks"][keep]):
            x1, y1, x2, y2 = box.tolist()
            match = [r for r in mine if r["category_id"] == id_of_label[int(label)] and abs(r["score"] - score) <= 1e-4
                     and np.allclose(r["bbox"], [x1, y1, x2 - x1, y2 - y1], atol=1e-2)]
            assert match, f"image {i}: no result for box {box.tolist()} score {score.item()}"
            rle = match[0]["segmentation"]
            assert isinstance(rle["counts"], str)
            ours_mask = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()})
            theirs = (m[0] >= 0.5).numpy()
            union = np.logical_or(ours_mask, theirs).sum()
            assert union == 0 or np.logical_and(ours_mask, theirs).sum() / union >= 0.99
    assert total >= 5, "too few detections above 0.3 for a meaningful check"
