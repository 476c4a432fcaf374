"""The engine's NovoGrad against an independent float64 implementation of the published
update rule (Ginsburg et al. 2019, in NVIDIA's form: layer-wise second moment of the
gradient norm, weight decay inside the moment, optional gradient averaging), over 40 steps
with a varying learning rate, per-group weight decay and bias lr factor, a step where one
layer has no gradient, and a checkpoint round trip halfway (optimizer_oracle_tool)."""
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
KIND = {"conv.weight": "weight", "conv.bias": "bias", "gn.weight": "norm", "gn.bias": "norm", "fc.weight": "weight"}
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


@pytest.mark.parametrize("averaging", [False, True])
def test_novograd_matches_the_published_rule(tmp_path, averaging):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is not built (set MRCNN_BUILD_DIR)")
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
    tensors = {f"param.{k}": torch.from_numpy(v) for k, v in params.items()}
    for t, step in enumerate(grads):
        tensors.update({f"grad.{t}.{k}": torch.from_numpy(v) for k, v in step.items()})
    tensors["lr"] = torch.from_numpy(lrs)
    save_file(tensors, str(tmp_path / "in.safetensors"))
    opts = ("SOLVER.OPTIMIZER NovoGrad SOLVER.BETAS [0.9, 0.98] SOLVER.NOVOGRAD.EPS 1e-8 "
            f"SOLVER.NOVOGRAD.GRAD_AVERAGING {str(averaging).lower()} SOLVER.WEIGHT_DECAY 1e-3 "
            "SOLVER.WEIGHT_DECAY_BIAS 5e-4 SOLVER.WEIGHT_DECAY_NORM 0.0 SOLVER.BIAS_LR_FACTOR 2.0")
    subprocess.run([str(TOOL), str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors"), opts],
                   check=True, capture_output=True)
    ours = load_file(str(tmp_path / "out.safetensors"))
    want = novograd(params, grads, lrs, 0.9, 0.98, 1e-8, averaging)
    for name in SHAPES:
        got = ours[f"param.{name}"].numpy()
        moved = np.abs(want[name] - params[name]).max()
        assert moved > 1e-3, name  # training moved it: the comparison is not vacuous
        np.testing.assert_allclose(got, want[name], rtol=1e-10, atol=1e-12, err_msg=name)
