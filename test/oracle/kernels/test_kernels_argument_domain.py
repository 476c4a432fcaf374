"""mrcnn ops vs torchvision at the edges of their argument domains (CPU; CUDA too when a GPU is present).

Each case calls torchvision and ours on the same arguments: sampling ratios <= 0, pooled
sizes 0, negative/huge/zero scales, IoU thresholds outside [0, 1], empty tensors, NaN and
infinite coordinates, boxes with x2 < x1, non-contiguous inputs, float64/float16/bfloat16,
integer and floating idxs. Where torchvision returns, ours must return the same dtype and
shape and the same values (indices exactly, floats within tolerance, NaN where torchvision
has NaN); where torchvision raises, ours may raise too (with a message naming the op) or
return. Gradients are compared wherever torchvision's forward and backward both run.

Ops covered: roi_align (+ backward, aligned true/false), multi_level_roi_align (vs
MultiScaleRoIAlign) and map_roi_levels (vs LevelMapper), box_iou, nms, batched_nms (both
of torchvision's algorithms: <= 1000 and > 1000 boxes), encode/decode_boxes (vs BoxCoder),
match_proposals (vs Matcher), paste_masks (vs paste_masks_in_image), sample_balanced
(counts) and generate_anchors (vs AnchorGenerator).

Not compared, on purpose: inputs that make torchvision's C++ ROIAlign convert NaN to int
and read out of bounds (crash or garbage) are checked against the semantics ours
documents instead (test_roi_align_outside_torchvision_domain); sampler quotas that
torchvision turns into negative slice ends are rejected by ours
(test_sampler_rejects_what_torchvision_slices_oddly).
"""
import math

import pytest
import torch
import torchvision
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.roi_heads import paste_masks_in_image
from torchvision.ops import MultiScaleRoIAlign
from torchvision.ops.poolers import _setup_scales

from nms_order import assert_same_keep

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
NAN, INF = float("nan"), float("inf")
TORCH_ERRORS = (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError, AssertionError,
                ZeroDivisionError)


def _outcome(fn):
    try:
        return fn(), None
    except TORCH_ERRORS as error:
        return None, error


def _assert_same(got, expected, rtol, atol, what="result"):
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), f"{what}: {got!r} vs {expected!r}"
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, rtol, atol, f"{what}[{i}]")
        return
    got = got.cpu()
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, torchvision {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {tuple(got.shape)}, torchvision {tuple(expected.shape)}"
    if expected.is_floating_point():
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True, msg=what)
    else:
        assert torch.equal(got, expected), f"{what}: {got.tolist()} vs torchvision {expected.tolist()}"


def assert_matches_torchvision(ours, theirs, rtol=1e-5, atol=1e-5):
    """ours/theirs: zero-argument callables. Returns whether torchvision returned."""
    expected, tv_error = _outcome(theirs)
    got, our_error = _outcome(ours)
    if tv_error is not None:
        if our_error is not None:
            message = str(our_error)
            assert "mrcnn" in message or isinstance(our_error, NotImplementedError), (
                f"torchvision raises ({tv_error!r}) and so do we, without naming the op: {message}")
        return False
    assert our_error is None, f"torchvision returns, mrcnn raises: {our_error}"
    _assert_same(got, expected, rtol, atol)
    return True


