"""mrcnn::deform_conv2d vs torchvision.ops.deform_conv2d on randomised inputs.

Forward within 1e-5 and every gradient (input, offset, mask, weight, bias) within 1e-4 of
torchvision's own backward, relative to the largest reference value (float32; 1e-10 in
float64), CPU always, CUDA too when a GPU is present (against torchvision on the CPU).
The cases cover DCN v1 and v2, groups, offset_groups, stride, padding, dilation, batch > 1,
non-square and 1x1 kernels, and offsets that send samples far outside the map, exactly
onto integer pixels and the -1 / H borders, and into the (-1, 0) band where only some
corners are inside.
"""
import pytest
import torch
import torchvision

CASES = 200
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
KERNELS = [(3, 3), (1, 1), (3, 2), (2, 3), (1, 3), (5, 5)]
OFFSET_KINDS = ["small", "large", "integer", "half_integer", "border"]


def _pick(g, values):
    return values[int(torch.randint(0, len(values), (1,), generator=g))]


def _offsets(g, kind, shape, height, width, dtype):
    if kind == "small":
        return torch.randn(shape, generator=g, dtype=dtype) * 1.5
    if kind == "large":  # most samples land outside the map, on every side
        return torch.randn(shape, generator=g, dtype=dtype) * 2 * max(height, width)
    if kind == "integer":  # samples exactly on pixels, on -1 and on H / W
        return torch.randint(-3, 4, shape, generator=g).to(dtype)
    if kind == "half_integer":  # the (-1, 0) band and cell midpoints
        return torch.randint(-7, 8, shape, generator=g).to(dtype) / 2
    # Displacements that push grid points to just inside and just outside the borders.
    edge = torch.tensor([-1.0, -0.999, -0.5, -0.001, 0.0, 0.001], dtype=dtype)
    pick = torch.randint(0, len(edge), shape, generator=g)
    return edge[pick] + torch.randint(-2, 3, shape, generator=g).to(dtype)


