"""Fixtures the H200 capture tests share (tests/unit/test_h200_*.py).

`h200_catalog` is the test catalog tests/harness/device/h200_catalog.py writes on the device (the stand-ins,
never data/catalog.yml); `captured_plan` is the plan-h200.json in the capture folder the test module names as
its RUN.
"""
import importlib.util
import json
import pathlib

import pytest

DEVICE = pathlib.Path(__file__).resolve().parents[1] / "harness" / "device"


def load_h200_catalog_module():
    spec = importlib.util.spec_from_file_location("h200_catalog", DEVICE / "h200_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def h200_catalog():
    return load_h200_catalog_module().h200_catalog()


@pytest.fixture(scope="module")
def captured_plan(request):
    return json.loads((request.module.RUN / "plan-h200.json").read_text())