def tol(dtype):
    # torchvision computes float16 ROIAlign / box arithmetic in float16, ours partly in float.
    return {"rtol": 2e-2, "atol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {"rtol": 1e-5, "atol": 1e-5}


# ----------------------------------------------------------------------------- ROIAlign

def _roi_input():
    g = torch.Generator().manual_seed(20)
    x = torch.rand(2, 3, 10, 12, generator=g)
    rois = torch.tensor([[0, 1.0, 1.5, 8.0, 7.0], [1, 0.0, 0.0, 11.0, 9.0],
                         [0, 3.2, 2.1, 4.0, 3.0], [1, -2.0, -1.0, 5.0, 14.0]])
    return x, rois


def _with(rois, row, col, value):
    r = rois.clone()
    r[row, col] = value
    return r


def _roi_cases():
    x, rois = _roi_input()
    swapped = rois[:, [0, 3, 4, 1, 2]]
    cases = {}
    for sr in (-1, -2, 0, 1, 3, 64):
        cases[f"sampling_ratio={sr}"] = (x, rois, 1.0, 3, 4, sr)
    for scale in (0.0, -0.5, -1.0, 1e-30, 0.25, 16.0):
        for sr in (2, -1):
            cases[f"spatial_scale={scale},sr={sr}"] = (x, rois, scale, 3, 4, sr)
    cases["spatial_scale=1e6,sr=2"] = (x, rois, 1e6, 3, 4, 2)
    cases["spatial_scale=1e30,sr=2"] = (x, rois, 1e30, 3, 4, 2)
    # Not scale 1e6 with an adaptive grid: torchvision's CPU kernel sizes its sample table
    # with an int product that overflows there, so it raises where the allocation fails
    # and corrupts the heap where it succeeds (it crashed the process on a 128 GiB GPU
    # machine). Ours is checked on its own in test_roi_align_outside_torchvision_domain.
    for ph, pw in ((0, 3), (3, 0), (0, 0), (40, 1), (1, 50), (7, 7), (-1, 3), (3, -2)):
        cases[f"pooled={ph}x{pw}"] = (x, rois, 0.5, ph, pw, 0)
    cases["0 rois"] = (x, rois[:0], 1.0, 3, 3, -1)
    cases["0 channels"] = (x[:, :0], rois, 1.0, 3, 3, -1)
    cases["batch 0, 0 rois"] = (x[:0], rois[:0], 1.0, 3, 3, -1)
    for sr in (2, -1):
        cases[f"x2<x1,y2<y1,sr={sr}"] = (x, swapped, 1.0, 3, 4, sr)
        for col in (1, 2, 3, 4):
            for value in (1e30, -1e30):
                cases[f"roi[{col}]={value},sr={sr}"] = (x, _with(rois, 1, col, value), 1.0, 3, 4, sr)
    cases["fractional batch index"] = (x, _with(_with(rois, 0, 0, 0.7), 1, 0, 1.99), 1.0, 3, 4, 2)
    cases["batch index -0.5 (truncates to 0)"] = (x, _with(rois, 1, 0, -0.5), 1.0, 3, 4, 2)
    cases["input transposed H/W"] = (x.transpose(2, 3).contiguous().transpose(2, 3), rois, 1.0, 3, 4, 2)
    cases["input channels_last"] = (x.contiguous(memory_format=torch.channels_last), rois, 1.0, 3, 4, -1)
    cases["input channel slice"] = (torch.cat([x, x], 1)[:, 1:4], rois, 1.0, 3, 4, 2)
    cases["rois column slice"] = (x, torch.cat([rois[:, :1], rois], 1)[:, 1:], 1.0, 3, 4, 2)
    cases["rois transposed"] = (x, rois.t().contiguous().t(), 1.0, 3, 4, 2)
    cases["rois every other row"] = (x, torch.cat([rois, rois], 1).view(8, 5)[::2], 1.0, 3, 4, 2)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        for sr in (2, -1):
            cases[f"{dtype},sr={sr}"] = (x.to(dtype), rois.to(dtype), 0.5, 3, 4, sr)
    cases["input float32, rois float64"] = (x, rois.double(), 1.0, 3, 4, 2)
    cases["input 3-D"] = (x[0], rois, 1.0, 3, 4, 2)
    cases["rois K×4"] = (x, rois[:, 1:], 1.0, 3, 4, 2)
    cases["int32 input"] = ((x * 10).int(), rois.int(), 1.0, 3, 4, 2)
    return cases


# Non-finite coordinates torchvision's CPU kernel handles without converting NaN to int
# (every sample lands outside the map, or the adaptive grid is empty).
def _roi_nonfinite_cases():
    x, rois = _roi_input()
    cases = {}
    for col, value in ((1, INF), (2, INF), (3, -INF), (4, -INF)):
        for sr in (2, -1):
            cases[f"roi[{col}]={value},sr={sr}"] = (x, _with(rois, 1, col, value), 1.0, 3, 4, sr, False)
    for col in (1, 2, 3, 4):
        cases[f"roi[{col}]=nan,sr=-1"] = (x, _with(rois, 1, col, NAN), 1.0, 3, 4, -1, False)
    return cases


def _roi_align_fwd_bwd(fn, x, device):
    """(output, input gradient) of fn(x) with fixed output weights; gradient None for non-float."""
    leaf = x.detach().to(device).requires_grad_(x.is_floating_point())
    out = fn(leaf)
    if not leaf.requires_grad:
        return (out.detach(),)
    w = (torch.arange(out.numel(), dtype=torch.float64) % 7 / 7).reshape(out.shape).to(out.dtype).to(out.device)
    (grad,) = torch.autograd.grad(out, leaf, w, allow_unused=True)
    return out.detach(), torch.zeros_like(leaf) if grad is None else grad


def _compare_roi_align(mrcnn_ops, device, x, rois, scale, ph, pw, sr, aligned):
    def ours():
        rois_d = rois.to(device)
        return _roi_align_fwd_bwd(lambda t: mrcnn_ops.roi_align(t, rois_d, scale, ph, pw, sr, aligned), x, device)

    def theirs():
        return _roi_align_fwd_bwd(lambda t: torchvision.ops.roi_align(t, rois, (ph, pw), scale, sr, aligned), x, "cpu")

    assert_matches_torchvision(ours, theirs, **tol(x.dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("case", list(_roi_cases()))
def test_roi_align(mrcnn_ops, device, aligned, case):
    x, rois, scale, ph, pw, sr = _roi_cases()[case]
    _compare_roi_align(mrcnn_ops, device, x, rois, scale, ph, pw, sr, aligned)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_roi_nonfinite_cases()))
def test_roi_align_nonfinite_rois(mrcnn_ops, device, case):
    _compare_roi_align(mrcnn_ops, device, *_roi_nonfinite_cases()[case])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sr", [-1, 0, 2])
def test_roi_align_sampling_ratio_default_is_adaptive(mrcnn_ops, device, sr):
    # torchvision.ops.roi_align's default sampling_ratio is -1: any value <= 0 means
    # ceil(roi_size / pooled_size) points, so -1, -7 and 0 agree with each other.
    x, rois = _roi_input()
    out = mrcnn_ops.roi_align(x.to(device), rois.to(device), 0.5, 5, 5, sr, True).cpu()
    torch.testing.assert_close(out, torchvision.ops.roi_align(x, rois, 5, 0.5, sr, True), rtol=1e-5, atol=1e-5)
    if sr <= 0:
        torch.testing.assert_close(out, mrcnn_ops.roi_align(x.to(device), rois.to(device), 0.5, 5, 5, -7, True).cpu())


def test_roi_align_outside_torchvision_domain(mrcnn_ops):
    """Inputs where torchvision's C++ kernel converts NaN to int and reads out of bounds.

    Ours: a bin with a sampling point whose coordinate is NaN (the other one inside the
    map) pools NaN and sends no gradient; points outside the map pool zero; an empty
    feature map pools zeros; an adaptive grid that is NaN/infinite/beyond int32 samples
    nothing (zeros, what torchvision's int conversion gives on x86); a grid too large to
    pool raises; an out-of-range batch index raises on CPU.
    """
    x, rois = _roi_input()
    for col in (1, 2):  # x1 / y1 NaN: every bin of the roi has NaN samples
        out = mrcnn_ops.roi_align(x, _with(rois, 1, col, NAN), 1.0, 3, 4, 2, False)
        assert out[1].isnan().all() and not out[[0, 2, 3]].isnan().any()
    # y2 = +inf: bin height inf, so row 0 samples y = y1 + 0 * inf = NaN, later rows are
    # beyond the map.
    out = mrcnn_ops.roi_align(x, _with(rois, 1, 4, INF), 1.0, 3, 4, 2, False)
    assert out[1, :, 0].isnan().all() and (out[1, :, 1:] == 0).all()
    leaf = x.clone().requires_grad_(True)
    mrcnn_ops.roi_align(leaf, _with(rois, 1, 1, NAN), 1.0, 3, 4, 2, False).sum().backward()
    clean = x.clone().requires_grad_(True)
    mrcnn_ops.roi_align(clean, rois[[0, 2, 3]], 1.0, 3, 4, 2, False).sum().backward()
    torch.testing.assert_close(leaf.grad, clean.grad)  # the NaN roi sends nothing
    for scale in (NAN, INF):
        assert mrcnn_ops.roi_align(x, rois, scale, 3, 4, -1, True).eq(0).all()
    assert mrcnn_ops.roi_align(x, rois, NAN, 3, 4, 2, True).isnan().all()
    assert mrcnn_ops.roi_align(x[:, :, :0], rois, 1.0, 3, 4, 2, True).eq(0).all()
    assert mrcnn_ops.roi_align(x, rois, 1e30, 3, 4, -1, False).eq(0).all()
    with pytest.raises(RuntimeError, match="sampling points"):
        mrcnn_ops.roi_align(x, rois, 1e6, 3, 4, -1, False)
    if torch.cuda.is_available():  # checking there would need a sync: such a roi pools zeros
        assert mrcnn_ops.roi_align(x.cuda(), rois.cuda(), 1e6, 3, 4, -1, False).eq(0).all()
    with pytest.raises(RuntimeError, match="batch index"):
        mrcnn_ops.roi_align(x, _with(rois, 0, 0, 2.0), 1.0, 3, 4, 2, False)
    with pytest.raises(RuntimeError, match="batch index"):
        mrcnn_ops.roi_align(x, _with(rois, 0, 0, NAN), 1.0, 3, 4, 2, False)


def test_roi_align_backward_op_accepts_adaptive_and_empty(mrcnn_ops):
    x, rois = _roi_input()
    grad = torch.rand(4, 3, 3, 4)
    for sr in (-1, 0):
        out = mrcnn_ops._roi_align_backward(grad, rois, 0.5, 3, 4, 2, 3, 10, 12, sr, True)
        ref = torch.ops.torchvision._roi_align_backward(grad, rois, 0.5, 3, 4, 2, 3, 10, 12, sr, True)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    empty = mrcnn_ops._roi_align_backward(torch.rand(4, 3, 0, 4), rois, 0.5, 0, 4, 2, 3, 10, 12, -1, True)
    assert empty.shape == (2, 3, 10, 12) and (empty == 0).all()


# --------------------------------------------------------------- multi-level ROIAlign

NAMES = ["0", "1", "2", "3"]
IMAGE = (120, 150)


def _ml_input():
    g = torch.Generator().manual_seed(21)
    feats = {n: torch.rand(2, 3, math.ceil(IMAGE[0] / 2 ** (i + 2)), math.ceil(IMAGE[1] / 2 ** (i + 2)), generator=g)
             for i, n in enumerate(NAMES)}

    def boxes(k):
        xy = torch.rand(k, 2, generator=g) * 120
        return torch.cat([xy, xy + torch.rand(k, 2, generator=g) * 100 + 0.5], 1)

    return feats, [boxes(5), boxes(4)]


def _ml_cases():
    feats, boxes = _ml_input()
    cases = {}
    for sr in (-1, -3, 0, 2):
        cases[f"sampling_ratio={sr}"] = (feats, boxes, 3, sr)
    cases["output 0"] = (feats, boxes, 0, 2)
    cases["output (2, 5)"] = (feats, boxes, (2, 5), -1)
    cases["0 boxes"] = (feats, [b[:0] for b in boxes], 3, -1)
    cases["one image without boxes"] = (feats, [boxes[0], boxes[1][:0]], 3, -1)
    # Non-finite coordinates whose area is NaN or -inf: LevelMapper gives no level, the
    # roi pools zeros.
    for col, value in ((0, NAN), (1, NAN), (2, NAN), (3, NAN), (0, INF), (1, INF), (2, -INF), (3, -INF)):
        b = [t.clone() for t in boxes]
        b[0][1, col] = value
        cases[f"box[{col}]={value}"] = (feats, b, 3, 2)
    b = [t.clone() for t in boxes]
    b[0][:, [0, 2]] = b[0][:, [2, 0]]
    cases["x2<x1 (negative area)"] = (feats, b, 3, 2)
    b = [t.clone() for t in boxes]
    b[0][1, 2:] = b[0][1, :2]
    cases["zero-area box"] = (feats, b, 3, -1)
    cases["huge boxes"] = (feats, [t * 1e6 for t in boxes], 3, 2)
    cases["features transposed H/W"] = ({k: v.transpose(2, 3).contiguous().transpose(2, 3) for k, v in feats.items()},
                                        boxes, 3, 2)
    cases["features channels_last"] = ({k: v.contiguous(memory_format=torch.channels_last) for k, v in feats.items()},
                                       boxes, 3, -1)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        cases[f"{dtype}"] = ({k: v.to(dtype) for k, v in feats.items()}, [t.to(dtype) for t in boxes], 3, 2)
    cases["single level, x2<x1"] = ({"0": feats["0"]}, [boxes[0][:, [2, 1, 0, 3]], boxes[1]], 3, 2)
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_ml_cases()))
def test_multi_level_roi_align_vs_multiscale_roi_align(mrcnn_ops, device, case):
    feats, boxes, out_size, sr = _ml_cases()[case]
    names = list(feats)
    dtype = feats[names[0]].dtype
    sizes = [IMAGE] * len(boxes)
    scales, _ = _setup_scales(list(feats.values()), sizes, 224, 4)
    oh, ow = (out_size, out_size) if isinstance(out_size, int) else out_size

    def run(pool, leaves):
        out = pool(leaves)
        w = (torch.arange(out.numel(), dtype=torch.float64) % 5 / 5).reshape(out.shape).to(out.dtype).to(out.device)
        grads = torch.autograd.grad(out, leaves, w, allow_unused=True)
        return (out.detach(),) + tuple(torch.zeros_like(l) if g is None else g for l, g in zip(leaves, grads))

    def theirs():
        pooler = MultiScaleRoIAlign(names, out_size, sr)
        leaves = [feats[n].clone().requires_grad_(True) for n in names]
        return run(lambda ls: pooler(dict(zip(names, ls)), boxes, sizes), leaves)

    def ours():
        rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i), dtype=b.dtype), b], 1)
                          for i, b in enumerate(boxes)])
        leaves = [feats[n].to(device).requires_grad_(True) for n in names]
        return run(lambda ls: mrcnn_ops.multi_level_roi_align(ls, rois.to(device), scales, oh, ow, sr, False), leaves)

    assert_matches_torchvision(ours, theirs, **tol(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_map_roi_levels_vs_level_mapper(mrcnn_ops, device):
    from torchvision.ops.poolers import LevelMapper
    g = torch.Generator().manual_seed(22)
    xy = torch.rand(12, 2, generator=g) * 300
    boxes = torch.cat([xy, xy + torch.rand(12, 2, generator=g) * 400], 1)
    boxes[0, 2], boxes[1, 0], boxes[2, 3] = NAN, INF, -INF
    boxes[3, 2:] = boxes[3, :2]
    boxes[4, [0, 2]] = boxes[4, [2, 0]]
    for dtype in (torch.float32, torch.float64, torch.float16):
        b = boxes.to(dtype)
        rois = torch.cat([torch.zeros(len(b), 1, dtype=dtype), b], 1)
        for kmin, kmax in ((2, 5), (3, 3)):
            scales = [2.0 ** -k for k in range(kmin, kmax + 1)]
            assert_matches_torchvision(lambda: mrcnn_ops.map_roi_levels(rois.to(device), scales),
                                       lambda: LevelMapper(kmin, kmax)([b]))


# ----------------------------------------------------------------------------- box_iou

def _random_boxes(g, n, extent=100.0, side=40.0):
    xy = torch.rand(n, 2, generator=g) * extent
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g) * side + 0.5], 1)


