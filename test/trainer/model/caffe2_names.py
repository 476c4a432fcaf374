"""Caffe2's blob names for Detectron2's ResNet tensors, as the ImageNet backbones of the
model zoo (ImageNetPretrained/MSRA/R-50.pkl, ...) name them: what tests write such files with.
Not a test module."""
import re


def caffe2_name_of_detectron2(name):
    """Caffe2's blob name for a Detectron2 ResNet tensor (scale and shift norms only)."""
    param = {"weight": "s", "bias": "b"}
    if m := re.fullmatch(r"backbone\.(?:bottom_up\.)?stem\.conv1\.weight", name):
        return "conv1_w"
    if m := re.fullmatch(r"backbone\.(?:bottom_up\.)?stem\.conv1\.norm\.(weight|bias)", name):
        return "res_conv1_bn_" + param[m[1]]
    if m := re.fullmatch(r"(?:backbone\.(?:bottom_up\.)?|roi_heads\.)res(\d)\.(\d+)\.conv(\d)\.weight", name):
        return f"res{m[1]}_{m[2]}_branch2{'abc'[int(m[3]) - 1]}_w"
    if m := re.fullmatch(r"(?:backbone\.(?:bottom_up\.)?|roi_heads\.)res(\d)\.(\d+)\.conv(\d)\.norm\.(weight|bias)", name):
        return f"res{m[1]}_{m[2]}_branch2{'abc'[int(m[3]) - 1]}_bn_{param[m[4]]}"
    if m := re.fullmatch(r"(?:backbone\.(?:bottom_up\.)?|roi_heads\.)res(\d)\.(\d+)\.shortcut\.weight", name):
        return f"res{m[1]}_{m[2]}_branch1_w"
    if m := re.fullmatch(r"(?:backbone\.(?:bottom_up\.)?|roi_heads\.)res(\d)\.(\d+)\.shortcut\.norm\.(weight|bias)", name):
        return f"res{m[1]}_{m[2]}_branch1_bn_{param[m[3]]}"
    return None
