"""Notebook 00 writes out the `ray.init` call, the job's runtime env and all, that the later lessons make through
`course.cluster.init_ray`: the two stay the same call. Nothing starts Ray here."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import ray
from python_source import parse
from ray._private import ray_constants

from course import cluster

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "00_ray_core.ipynb"


def run_connect_cell() -> dict[str, Any]:
    """The notebook's imports, then its code cell that calls `ray.init(`: the lesson's own text, run here."""
    cells = [parse("".join(c["source"])) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    imports = [node for cell in cells for node in cell.body if isinstance(node, ast.Import | ast.ImportFrom)]
    connect = next(cell for cell in cells if "ray.init(" in ast.unparse(cell))
    namespace: dict[str, Any] = {"__name__": "lesson_00_ray_core"}
    exec(compile(ast.Module(body=imports + connect.body, type_ignores=[]), NOTEBOOK.name, "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("verbose", ["0", "1"], ids=["quiet", "verbose"])
@pytest.mark.parametrize("address", [None, "127.0.0.1:6389"], ids=["alone", "on-the-course-cluster"])
def test_notebook_00s_ray_init_is_the_call_init_ray_makes(address, verbose, monkeypatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    os.environ["COURSE_VERBOSE"] = verbose  # the level of the `ray` loggers here, where local mode logs: INFO with 1
    if address:
        os.environ["RAY_ADDRESS"] = address
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)  # both change it
    calls = []
    monkeypatch.setattr(ray, "init", lambda **options: calls.append(options) or SimpleNamespace(dashboard_url=None))
    monkeypatch.setattr(ray, "cluster_resources", dict)  # what init_ray returns, asked of the Ray not started
    run_connect_cell()
    cluster.init_ray(require_shared=False)
    lesson, helper = calls
    lesson_env, helper_env = dict(lesson.pop("runtime_env")), dict(helper.pop("runtime_env"))
    assert lesson == helper, "notebook 00's ray.init and init_ray's differ"
    assert lesson["logging_level"] == ("INFO" if verbose == "1" else "WARNING")
    assert [Path(p).resolve() for p in lesson_env.pop("py_modules")] == [Path(p) for p in helper_env.pop("py_modules")]
    assert lesson_env == helper_env, "notebook 00's runtime env and course.cluster.job_runtime_env differ"
    assert lesson_env["env_vars"][cluster.config.DATA_DIR_ENV] == str(cluster.config.DATA_DIR)