def _iou_cases():
    g = torch.Generator().manual_seed(23)
    a, b = _random_boxes(g, 7), _random_boxes(g, 9)
    cases = {"plain": (a, b), "0×M": (a[:0], b), "N×0": (a, b[:0]), "0×0": (a[:0], b[:0])}
    for value in (NAN, INF, -INF, 1e30, -1e30, 3e38):
        for col in range(4):
            cases[f"boxes1[{col}]={value}"] = (_with(a, 2, col, value), b)
    swapped = a[:, [2, 3, 0, 1]]
    cases["x2<x1"] = (swapped, b)
    cases["x2<x1 both"] = (swapped, swapped)
    zero = torch.cat([a[:, :2], a[:, :2]], 1)
    cases["zero area"] = (zero, b)
    cases["zero area both (0/0)"] = (zero, zero)
    cases["boxes1 transposed"] = (a.t().contiguous().t(), b)
    cases["boxes2 column slice"] = (a, torch.cat([b, b], 1)[:, 3:7])
    cases["boxes2 every other row"] = (a, torch.cat([b, b], 1).view(18, 4)[::2])
    ia, ib = a.round(), b.round()
    for dtype in (torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.uint8):
        cases[f"{dtype}"] = (ia.to(dtype), ib.to(dtype))
    cases["uint8, x2<x1 (wraps as in torchvision)"] = (ia[:, [2, 3, 0, 1]].to(torch.uint8), ib.to(torch.uint8))
    cases["float32 × float64"] = (a, b.double())
    cases["float16 × float32"] = (a.half(), b)
    cases["int32 × float32"] = (ia.int(), b)
    cases["batched [2,7,4] × [2,9,4]"] = (torch.stack([a, a + 1]), torch.stack([b, b * 2]))
    cases["broadcast [2,1,3,4] × [5,2,4]"] = (_random_boxes(g, 6).view(2, 1, 3, 4), _random_boxes(g, 10).view(5, 2, 4))
    cases["one box [4] × [M,4]"] = (a[0], b)
    cases["boxes1 N×5"] = (torch.cat([a, a[:, :1]], 1), b)
    cases["boxes2 one box [4]"] = (a, b[0])
    cases["bool boxes"] = (a > 50, b > 50)
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_iou_cases()))
def test_box_iou(mrcnn_ops, device, case):
    a, b = _iou_cases()[case]
    dtype = torch.promote_types(a.dtype, b.dtype)
    assert_matches_torchvision(lambda: mrcnn_ops.box_iou(a.to(device), b.to(device)),
                               lambda: torchvision.ops.box_iou(a, b), **tol(dtype))


