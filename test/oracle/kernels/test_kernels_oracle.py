"""mrcnn ops vs torchvision on randomised inputs (CPU; CUDA too when a GPU is present).

Each op runs on at least 500 random cases. NMS-style ops must return identical
indices, anchors and matches must be identical, ROIAlign forward/backward must
agree within 1e-5 (float32).
"""
import math

import pytest
import torch
import torchvision
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import paste_masks_in_image
from torchvision.ops import MultiScaleRoIAlign

from nms_order import assert_same_keep

CASES = 500
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_boxes(g, n, extent=200.0, max_side=80.0, integer=False):
    xy = torch.rand(n, 2, generator=g) * extent
    wh = torch.rand(n, 2, generator=g) * max_side + 0.5
    boxes = torch.cat([xy, xy + wh], dim=1)
    return boxes.round() if integer else boxes


def random_scores(g, n, ties):
    s = torch.rand(n, generator=g)
    return (s * 10).round() / 10 if ties else s


@pytest.mark.parametrize("device", DEVICES)
def test_nms_identical_keep(mrcnn_ops, device):
    g = torch.Generator().manual_seed(1)
    for case in range(CASES):
        n = int(torch.randint(0, 600, (1,), generator=g))
        boxes = random_boxes(g, n, integer=case % 3 == 0)
        scores = random_scores(g, n, ties=case % 4 == 0)
        thr = float(torch.rand(1, generator=g) * 0.8 + 0.1)
        ours = mrcnn_ops.nms(boxes.to(device), scores.to(device), thr).cpu()
        theirs = torchvision.ops.nms(boxes, scores, thr)
        assert torch.equal(ours, theirs), f"case {case}: n={n} thr={thr}"


@pytest.mark.parametrize("device", DEVICES)
def test_batched_nms_identical_keep(mrcnn_ops, device):
    g = torch.Generator().manual_seed(2)
    for case in range(CASES):
        # Up to 1500 boxes: torchvision switches from the offset trick to its per-class
        # loop above 1000 boxes on CPU, so both of its paths are compared.
        n = int(torch.randint(0, 1500, (1,), generator=g))
        boxes = random_boxes(g, n, integer=case % 3 == 0)
        scores = random_scores(g, n, ties=case % 5 == 0)
        idxs = torch.randint(0, int(torch.randint(1, 30, (1,), generator=g)), (n,), generator=g)
        thr = float(torch.rand(1, generator=g) * 0.8 + 0.1)
        ours = mrcnn_ops.batched_nms(boxes.to(device), scores.to(device), idxs.to(device), thr).cpu()
        theirs = torchvision.ops.batched_nms(boxes, scores, idxs, thr)
        assert_same_keep(ours, theirs, scores, device, f"case {case}: n={n} thr={thr}")