def random_case(g, case, dtype):
    """One case's tensors and conv parameters (all on the CPU)."""
    groups = _pick(g, [1, 1, 2, 4])
    offset_groups = _pick(g, [1, 2])
    per = groups * offset_groups
    channels = per * int(torch.randint(1, 3, (1,), generator=g))
    out_channels = groups * int(torch.randint(1, 4, (1,), generator=g))
    kh, kw = KERNELS[case % len(KERNELS)]
    stride = (_pick(g, [1, 2]), _pick(g, [1, 2]))
    padding = (_pick(g, [0, 1, 2]), _pick(g, [0, 1, 2]))
    dilation = (_pick(g, [1, 2]), _pick(g, [1, 2]))
    batch = int(torch.randint(1, 4, (1,), generator=g))
    height = int(torch.randint(dilation[0] * (kh - 1) + 1, 12, (1,), generator=g))
    width = int(torch.randint(dilation[1] * (kw - 1) + 1, 12, (1,), generator=g))
    out_h = (height + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    kind = OFFSET_KINDS[case % len(OFFSET_KINDS)]
    taps = offset_groups * kh * kw
    return {
        "input": torch.randn(batch, channels, height, width, generator=g, dtype=dtype),
        "offset": _offsets(g, kind, (batch, 2 * taps, out_h, out_w), height, width, dtype),
        "mask": torch.rand(batch, taps, out_h, out_w, generator=g, dtype=dtype) if case % 2 else None,
        "weight": torch.randn(out_channels, channels // groups, kh, kw, generator=g, dtype=dtype),
        "bias": torch.randn(out_channels, generator=g, dtype=dtype) if case % 3 else None,
        "stride": stride, "padding": padding, "dilation": dilation,
        "groups": groups, "offset_groups": offset_groups, "kind": kind,
    }


def _leaves(c, device):
    names = ["input", "offset", "mask", "weight", "bias"]
    return {n: c[n].to(device, copy=True).requires_grad_() for n in names if c[n] is not None}


def _max_rel_error(ours, theirs):
    return float((ours.cpu() - theirs).abs().max()) / max(1.0, float(theirs.abs().max()))


def compare_case(mrcnn_ops, c, device, g):
    """Max relative forward error and per-tensor gradient errors of one case."""
    ours_in, theirs_in = _leaves(c, device), _leaves(c, "cpu")
    ours = mrcnn_ops.deform_conv2d(
        ours_in["input"], ours_in["offset"], ours_in.get("mask"), ours_in["weight"],
        ours_in.get("bias"), c["stride"], c["padding"], c["dilation"], c["groups"],
        c["offset_groups"])
    theirs = torchvision.ops.deform_conv2d(
        theirs_in["input"], theirs_in["offset"], theirs_in["weight"], theirs_in.get("bias"),
        stride=c["stride"], padding=c["padding"], dilation=c["dilation"], mask=theirs_in.get("mask"))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    grad = torch.randn(theirs.shape, generator=g, dtype=theirs.dtype)
    ours.backward(grad.to(device))
    theirs.backward(grad)
    grads = {n: _max_rel_error(ours_in[n].grad, theirs_in[n].grad) for n in theirs_in}
    return _max_rel_error(ours.detach(), theirs.detach()), grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,forward_tol,grad_tol,cases",
                         [(torch.float32, 1e-5, 1e-4, CASES), (torch.float64, 1e-10, 1e-10, CASES // 2)])
def test_deform_conv2d_matches_torchvision(mrcnn_ops, device, dtype, forward_tol, grad_tol, cases):
    g = torch.Generator().manual_seed(2026 if dtype == torch.float32 else 2027)
    worst_forward, worst_grads = 0.0, {}
    for case in range(cases):
        c = random_case(g, case, dtype)
        forward, grads = compare_case(mrcnn_ops, c, device, g)
        where = (f"case {case}: kind={c['kind']} shape={tuple(c['input'].shape)} "
                 f"weight={tuple(c['weight'].shape)} stride={c['stride']} padding={c['padding']} "
                 f"dilation={c['dilation']} groups={c['groups']} offset_groups={c['offset_groups']} "
                 f"mask={c['mask'] is not None} bias={c['bias'] is not None}")
        assert forward <= forward_tol, f"forward {forward:.3g}, {where}"
        for name, err in grads.items():
            assert err <= grad_tol, f"grad {name} {err:.3g}, {where}"
            worst_grads[name] = max(worst_grads.get(name, 0.0), err)
        worst_forward = max(worst_forward, forward)
    print(f"\n{device} {dtype}: max forward error {worst_forward:.3g}, max gradient errors "
          + ", ".join(f"{n} {e:.3g}" for n, e in sorted(worst_grads.items())))


def test_deform_conv2d_gradcheck_float64(mrcnn_ops):
    """Our backward against finite differences too (offsets away from the kinks)."""
    g = torch.Generator().manual_seed(7)
    for groups, offset_groups, with_mask in [(1, 1, False), (2, 2, True), (1, 2, True)]:
        x = torch.randn(1, 4, 4, 5, generator=g, dtype=torch.float64, requires_grad=True)
        w = torch.randn(2, 4 // groups, 2, 3, generator=g, dtype=torch.float64, requires_grad=True)
        b = torch.randn(2, generator=g, dtype=torch.float64, requires_grad=True)
        taps = offset_groups * 6
        shape = (1, 2 * taps, 3, 3)  # 2x3 kernel, stride 1, padding 0, dilation 1 on 4x5
        # Fractional parts in [0.2, 0.8]: finite differences never cross a pixel boundary.
        off = (torch.randint(-2, 3, shape, generator=g) + 0.2
               + 0.6 * torch.rand(shape, generator=g)).to(torch.float64).requires_grad_()
        mask = (torch.rand(1, taps, 3, 3, generator=g, dtype=torch.float64).requires_grad_()
                if with_mask else None)

        def fn(x, off, w, b, mask=None):
            return mrcnn_ops.deform_conv2d(x, off, mask, w, b, [1, 1], [0, 0], [1, 1], groups, offset_groups)

        inputs = (x, off, w, b) + ((mask,) if with_mask else ())
        assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_deform_conv2d_without_offsets_is_conv2d(mrcnn_ops):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 6, 9, 8, generator=g)
    w = torch.randn(4, 3, 3, 3, generator=g)
    b = torch.randn(4, generator=g)
    off = torch.zeros(2, 2 * 9, 5, 4)
    ours = mrcnn_ops.deform_conv2d(x, off, None, w, b, [2, 2], [1, 1], [1, 1], 2, 1)
    torch.testing.assert_close(ours, torch.nn.functional.conv2d(x, w, b, 2, 1, 1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_deform_conv2d_names_the_wrong_argument(mrcnn_ops, device):
    x = torch.randn(1, 4, 6, 6, device=device)
    w = torch.randn(2, 4, 3, 3, device=device)
    with pytest.raises(RuntimeError, match="offset must be"):
        mrcnn_ops.deform_conv2d(x, torch.zeros(1, 17, 4, 4, device=device), None, w, None)
    with pytest.raises(RuntimeError, match="offset must be"):
        mrcnn_ops.deform_conv2d(x, torch.zeros(1, 18, 5, 4, device=device), None, w, None)
    with pytest.raises(RuntimeError, match="mask must be"):
        mrcnn_ops.deform_conv2d(x, torch.zeros(1, 18, 4, 4, device=device),
                                torch.ones(1, 8, 4, 4, device=device), w, None)
    with pytest.raises(RuntimeError, match="offset_groups"):
        mrcnn_ops.deform_conv2d(x, torch.zeros(1, 54, 4, 4, device=device), None, w, None,
                                offset_groups=3)
    with pytest.raises(RuntimeError, match="weight must be"):
        mrcnn_ops.deform_conv2d(x, torch.zeros(1, 18, 4, 4, device=device), None, w, None, groups=2)