# ------------------------------------------------------------------ nms / batched_nms

def _nms_base(n=60, seed=24, extent=100.0):
    g = torch.Generator().manual_seed(seed)
    return _random_boxes(g, n, extent), torch.rand(n, generator=g), torch.randint(0, 4, (n,), generator=g)


def _nms_cases():
    boxes, scores, idxs = _nms_base()
    cases = {}
    for thr in (-1.0, -1e-30, -0.0, 0.0, 0.5, 1.0, 1.5, 1e30, INF, -INF, NAN):
        cases[f"iou_threshold={thr}"] = (boxes, scores, idxs, thr)
    cases["0 boxes"] = (boxes[:0], scores[:0], idxs[:0], 0.5)
    cases["1 box"] = (boxes[:1], scores[:1], idxs[:1], 0.5)
    for value in (NAN, INF, -INF, 1e30, -1e30):
        for col in range(4):
            b = boxes.clone()
            b[[3, 10], col] = value
            cases[f"box[{col}]={value}"] = (b, scores, idxs, 0.5)
        s = scores.clone()
        s[[3, 7]] = value
        cases[f"score={value}"] = (boxes, s, idxs, 0.5)
    cases["x2<x1 all"] = (boxes[:, [2, 3, 0, 1]], scores, idxs, 0.3)
    b = boxes.clone()
    b[::3] = b[::3][:, [2, 1, 0, 3]]
    cases["x2<x1 some"] = (b, scores, idxs, 0.3)
    cases["negative coordinates"] = (boxes - 200, scores, idxs, 0.3)
    cases["coordinates around 0"] = (boxes - 50, scores, idxs, 0.3)
    cases["huge coordinates"] = (boxes * 1e30, scores, idxs, 0.3)
    cases["zero-area boxes"] = (torch.cat([boxes[:, :2], boxes[:, :2]], 1), scores, idxs, 0.3)
    cases["tied scores"] = (boxes.round(), (scores * 4).round(), idxs, 0.3)
    cases["boxes transposed"] = (boxes.t().contiguous().t(), scores, idxs, 0.3)
    cases["boxes column slice"] = (torch.cat([boxes, boxes], 1)[:, 2:6], scores, idxs, 0.3)
    cases["boxes every other row"] = (torch.cat([boxes, boxes], 1).view(120, 4)[::2], scores, idxs, 0.3)
    cases["scores strided"] = (boxes, torch.stack([scores, scores], 1)[:, 1], idxs, 0.3)
    cases["idxs strided"] = (boxes, scores, torch.stack([idxs, idxs], 1)[:, 0], 0.3)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        cases[f"{dtype}"] = (boxes.to(dtype), scores.to(dtype), idxs, 0.3)
    cases["boxes float32, scores float64"] = (boxes, scores.double(), idxs, 0.3)
    cases["int32 boxes"] = (boxes.int(), scores.int(), idxs, 0.3)
    cases["boxes N×5"] = (torch.cat([boxes, boxes[:, :1]], 1), scores, idxs, 0.3)
    cases["scores 2-D"] = (boxes, scores[:, None], idxs, 0.3)
    cases["scores too short"] = (boxes, scores[:5], idxs, 0.3)
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_nms_cases()))
def test_nms(mrcnn_ops, device, case):
    boxes, scores, _, thr = _nms_cases()[case]
    assert_matches_torchvision(lambda: mrcnn_ops.nms(boxes.to(device), scores.to(device), thr),
                               lambda: torchvision.ops.nms(boxes, scores, thr))


