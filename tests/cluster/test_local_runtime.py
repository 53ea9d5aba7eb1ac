"""A notebook's own local Ray (no RAY_ADDRESS, as alone in JupyterLab) listens on 127.0.0.1 only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

LOCAL_RUNTIME = """
import json, psutil, ray
from course.cluster import init_ray
init_ray()
ray.get(ray.remote(lambda: 1).remote())
wide = []
for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
    try:
        for c in process.net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN and c.laddr.ip not in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
                wide.append(f"{process.name()} on {c.laddr.ip}:{c.laddr.port}")
    except psutil.Error:
        pass
print("WIDE", json.dumps(wide))
ray.shutdown()
"""

pytestmark = pytest.mark.cluster  # starts Ray


def test_a_notebooks_own_local_runtime_listens_on_loopback_only():
    """Alone in JupyterLab (no RAY_ADDRESS), `init_ray` starts Ray on this machine: on 127.0.0.1 only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    result = subprocess.run([sys.executable, "-c", LOCAL_RUNTIME], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "WIDE []" in result.stdout, result.stdout


def test_ray_data_uses_this_machines_cores_only_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray.data

    from course.cluster import LOCAL_DATA_CPUS, configure_ray_data

    context = ray.data.DataContext.get_current()
    saved = context.execution_options.resource_limits
    try:
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
        limit = configure_ray_data().execution_options.resource_limits.cpu
        assert limit == max(LOCAL_DATA_CPUS, os.cpu_count() or 1)
        context.execution_options.resource_limits = saved
        monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")  # a real cluster: Ray Data sizes itself
        assert configure_ray_data().execution_options.resource_limits.cpu == saved.cpu
    finally:
        context.execution_options.resource_limits = saved
