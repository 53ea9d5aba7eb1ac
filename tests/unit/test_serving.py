"""pipeline.serving, without Ray: which model notebook 06 serves (and what it says when there is none), how a request's
body becomes an image or a 4xx, the bounded load test, and the page."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_internals import ray_train_snapshot

from course import config, distributed, internals, serving
from course.budget import get_budget
from course.serving import BadImage, read_image
from course.sources import get_sources

ROOT = Path(__file__).resolve().parents[2]
DOGS = get_budget(0).dogs  # notebook 03's section of the cpu budget


def jpeg(size=(80, 60), mode="RGB") -> bytes:
    out = io.BytesIO()
    pixels = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)  # noise: no tiny file
    Image.fromarray(pixels).convert(mode).save(out, format="JPEG")
    return out.getvalue()


def test_a_good_image_comes_back_as_rgb_even_when_it_is_grayscale():
    image = read_image(jpeg(mode="L"))
    assert image.mode == "RGB" and image.size == (80, 60)


@pytest.mark.parametrize(
    ("what", "status", "says"),
    [
        ("text, not an image", 415, "not an image file"),
        ("an empty body", 400, "no body"),
        ("an oversized image", 413, "pixels, over this service's limit"),
        ("a file cut short", 400, "damaged"),
    ],
)
def test_bad_input_is_a_4xx_that_says_what_to_send(what, status, says):
    with pytest.raises(BadImage) as raised:
        read_image(serving.probe_bodies(jpeg())[what])
    assert raised.value.status == status and says in str(raised.value), str(raised.value)


def test_a_body_over_the_byte_limit_is_refused_before_it_is_decoded():
    with pytest.raises(BadImage, match="MB, over this service's limit") as raised:
        read_image(b"\xff" * 2_000, max_bytes=1_000)
    assert raised.value.status == 413


def test_the_probes_end_with_a_good_image():
    bodies = serving.probe_bodies(jpeg())
    assert list(bodies)[-1] == "a good image" and read_image(bodies["a good image"])


def test_an_answer_names_the_likeliest_class_and_its_probability():
    assert serving.answer(np.array([0.2, 0.8]), ["dog", "fish"], batch_size=3) == {
        "label": "fish",
        "probability": 0.8,
        "batch_size": 3,
    }


def test_the_load_test_sends_every_body_once_at_the_concurrency_asked_and_stops():
    in_flight, most = [0], [0]

    def send(body):
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        time.sleep(0.02)
        in_flight[0] -= 1
        return {"label": body}

    test = serving.load_test(send, [b"a", b"b", b"c"] * 10, concurrency=4)
    assert [answer["label"] for answer in test.answers] == [b"a", b"b", b"c"] * 10  # in the order of the bodies
    assert 1 < most[0] <= 4 and len(test.latencies) == 30
    assert test.percentile(50) >= 20 and test.throughput > 0
    assert list(test.summary()) == [
        "requests",
        "in flight",
        "throughput (req/s)",
        "p50 latency (ms)",
        "p95 latency (ms)",
    ]


def test_watching_replicas_is_bounded_and_keeps_one_row_per_change():
    states = iter([{"RUNNING": 1}, {"RUNNING": 1, "STARTING": 1}, {"RUNNING": 2}])
    seen = serving.watch_replicas(lambda: next(states), until=lambda s: s.get("RUNNING") == 2, limit_s=60)
    assert list(seen["replicas"]) == ["1 running", "1 running, 1 starting", "2 running"]
    assert seen.attrs["reached"] and seen.attrs["states"] == {"RUNNING": 2} and 1 < seen.attrs["seconds"] < 60
    started = time.perf_counter()
    seen = serving.watch_replicas(lambda: {"RUNNING": 1}, until=lambda s: False, limit_s=1.5)
    assert len(seen) == 1 and time.perf_counter() - started < 60  # ended by its limit (else never), however busy
    assert not seen.attrs["reached"] and seen.attrs["seconds"] > 1.5  # gave up: the cell can say so


def test_the_serve_port_is_free_on_loopback_unless_set(monkeypatch):
    monkeypatch.delenv(config.SERVE_PORT_ENV, raising=False)
    port = serving.serve_port()
    assert port in distributed.CHOSEN_PORTS and not serving.is_listening(port)
    monkeypatch.setenv(config.SERVE_PORT_ENV, "18123")
    assert serving.serve_port() == 18123


def test_a_port_that_frees_a_moment_later_counts_as_stopped_and_one_that_stays_does_not():
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    assert not serving.stops_listening(port, within_s=0.5)  # still held: a verdict after half a second
    threading.Timer(0.5, server.close).start()
    assert serving.stops_listening(port, within_s=60) and not serving.is_listening(port)


def fake_run(storage: Path, name: str, steps: list[int], accuracies: list[float] | None = None) -> Path:
    run = storage / name
    run.mkdir(parents=True)
    reported = []
    for step, accuracy in zip(steps, accuracies or [0.9] * len(steps), strict=True):
        folder = f"checkpoint_{step:04d}"
        (run / folder / "checkpoint").mkdir(parents=True)
        reported.append({"checkpoint_dir_name": folder, "metrics": {"step": step, "eval_accuracy": accuracy}})
    (run / internals.RUN_SNAPSHOT).write_text(json.dumps(ray_train_snapshot(reported)))  # as Ray Train writes it
    return run


def test_the_model_served_is_the_best_checkpoint_of_notebook_03s_newest_run_not_its_last(tmp_path, capsys):
    fake_run(tmp_path, f"{serving.FINE_TUNED_RUN}-2026-01-01_10-00-00", [50, 100])
    fake_run(tmp_path, f"{serving.FINE_TUNED_RUN}-2026-02-01_10-00-00", [50, 100, 150], [0.7, 0.9, 0.8])
    fake_run(tmp_path, "02-beans-ray-train-2026-03-01_10-00-00", [50])
    (tmp_path / f"{serving.FINE_TUNED_RUN}-2026-03-01_10-00-00").mkdir()  # started, stopped before a checkpoint
    checkpoint = serving.fine_tuned_checkpoint(get_sources("standin"), DOGS, storage=str(tmp_path))
    assert checkpoint.path.endswith(f"{serving.FINE_TUNED_RUN}-2026-02-01_10-00-00/checkpoint_0100")
    assert "step 100, validation accuracy 0.900 (the highest it kept)" in capsys.readouterr().out


def test_the_run_is_read_quietly_and_one_without_a_checkpoint_names_the_notebook_to_run_again(tmp_path, capfd):
    run = fake_run(tmp_path, f"{serving.FINE_TUNED_RUN}-2026-01-01_10-00-00", [50])
    checkpoint, metrics = serving.best_checkpoint(str(run))
    assert checkpoint.path == str(run / "checkpoint_0050") and metrics == {"step": 50, "eval_accuracy": 0.9}
    assert capfd.readouterr() == ("", ""), "Ray Train's own line about the run's snapshot stays out of the notebook"
    empty = fake_run(tmp_path, f"{serving.FINE_TUNED_RUN}-2026-02-01_10-00-00", [])
    with pytest.raises(FileNotFoundError, match=r"reported no checkpoint: run notebooks/03_ray_data.ipynb again"):
        serving.best_checkpoint(str(empty))


def test_without_notebook_03s_run_the_real_sources_name_the_notebook_to_run_first(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Run notebooks/03_ray_data.ipynb first") as raised:
        serving.fine_tuned_checkpoint(get_sources("real"), DOGS, storage=str(tmp_path))
    assert str(tmp_path) in str(raised.value)


def test_without_notebook_03s_run_a_stand_in_is_served_saying_so_and_kept_for_the_next_run(
    tmp_path, monkeypatch, capsys
):
    """Run alone, notebook 06 serves a stand-in: it says so, names notebook 03 and the stand-in's folder."""
    built = []

    def build(sources, dogs, folder):  # the fine-tune itself runs in notebook 06 (tests/lessons/test_serve.py)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        built.append(folder)
        return 12.0

    monkeypatch.setattr(serving, "build_standin_model", build)
    sources = get_sources("standin")
    checkpoint = serving.fine_tuned_checkpoint(sources, DOGS, storage=str(tmp_path / "ray"))
    said = capsys.readouterr().out
    assert f"missing (no run at {tmp_path / 'ray'}/{serving.FINE_TUNED_RUN}-*)" in said
    assert "run notebooks/03_ray_data.ipynb first" in said
    assert f"a stand-in, fine-tuned here in 12 s: {tmp_path / 'ray' / serving.STANDIN_FOLDER}" in said
    assert checkpoint.path == str(tmp_path / "ray" / serving.STANDIN_FOLDER)  # in the storage: every replica reads it
    assert (tmp_path / "ray" / serving.STANDIN_FOLDER / "checkpoint" / "config.json").exists()
    serving.fine_tuned_checkpoint(sources, DOGS, storage=str(tmp_path / "ray"))
    assert "fine-tuned by an earlier run" in capsys.readouterr().out and len(built) == 1  # a rerun reuses it