def _batched_nms_cases():
    cases = dict(_nms_cases())
    boxes, scores, idxs = _nms_base()
    for dtype in (torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.float16, torch.float32,
                  torch.float64):
        cases[f"idxs {dtype}"] = (boxes, scores, idxs.to(dtype), 0.3)
    cases["idxs negative"] = (boxes, scores, idxs - 2, 0.3)
    cases["idxs huge (2**40)"] = (boxes, scores, idxs * 2 ** 40, 0.3)
    cases["idxs fractional"] = (boxes, scores, idxs.float() / 3, 0.3)
    cases["idxs -0.0 and 0.0"] = (boxes, scores, torch.where(idxs > 1, -0.0, 0.0), 0.3)
    for value in (NAN, INF):
        i = idxs.double()
        i[::5] = value
        cases[f"idxs with {value}"] = (boxes, scores, i, 0.3)
    cases["idxs 2-D"] = (boxes, scores, idxs[:, None], 0.3)
    cases["idxs too short"] = (boxes, scores, idxs[:5], 0.3)
    # Above 1000 boxes torchvision switches to one NMS per distinct idx (on CPU).
    boxes, scores, idxs = _nms_base(1500, seed=25, extent=300.0)
    idxs = idxs + torch.arange(1500) % 2
    for thr in (-0.5, 0.0, 0.5, NAN):
        cases[f"1500 boxes, iou_threshold={thr}"] = (boxes, scores, idxs, thr)
    cases["1500 boxes, tied scores"] = (boxes.round(), (scores * 4).round(), idxs, 0.5)
    cases["1500 boxes, negative coordinates"] = (boxes - 250, scores, idxs, 0.5)
    cases["1500 boxes, fractional idxs"] = (boxes, scores, idxs.float() / 4, 0.5)
    cases["1500 boxes, idxs -0.0 and 0.0"] = (boxes, scores, torch.where(idxs > 1, -0.0, 0.0), 0.5)
    cases["1500 boxes, bool idxs"] = (boxes, scores, idxs > 2, 0.5)
    i = idxs.double()
    i[::7] = NAN
    cases["1500 boxes, NaN idxs (never kept)"] = (boxes, scores, i, 0.5)
    b = boxes.clone()
    b[5, 2] = NAN
    cases["1500 boxes, NaN box"] = (b, scores, idxs, 0.5)
    b = boxes.clone()
    b[::2] = b[::2][:, [2, 1, 0, 3]]
    cases["1500 boxes, x2<x1"] = (b, scores, idxs, 0.3)
    cases["1500 boxes, float64"] = (boxes.double(), scores.double(), idxs, 0.5)
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_batched_nms_cases()))
def test_batched_nms(mrcnn_ops, device, case):
    boxes, scores, idxs, thr = _batched_nms_cases()[case]
    ours = lambda: mrcnn_ops.batched_nms(boxes.to(device), scores.to(device), idxs.to(device), thr)  # noqa: E731
    theirs = lambda: torchvision.ops.batched_nms(boxes, scores, idxs, thr)  # noqa: E731
    if device == "cpu" or _outcome(theirs)[1] is not None:
        assert_matches_torchvision(ours, theirs)
    else:
        assert_same_keep(ours(), theirs(), scores, device, case)