@pytest.mark.parametrize("device", DEVICES)
def test_nms_keep_mask_grouped_identical_keep(mrcnn_ops, device):
    # The RPN's NMS (issue 39): per image and level, torchvision's nms over the usable boxes.
    g = torch.Generator().manual_seed(21)
    for case in range(CASES // 5):
        images = int(torch.randint(1, 4, (1,), generator=g))
        sizes = torch.randint(0, 300, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g).tolist()
        n = sum(sizes)
        boxes = torch.stack([random_boxes(g, n, integer=case % 3 == 0) for _ in range(images)])
        scores = torch.stack([random_scores(g, n, ties=case % 4 == 0) for _ in range(images)])
        usable = torch.rand(images, n, generator=g) > 0.2
        thr = float(torch.rand(1, generator=g) * 0.8 + 0.1)
        ours = mrcnn_ops.nms_keep_mask_grouped(boxes.to(device), scores.to(device), usable.to(device),
                                               sizes, thr).cpu()
        theirs = torch.zeros(images, n, dtype=torch.bool)
        for i in range(images):
            start = 0
            for size in sizes:
                columns = torch.nonzero(usable[i, start:start + size]).squeeze(1) + start
                kept = torchvision.ops.nms(boxes[i, columns], scores[i, columns], thr)
                theirs[i, columns[kept]] = True
                start += size
        assert torch.equal(ours, theirs), f"case {case}: sizes={sizes} thr={thr}"


def random_rois(g, k, batch, height, width, scale):
    boxes = random_boxes(g, k, extent=max(height, width) / scale * 1.1, max_side=max(height, width) / scale * 0.6)
    boxes -= 0.05 * max(height, width) / scale  # some rois start outside the map
    batch_idx = torch.randint(0, batch, (k, 1), generator=g).float()
    return torch.cat([batch_idx, boxes], dim=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_forward_backward(mrcnn_ops, device, aligned):
    g = torch.Generator().manual_seed(3 + int(aligned))
    ratios = [0, 1, 2, 4]
    for case in range(CASES):
        batch = int(torch.randint(1, 3, (1,), generator=g))
        channels = int(torch.randint(1, 5, (1,), generator=g))
        height = int(torch.randint(4, 30, (1,), generator=g))
        width = int(torch.randint(4, 30, (1,), generator=g))
        scale = [1.0, 0.5, 0.25, 0.125][case % 4]
        k = int(torch.randint(0, 12, (1,), generator=g))
        sr = ratios[(case // 4) % 4]
        ph, pw = int(torch.randint(1, 8, (1,), generator=g)), int(torch.randint(1, 8, (1,), generator=g))
        x = torch.rand(batch, channels, height, width, generator=g)
        rois = random_rois(g, k, batch, height, width, scale)
        w = torch.rand(k, channels, ph, pw, generator=g)

        xt = x.clone().requires_grad_(True)
        ref = torchvision.ops.roi_align(xt, rois, (ph, pw), scale, sr, aligned)
        (ref * w).sum().backward()

        xo = x.to(device).requires_grad_(True)
        out = mrcnn_ops.roi_align(xo, rois.to(device), scale, ph, pw, sr, aligned)
        (out * w.to(device)).sum().backward()
        msg = f"case {case}: sr={sr} scale={scale} k={k} {height}x{width}"
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5, msg=msg)
        torch.testing.assert_close(xo.grad.cpu(), xt.grad, rtol=1e-5, atol=1e-5, msg=msg)


@pytest.mark.parametrize("device", DEVICES)
def test_multi_level_roi_align_vs_multiscale_roi_align(mrcnn_ops, device):
    g = torch.Generator().manual_seed(5)
    names = ["0", "1", "2", "3"]
    for case in range(CASES):
        img_h, img_w = int(torch.randint(64, 320, (1,), generator=g)), int(torch.randint(64, 320, (1,), generator=g))
        batch, channels = int(torch.randint(1, 3, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g))
        sr = [0, 1, 2, 4][case % 4]
        out_size = int(torch.randint(2, 8, (1,), generator=g))
        feats = {n: torch.rand(batch, channels, math.ceil(img_h / 2 ** (i + 2)), math.ceil(img_w / 2 ** (i + 2)), generator=g)
                 for i, n in enumerate(names)}
        boxes = []
        for _ in range(batch):
            k = int(torch.randint(0, 20, (1,), generator=g))
            b = random_boxes(g, k, extent=max(img_h, img_w), max_side=max(img_h, img_w) * 0.9)
            boxes.append(b)
        pooler = MultiScaleRoIAlign(names, out_size, sr)
        leaves = {n: f.clone().requires_grad_(True) for n, f in feats.items()}
        ref = pooler(leaves, boxes, [(img_h, img_w)] * batch)
        w = torch.rand(ref.shape, generator=g)
        (ref * w).sum().backward()

        rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b], 1) for i, b in enumerate(boxes)])
        ours_leaves = [feats[n].to(device).requires_grad_(True) for n in names]
        out = mrcnn_ops.multi_level_roi_align(ours_leaves, rois.to(device), pooler.scales, out_size, out_size, sr, False)
        (out * w.to(device)).sum().backward()
        msg = f"case {case}: image {img_h}x{img_w} sr={sr}"
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5, msg=msg)
        for n, leaf in zip(names, ours_leaves):
            torch.testing.assert_close(leaf.grad.cpu(), leaves[n].grad, rtol=1e-5, atol=1e-5, msg=msg)


