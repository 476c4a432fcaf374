import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def build_dir():
    return pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(REPO / "build")))


@pytest.fixture(scope="session")
def probe():
    path = build_dir() / "tests" / "model_parity_probe"
    assert path.exists(), f"{path} not built: cmake --build <build> --target model_parity_probe"
    return path


@pytest.fixture(scope="session")
def trainer_bin():
    path = build_dir() / "bin" / "trainer"
    assert path.exists(), f"{path} not built: cmake --build <build> --target trainer"
    return path