@pytest.mark.parametrize("device", DEVICES)
def test_batched_nms_threshold_boundaries(mrcnn_ops, device):
    # IoU exactly at the threshold (and one ulp either side) for same-class pairs of
    # fractional boxes: torchvision takes IoUs of boxes shifted by idx * (max + 1), whose
    # rounding differs from the boxes as given; ours must round the same way.
    g = torch.Generator().manual_seed(26)
    for case in range(120):
        boxes, scores = _random_boxes(g, 40, 100.0, 60.0), torch.rand(40, generator=g)
        idxs = torch.randint(0, 8, (40,), generator=g)
        pairs = [(i, j) for i in range(40) for j in range(i + 1, 40) if idxs[i] == idxs[j]]
        i, j = pairs[case % len(pairs)]
        iou = float(torchvision.ops.box_iou(boxes[i:i + 1], boxes[j:j + 1]))
        for thr in (iou, math.nextafter(iou, 0), math.nextafter(iou, 1)):
            ours = mrcnn_ops.batched_nms(boxes.to(device), scores.to(device), idxs.to(device), thr).cpu()
            assert torch.equal(ours, torchvision.ops.batched_nms(boxes, scores, idxs, thr)), f"case {case} thr {thr}"


# ------------------------------------------------------------- box coder and matcher