@pytest.mark.parametrize("device", DEVICES)
def test_box_iou(mrcnn_ops, device):
    g = torch.Generator().manual_seed(6)
    for case in range(CASES):
        a = random_boxes(g, int(torch.randint(0, 60, (1,), generator=g)), integer=case % 2 == 0)
        b = random_boxes(g, int(torch.randint(0, 60, (1,), generator=g)), integer=case % 2 == 0)
        torch.testing.assert_close(mrcnn_ops.box_iou(a.to(device), b.to(device)).cpu(),
                                   torchvision.ops.box_iou(a, b), rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_encode_decode_vs_box_coder(mrcnn_ops, device):
    g = torch.Generator().manual_seed(7)
    for case in range(CASES):
        weights = tuple(float(v) for v in (torch.rand(4, generator=g) * 10 + 0.5))
        coder = det_utils.BoxCoder(weights)
        # n >= 1: torchvision's BoxCoder.decode cannot reshape an empty batch.
        n = int(torch.randint(1, 200, (1,), generator=g))
        proposals = random_boxes(g, n)
        gt = proposals + torch.randn(n, 4, generator=g) * 5
        gt[:, 2:] = torch.maximum(gt[:, 2:], gt[:, :2] + 0.5)
        torch.testing.assert_close(mrcnn_ops.encode_boxes(gt.to(device), proposals.to(device), list(weights)).cpu(),
                                   coder.encode_single(gt, proposals), rtol=1e-5, atol=1e-5)
        k = int(torch.randint(1, 4, (1,), generator=g))
        codes = torch.randn(n, 4 * k, generator=g) * 3
        theirs = coder.decode(codes, [proposals]).reshape(n, -1)
        ours = mrcnn_ops.decode_boxes(codes.to(device), proposals.to(device), list(weights), coder.bbox_xform_clip).cpu()
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_anchors_identical(mrcnn_ops, device):
    g = torch.Generator().manual_seed(8)
    for case in range(CASES):
        levels = int(torch.randint(1, 6, (1,), generator=g))
        sizes = tuple(tuple(int(s) for s in torch.randint(8, 600, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g))
                      for _ in range(levels))
        ratios = tuple(tuple(round(float(r), 3) for r in torch.rand(int(torch.randint(1, 4, (1,), generator=g)), generator=g) * 3 + 0.2)
                       for _ in range(levels))
        img_h, img_w = int(torch.randint(32, 900, (1,), generator=g)), int(torch.randint(32, 900, (1,), generator=g))
        feats = [torch.zeros(1, 1, max(1, img_h // 2 ** (l + 2)), max(1, img_w // 2 ** (l + 2))) for l in range(levels)]
        gen = AnchorGenerator(sizes, ratios)
        theirs = gen(ImageList(torch.zeros(1, 3, img_h, img_w), [(img_h, img_w)]), feats)[0]
        grid = [list(f.shape[-2:]) for f in feats]
        strides = [[img_h // h, img_w // w] for h, w in grid]
        ours = mrcnn_ops.generate_anchors([v for s in grid for v in s], [v for s in strides for v in s],
                                          [float(s) for lvl in sizes for s in lvl], [len(s) for s in sizes],
                                          [r for lvl in ratios for r in lvl], [len(r) for r in ratios],
                                          torch.device(device)).cpu()
        assert torch.equal(ours, theirs), f"case {case}: sizes={sizes} ratios={ratios}"


@pytest.mark.parametrize("device", DEVICES)
def test_matcher_identical(mrcnn_ops, device):
    g = torch.Generator().manual_seed(9)
    for case in range(CASES):
        gt = random_boxes(g, int(torch.randint(1, 15, (1,), generator=g)), integer=True)
        props = random_boxes(g, int(torch.randint(1, 400, (1,), generator=g)), integer=True)
        if case % 5 == 0:
            props = torch.cat([props, gt])  # exact matches and tied best qualities
        q = torchvision.ops.box_iou(gt, props)
        high = float(torch.rand(1, generator=g) * 0.5 + 0.4)
        low = float(torch.rand(1, generator=g) * high)
        if case % 7 == 0:
            high, low = 0.7, 0.3
        allow = case % 2 == 0
        theirs = det_utils.Matcher(high, low, allow_low_quality_matches=allow)(q)
        ours = mrcnn_ops.match_proposals(q.to(device), high, low, allow).cpu()
        assert torch.equal(ours, theirs), f"case {case}: high={high} low={low} allow={allow}"


@pytest.mark.parametrize("device", DEVICES)
def test_sampler_quotas_match_torchvision(mrcnn_ops, device):
    # Random subsets cannot be compared element-wise (different RNG streams), so the
    # check is on what the sampler guarantees: the same counts as torchvision, drawn
    # only from the right labels.
    g = torch.Generator().manual_seed(10)
    for case in range(CASES):
        n = int(torch.randint(0, 3000, (1,), generator=g))
        labels = torch.randint(-1, 3, (n,), generator=g).float()
        labels[torch.rand(n, generator=g) < 0.8] = 0
        batch = int(torch.randint(1, 600, (1,), generator=g))
        frac = float(torch.rand(1, generator=g))
        sampler = det_utils.BalancedPositiveNegativeSampler(batch, frac)
        tv_pos, tv_neg = sampler([labels])
        pos, neg = mrcnn_ops.sample_balanced(labels.to(device), batch, frac)
        pos, neg = pos.cpu(), neg.cpu()
        assert int(pos.sum()) == int(tv_pos[0].sum()), f"case {case}"
        assert int(neg.sum()) == int(tv_neg[0].sum()), f"case {case}"
        assert not bool((pos & (labels < 1)).any()) and not bool((neg & (labels != 0)).any())


def test_sampler_is_uniform(mrcnn_ops):
    labels = torch.zeros(20)
    counts = torch.zeros(20)
    torch.manual_seed(0)
    for _ in range(4000):
        _, neg = mrcnn_ops.sample_balanced(labels, 5, 0.0)
        counts += neg.float()
    # Each element is drawn with probability 1/4: 1000 ± 4.5 sigma.
    assert torch.all((counts - 1000).abs() < 4.5 * math.sqrt(4000 * 0.25 * 0.75)), counts


@pytest.mark.parametrize("device", DEVICES)
def test_paste_masks(mrcnn_ops, device):
    g = torch.Generator().manual_seed(11)
    for case in range(CASES):
        n = int(torch.randint(0, 6, (1,), generator=g))
        r = [14, 28][case % 2]
        img_h, img_w = int(torch.randint(8, 120, (1,), generator=g)), int(torch.randint(8, 120, (1,), generator=g))
        masks = torch.rand(n, 1, r, r, generator=g)
        # Detections are clipped to the image before pasting (torchvision's own paste
        # indexes wrongly for boxes entirely beyond the right/bottom edge).
        boxes = random_boxes(g, n, extent=max(img_h, img_w), max_side=max(img_h, img_w) * 0.8) - 10
        boxes = torchvision.ops.clip_boxes_to_image(boxes, (img_h, img_w))
        padding = [1, 1, 0, 2][case % 4]
        theirs = paste_masks_in_image(masks, boxes, (img_h, img_w), padding=padding)
        ours = mrcnn_ops.paste_masks(masks.to(device), boxes.to(device), img_h, img_w, padding).cpu()
        torch.testing.assert_close(ours, theirs, **paste_tolerance(device), msg=f"case {case}")


def paste_tolerance(device):
    """On the CPU the paste is ATen's own bilinear arithmetic, fused multiply-adds and kernel
    choice included: bit-identical to torchvision's (issue 54). The CUDA kernel repeats that
    arithmetic, which is not what ATen's CUDA resize computes."""
    return dict(rtol=0, atol=0) if device == "cpu" else dict(rtol=1e-5, atol=1e-5)


def thin_boxes(g, img_h, img_w):
    """Boxes where paste geometry is most fragile (issue 25): extreme aspect ratios (13x550
    and longer), boxes 1-3 px (and under 1 px) wide or tall, boxes touching each border and
    corner, spanning the whole image side; fractional offsets throughout. Clipped to the
    image, as detections are."""
    boxes = []
    for thin in (0.4, 1.0, 1.6, 2.0, 2.7, 3.0, 5.5, 13.0):
        for long_side in (0.45 * max(img_h, img_w), 550.0, float(max(img_h, img_w))):
            off = torch.rand(4, generator=g).tolist()
            x = off[0] * max(img_w - thin, 1.0)
            y = off[1] * max(img_h - long_side, 1.0)
            boxes.append([x, y, x + thin, y + long_side])  # tall
            x = off[2] * max(img_w - long_side, 1.0)
            y = off[3] * max(img_h - thin, 1.0)
            boxes.append([x, y, x + long_side, y + thin])  # wide
        f = float(torch.rand(1, generator=g)) * 0.9
        boxes += [[0.0, f, thin, img_h - f], [img_w - thin, 0.0, float(img_w), img_h * 0.8 + f],
                  [f, 0.0, img_w - f, thin], [0.0, img_h - thin, img_w * 0.7 + f, float(img_h)],
                  [0.0, 0.0, thin, thin * 20], [img_w - thin * 20, img_h - thin, float(img_w), float(img_h)]]
    boxes += [[0.0, 0.0, float(img_w), float(img_h)], [0.0, 0.0, 1.0, 1.0],
              [img_w - 1.0, img_h - 1.0, float(img_w), float(img_h)]]
    return torchvision.ops.clip_boxes_to_image(torch.tensor(boxes), (img_h, img_w))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("image", [(333, 517), (1200, 300), (640, 640)])
def test_paste_masks_thin_and_border_boxes(mrcnn_ops, device, image):
    """Thin, border-touching and 1-3 px boxes (issue 25) against paste_masks_in_image: the
    pasted values, and the thresholded op at every pixel whose torchvision probability is
    clearly off 0.5 (< 0.3 or > 0.7)."""
    img_h, img_w = image
    g = torch.Generator().manual_seed(25 + img_h)
    boxes = thin_boxes(g, img_h, img_w)
    n = boxes.shape[0]
    # Half uniform noise, half a smooth blob off the mask centre: a transposed or stretched
    # paste moves the blob, which noise alone would hide in its average.
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 28), torch.linspace(0, 1, 28), indexing="ij")
    blob = torch.sigmoid(12 * (0.3 - ((yy - 0.3) ** 2 + (xx - 0.65) ** 2).sqrt()))
    masks = torch.where(torch.arange(n).view(n, 1, 1, 1) % 2 == 0, torch.rand(n, 1, 28, 28, generator=g),
                        blob.expand(n, 1, 28, 28))
    theirs = paste_masks_in_image(masks, boxes, image, padding=1)
    ours = mrcnn_ops.paste_masks(masks.to(device), boxes.to(device), img_h, img_w, 1).cpu()
    binary = mrcnn_ops.paste_masks_binary(masks.to(device), boxes.to(device), img_h, img_w, 1, 0.5).cpu()
    # Bit-identical on the CPU: every pixel thresholds as torchvision's, even at 0.5.
    clear = (theirs < 0.3) | (theirs > 0.7) if device != "cpu" else torch.ones_like(theirs, dtype=torch.bool)
    for k in range(n):
        box = [round(v, 2) for v in boxes[k].tolist()]
        ours_px, theirs_px = int((binary[k] != 0).sum()), int((theirs[k] >= 0.5).sum())
        msg = f"box {k} {box}: {ours_px} pixels vs torchvision {theirs_px}"
        torch.testing.assert_close(ours[k], theirs[k], **paste_tolerance(device), msg=msg)
        flips = ((binary[k] != 0) != (theirs[k] >= 0.5)) & clear[k]
        assert int(flips.sum()) == 0, f"{msg}, {int(flips.sum())} clear pixels differ"
