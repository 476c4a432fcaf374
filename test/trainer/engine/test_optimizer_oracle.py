"""The engine's NovoGrad against an independent float64 implementation of the published
update rule (Ginsburg et al. 2019, in NVIDIA's form: layer-wise second moment of the
gradient norm, weight decay inside the moment, optional gradient averaging), over 40 steps
with a varying learning rate, per-group weight decay and bias lr factor, a step where one
layer has no gradient, and a checkpoint round trip halfway (optimizer_oracle_tool).

With fp16 loss scaling the step is skipped on the device when a gradient overflowed
(Step(found_inf)): the runs with such steps (NaN and inf gradients, the first steps among
them, and one on each side of the round trip) must equal the reference run over the kept
steps alone, for NovoGrad and for SGD (against torch.optim.SGD)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", pathlib.Path(__file__).resolve().parents[3] / "build"))
TOOL = BUILD / "tests" / "optimizer_oracle_tool"
STEPS = 40
# conv: a weight and a bias; gn: a norm layer (1-D weight); fc: a weight.
SHAPES = {"conv.weight": (4, 3, 3, 3), "conv.bias": (4,), "gn.weight": (4,), "gn.bias": (4,), "fc.weight": (2, 4)}
# Detectron2's groups with WEIGHT_DECAY_BIAS set: its bias override applies to a norm layer's bias too.
KIND = {"conv.weight": "weight", "conv.bias": "bias", "gn.weight": "norm", "gn.bias": "bias", "fc.weight": "weight"}
WD = {"weight": 1e-3, "bias": 5e-4, "norm": 0.0}
LR_FACTOR = {"weight": 1.0, "bias": 2.0, "norm": 1.0}


def novograd(params, grads, lrs, beta1, beta2, eps, averaging):
    """The update rule, written from the paper: v_1 = |g_1|^2, v_t = b2 v + (1 - b2) |g_t|^2;
    m_t = b1 m + (g / (sqrt(v_t) + eps) + wd w) [* (1 - b1)]; w -= lr m_t."""
    w = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {}
    for t, lr in enumerate(lrs):
        for name in w:
            g = grads[t].get(name)
            if g is None:
                continue  # no gradient: the layer is left alone, moments included
            norm_sq = float(np.sum(g * g))
            v[name] = norm_sq if name not in v else beta2 * v[name] + (1 - beta2) * norm_sq
            u = g / (np.sqrt(v[name]) + eps) + WD[KIND[name]] * w[name]
            if averaging:
                u = u * (1 - beta1)
            m[name] = beta1 * m[name] + u
            w[name] = w[name] - lr * LR_FACTOR[KIND[name]] * m[name]
    return w


# Steps whose gradients overflowed: the first two (the optimizer's state starts during
# skips), both sides of the round trip at STEPS // 2, and one late.
SKIPPED = (0, 1, STEPS // 2 - 1, STEPS // 2, 31)


def make_run(skips):
    rng = np.random.default_rng(3)
    params = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    grads = []
    for t in range(STEPS):
        scale = 10.0 ** rng.uniform(-3, 1)  # gradients of very different sizes per step
        step = {k: scale * rng.standard_normal(s) for k, s in SHAPES.items()}
        if t == 7:
            del step["fc.weight"]
        grads.append(step)
    lrs = np.concatenate([np.linspace(1e-3, 1e-2, STEPS // 2), np.linspace(1e-2, 1e-4, STEPS - STEPS // 2)])
    flags = {}
    if skips:
        for t in SKIPPED:
            for k, g in grads[t].items():  # what an overflowed fp16 step hands over
                g.flat[0], g.flat[-1] = np.nan, np.inf
            flags[t] = 1.0
        for t in range(STEPS):
            flags.setdefault(t, 0.0)
    kept = [t for t in range(STEPS) if not flags.get(t)]
    return params, grads, lrs, flags, kept


def run_tool(tmp_path, params, grads, lrs, flags, opts):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is not built (set MRCNN_BUILD_DIR)")
    tensors = {f"param.{k}": torch.from_numpy(v) for k, v in params.items()}
    for t, step in enumerate(grads):
        tensors.update({f"grad.{t}.{k}": torch.from_numpy(v) for k, v in step.items()})
    tensors.update({f"found_inf.{t}": torch.tensor([f], dtype=torch.float32) for t, f in flags.items()})
    tensors["lr"] = torch.from_numpy(lrs)
    save_file(tensors, str(tmp_path / "in.safetensors"))
    subprocess.run([str(TOOL), str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors"), opts],
                   check=True, capture_output=True)
    return load_file(str(tmp_path / "out.safetensors"))


def check_moved_and_equal(ours, want, params, rtol, atol):
    for name in SHAPES:
        got = ours[f"param.{name}"].numpy()
        assert np.isfinite(got).all(), name
        moved = np.abs(want[name] - params[name]).max()
        assert moved > 1e-3, name  # training moved it: the comparison is not vacuous
        np.testing.assert_allclose(got, want[name], rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("skips", [False, True], ids=["every-step", "overflow-skips"])
@pytest.mark.parametrize("averaging", [False, True])
def test_novograd_matches_the_published_rule(tmp_path, averaging, skips):
    params, grads, lrs, flags, kept = make_run(skips)
    opts = ("SOLVER.OPTIMIZER NovoGrad SOLVER.BETAS [0.9, 0.98] SOLVER.NOVOGRAD.EPS 1e-8 "
            f"SOLVER.NOVOGRAD.GRAD_AVERAGING {str(averaging).lower()} SOLVER.WEIGHT_DECAY 1e-3 "
            "SOLVER.WEIGHT_DECAY_BIAS 5e-4 SOLVER.WEIGHT_DECAY_NORM 0.0 SOLVER.BIAS_LR_FACTOR 2.0")
    ours = run_tool(tmp_path, params, grads, lrs, flags, opts)
    want = novograd(params, [grads[t] for t in kept], lrs[kept], 0.9, 0.98, 1e-8, averaging)
    check_moved_and_equal(ours, want, params, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("skips", [False, True], ids=["every-step", "overflow-skips"])
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_matches_torch(tmp_path, nesterov, skips):
    params, grads, lrs, flags, kept = make_run(skips)
    opts = (f"SOLVER.OPTIMIZER SGD SOLVER.MOMENTUM 0.9 SOLVER.NESTEROV {str(nesterov).lower()} "
            "SOLVER.WEIGHT_DECAY 1e-3 SOLVER.WEIGHT_DECAY_BIAS 5e-4 SOLVER.WEIGHT_DECAY_NORM 0.0 "
            "SOLVER.BIAS_LR_FACTOR 2.0")
    ours = run_tool(tmp_path, params, grads, lrs, flags, opts)
    ref = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in params.items()}
    groups = {}
    for name, p in ref.items():
        groups.setdefault(KIND[name], []).append(p)
    sgd = torch.optim.SGD([{"params": ps, "weight_decay": WD[kind], "lr_factor": LR_FACTOR[kind]}
                           for kind, ps in groups.items()], lr=0.0, momentum=0.9, nesterov=nesterov)
    for t in kept:
        for group in sgd.param_groups:
            group["lr"] = lrs[t] * group["lr_factor"]
        for name, p in ref.items():
            g = grads[t].get(name)
            p.grad = None if g is None else torch.from_numpy(g.copy())
        sgd.step()
    want = {k: p.detach().numpy() for k, p in ref.items()}
    check_moved_and_equal(ours, want, params, rtol=1e-10, atol=1e-12)