WEIGHTS = (10.0, 10.0, 5.0, 5.0)


def _coder_cases():
    g = torch.Generator().manual_seed(27)
    proposals = _random_boxes(g, 6)
    gt = proposals + torch.randn(6, 4, generator=g)
    codes = torch.randn(6, 4, generator=g)
    cases = {"plain": (gt, proposals, codes), "0 boxes": (gt[:0], proposals[:0], codes[:0])}
    for value in (NAN, INF, -INF):
        cases[f"gt/proposal/code={value}"] = (_with(gt, 1, 2, value), _with(proposals, 2, 3, value),
                                              _with(codes, 3, 2, value))
    cases["x2<x1"] = (gt[:, [2, 3, 0, 1]], proposals[:, [2, 3, 0, 1]], codes)
    cases["zero width/height"] = (gt, torch.cat([proposals[:, :2], proposals[:, :2]], 1), codes)
    cases["huge codes (clamped)"] = (gt, proposals, codes * 100)
    cases["non-contiguous"] = (gt.t().contiguous().t(), torch.cat([proposals, proposals], 1)[:, 4:],
                               torch.cat([codes, codes], 1)[:, 2:6])
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        cases[f"{dtype}"] = (gt.to(dtype), proposals.to(dtype), codes.to(dtype))
    cases["float32 gt/codes, float64 proposals/boxes"] = (gt, proposals.double(), codes)
    cases["float64 gt/codes, float32 proposals/boxes"] = (gt.double(), proposals, codes.double())
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_coder_cases()))
def test_encode_decode_vs_box_coder(mrcnn_ops, device, case):
    gt, proposals, codes = _coder_cases()[case]
    coder = det_utils.BoxCoder(WEIGHTS)
    t = tol(codes.dtype)
    assert_matches_torchvision(lambda: mrcnn_ops.encode_boxes(gt.to(device), proposals.to(device), list(WEIGHTS)),
                               lambda: coder.encode_single(gt, proposals), **t)
    for k in (1, 3):
        c = codes.repeat(1, k)
        assert_matches_torchvision(
            lambda: mrcnn_ops.decode_boxes(c.to(device), proposals.to(device), list(WEIGHTS), coder.bbox_xform_clip),
            lambda: coder.decode_single(c, proposals), **t)


def _matcher_cases():
    g = torch.Generator().manual_seed(28)
    q = torchvision.ops.box_iou(_random_boxes(g, 4), _random_boxes(g, 30))
    q[:, 5] = q[:, 6]  # ties
    cases = {"plain": (q, 0.7, 0.3), "0 gt": (q[:0], 0.7, 0.3), "0 predictions": (q[:, :0], 0.7, 0.3)}
    cases["NaN quality"] = (_with(q, 1, 3, NAN), 0.7, 0.3)
    cases["thresholds outside [0, 1]"] = (q, 1.5, -0.5)
    cases["high == low"] = (q, 0.5, 0.5)
    cases["high < low"] = (q, 0.3, 0.7)
    cases["non-contiguous"] = (q.t().contiguous().t(), 0.7, 0.3)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        cases[f"{dtype}"] = (q.to(dtype), 0.7, 0.3)
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize("case", list(_matcher_cases()))
def test_matcher(mrcnn_ops, device, allow, case):
    q, high, low = _matcher_cases()[case]
    assert_matches_torchvision(lambda: mrcnn_ops.match_proposals(q.to(device), high, low, allow),
                               lambda: det_utils.Matcher(high, low, allow)(q))


# ------------------------------------------------------------------------- mask paste