def test_notebook_03_names_its_run_as_notebook_06_looks_for_it():
    cells = json.loads((ROOT / "notebooks" / "03_ray_data.ipynb").read_text())["cells"]
    source = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    assert f'run_config("{serving.FINE_TUNED_RUN}")' in source


def test_the_page_posts_the_picked_file_and_shows_the_answer_or_the_error():
    assert 'type="file"' in serving.PAGE and 'fetch("predict", {method: "POST", body: file})' in serving.PAGE
    assert re.search(r"result\.label.*result\.probability", serving.PAGE) and "result.error" in serving.PAGE


def test_the_stand_in_is_fine_tuned_as_notebook_03_fine_tunes(tmp_path, monkeypatch):
    """Its steps, batch size and learning rate are the budget's section for notebook 03, in whole epochs."""
    import course.build

    asked = {}
    monkeypatch.setattr(course.build, "pretrain", lambda model, pixels, labels, **options: asked.update(options))
    dogs = DOGS.__class__(**{**vars(DOGS), "train_steps": 60, "batch_size": 16, "learning_rate": 3e-4})
    seconds = serving.build_standin_model(get_sources("standin"), dogs, tmp_path / "checkpoint")
    images = len(serving.labelled_images(get_sources("standin"), "train"))
    assert asked == {"epochs": -(-60 * 16 // images), "batch_size": 16, "lr": 3e-4, "progress": False}
    assert (tmp_path / "checkpoint" / "config.json").exists() and seconds > 0


def test_a_free_port_is_one_no_connection_takes_by_itself_and_a_held_one_is_passed_over(monkeypatch):
    """The OS gives a connection's own port from its ephemeral range (Linux 32768-60999): a free port picked there
    can be taken before the server binds it (Serve's proxy failed so on a fresh clone). The course picks below it."""
    import random
    import socket

    linux = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low, high = (int(n) for n in linux.read_text().split()) if linux.exists() else (49152, 65535)  # macOS's
    assert not set(distributed.CHOSEN_PORTS) & set(range(low, high + 1)), "the chosen ports overlap the OS's own"
    ports = {distributed.free_loopback_port() for _ in range(20)}
    assert ports <= set(distributed.CHOSEN_PORTS) and len(ports) > 1
    with socket.create_server(("127.0.0.1", 0)) as held:
        taken = held.getsockname()[1]
        with socket.create_server(("127.0.0.1", 0)) as freed:  # a port this test held a moment ago, whatever else
            free = freed.getsockname()[1]  # runs on the machine (not taken + 1: Ray's workers may hold that)
        monkeypatch.setattr(distributed, "CHOSEN_PORTS", [taken, free])
        monkeypatch.setattr(random.SystemRandom, "sample", lambda self, ports, k: list(ports))
        assert distributed.free_loopback_port(tries=2) == free
        monkeypatch.setattr(distributed, "CHOSEN_PORTS", [taken])
        with pytest.raises(RuntimeError, match="no free port on 127.0.0.1 in 1 tries"):
            distributed.free_loopback_port(tries=1)
