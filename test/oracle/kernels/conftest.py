"""Loads build*/lib/libmrcnn_kernels.so (MRCNN_BUILD_DIR, default the checkout's build/) once."""
import os
import pathlib

import pytest
import torch


def _library_path() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[3] / "build")))
    return build / "lib" / "libmrcnn_kernels.so"


@pytest.fixture(scope="session", autouse=True)
def mrcnn_ops():
    path = _library_path()
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: build the mrcnn_kernels target first "
            "(or point MRCNN_BUILD_DIR at the build directory that has lib/libmrcnn_kernels.so)")
    torch.ops.load_library(str(path))
    return torch.ops.mrcnn