def _paste_cases():
    g = torch.Generator().manual_seed(29)
    masks = torch.rand(3, 1, 28, 28, generator=g)
    boxes = _random_boxes(g, 3, 60.0, 30.0)
    cases = {"plain": (masks, boxes, 1), "0 masks": (masks[:0], boxes[:0], 1), "padding 0": (masks, boxes, 0),
             "padding 3": (masks, boxes, 3)}
    for value in (NAN, INF, -INF):
        cases[f"box={value}"] = (masks, _with(boxes, 1, 2, value), 1)
    cases["x2<x1"] = (masks, boxes[:, [2, 3, 0, 1]], 1)
    cases["non-contiguous"] = (masks.transpose(2, 3).contiguous().transpose(2, 3), boxes.t().contiguous().t(), 1)
    cases["float64"] = (masks.double(), boxes.double(), 1)
    cases["float16"] = (masks.half(), boxes.half(), 1)
    cases["bfloat16"] = (masks.bfloat16(), boxes.bfloat16(), 1)
    cases["float32 masks, float64 boxes"] = (masks, boxes.double(), 1)
    cases["int64 boxes"] = (masks, boxes.round().long(), 1)
    return cases


@pytest.mark.filterwarnings("ignore:Truncating the start/stop/step")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("image", [(80, 90), (0, 0), (1, 90)])
@pytest.mark.parametrize("case", list(_paste_cases()))
def test_paste_masks(mrcnn_ops, device, image, case):
    masks, boxes, padding = _paste_cases()[case]
    assert_matches_torchvision(lambda: mrcnn_ops.paste_masks(masks.to(device), boxes.to(device), *image, padding),
                               lambda: paste_masks_in_image(masks, boxes, image, padding=padding),
                               **tol(masks.dtype))


# -------------------------------------------------------------- sampler and anchors

def _sampler_cases():
    labels = torch.tensor([1.0, 0, 0, -1, 2, 0, 1, 0, 0, 0])
    return {"plain": (labels, 6, 0.5), "0 labels": (labels[:0], 6, 0.5), "batch 0": (labels, 0, 0.5),
            "fraction 0": (labels, 6, 0.0), "fraction 1": (labels, 6, 1.0), "all ignored": (-torch.ones(5), 4, 0.5),
            "int64 labels": (labels.long(), 6, 0.5), "float16 labels": (labels.half(), 6, 0.5),
            "strided labels": (torch.stack([labels, labels], 1)[:, 0], 6, 0.5),
            "NaN label": (torch.tensor([NAN, 1.0, 0.0]), 2, 0.5)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_sampler_cases()))
def test_sampler_counts(mrcnn_ops, device, case):
    # Random subsets differ (different RNG streams): the counts must not.
    labels, batch, fraction = _sampler_cases()[case]

    def ours():
        pos, neg = mrcnn_ops.sample_balanced(labels.to(device), batch, fraction)
        return torch.tensor([int(pos.sum()), int(neg.sum())])

    def theirs():
        pos, neg = det_utils.BalancedPositiveNegativeSampler(batch, fraction)([labels])
        return torch.tensor([int(pos[0].sum()), int(neg[0].sum())])

    assert_matches_torchvision(ours, theirs)


def test_sampler_rejects_what_torchvision_slices_oddly(mrcnn_ops):
    # torchvision turns a negative quota into a negative slice end (randperm(n)[:-k]);
    # ours rejects such arguments instead.
    labels = torch.tensor([1.0, 0, 0, 1])
    for batch, fraction in ((4, 1.5), (4, -0.5), (-3, 0.5)):
        with pytest.raises(RuntimeError, match="mrcnn::sample_balanced"):
            mrcnn_ops.sample_balanced(labels, batch, fraction)


def _anchor_cases():
    return {"plain": (((32,),), ((0.5, 1.0, 2.0),), [(8, 8)]),
            "two levels": (((16, 24), (48,)), ((1.0,), (0.5, 2.0)), [(8, 8), (4, 4)]),
            "ratio 0": (((32,),), ((0.0, 1.0),), [(4, 4)]), "negative ratio": (((32,),), ((-1.0,),), [(4, 4)]),
            "size 0": (((0,),), ((1.0,),), [(4, 4)]), "negative size": (((-16,),), ((1.0,),), [(4, 4)]),
            "fractional size": (((10.5,),), ((1.0,),), [(4, 4)]),
            "grid larger than image (stride 0)": (((32,),), ((1.0,),), [(128, 128)]),
            "empty grid": (((32,),), ((1.0,),), [(0, 8)])}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_anchor_cases()))
def test_anchors(mrcnn_ops, device, case):
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.image_list import ImageList
    sizes, ratios, grid = _anchor_cases()[case]
    image = (64, 64)

    def theirs():
        feats = [torch.zeros(1, 1, *g) for g in grid]
        return AnchorGenerator(sizes, ratios)(ImageList(torch.zeros(1, 3, *image), [image]), feats)[0]

    def ours():
        strides = [[image[0] // g[0] if g[0] else 0, image[1] // g[1] if g[1] else 0] for g in grid]
        return mrcnn_ops.generate_anchors([v for g in grid for v in g], [v for s in strides for v in s],
                                          [float(s) for level in sizes for s in level], [len(s) for s in sizes],
                                          [float(r) for level in ratios for r in level], [len(r) for r in ratios],
                                          torch.device(device))

    assert_matches_torchvision(ours, theirs)
