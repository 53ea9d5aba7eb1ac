"""Notebook 06's plumbing around Ray Serve: the model to serve, the images to send, reading a request's image,
a bounded load test, and the page people use. The Serve code itself (deployments, batching, scaling) is in the
notebook.
"""

from __future__ import annotations

import io
import logging
import math
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
from PIL import Image, UnidentifiedImageError
from ray.serve.schema import LoggingConfig
from ray.train import Checkpoint, Result

from course import settings
from course.budget_sections import DogsBudget
from course.config import SERVE_PORT_ENV, verbose
from course.distributed import free_loopback_port
from course.internals import RUN_SNAPSHOT
from course.sources import Sources
from course.storage import exists, filesystem, publish_folder, shared_path, storage_path
from helpers.catalog import IMAGENETTE_SYNSETS
from helpers.features import to_rgb
from helpers.ingest import check_label_table, class_folders, ensure_labels, file_name

# The run of notebook 03 whose model notebook 06 serves: the name notebook 03 gives `run_config` (a test checks it).
FINE_TUNED_RUN = "03-dogs-fish-ray-data"
FINE_TUNED_NOTEBOOK = "notebooks/03_ray_data.ipynb"
STANDIN_FOLDER = "serve-standin-model"  # under the storage path: the model notebook 06 fine-tunes when 03 has not run
# The largest request the service takes: the model sees 224 x 224 pixels at most, a photo from a phone is far more.
MAX_IMAGE_BYTES = 5_000_000
MAX_IMAGE_PIXELS = 4096 * 4096


# --- the model to serve --------------------------------------------------------------------------------------


def latest_run(name: str, storage: str | None = None) -> str | None:
    """The newest run folder named ``<name>-<date>_<time>`` in the storage path that holds a checkpoint, or None."""
    storage = storage or storage_path()
    fs, root = filesystem(storage)
    try:
        found = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    except OSError:
        return None
    runs = sorted(
        info.path
        for info in found
        if info.type == pafs.FileType.Directory
        and info.base_name.startswith(f"{name}-")
        and fs.get_file_info(f"{info.path}/{RUN_SNAPSHOT}").type == pafs.FileType.File
    )
    if not runs:
        return None
    return storage.rstrip("/") + "/" + runs[-1].rsplit("/", 1)[-1]


def best_checkpoint(run: str, metric: str = "eval_accuracy") -> tuple[Checkpoint, dict]:
    """The best of the checkpoints a Ray Train run kept, by ``metric`` (highest), and the metrics reported with it, as
    notebook 02 reads its own (``Result.get_best_checkpoint``). Ray Train's own reading of the run folder,
    ``Result.from_path``, logs that it found the run's snapshot: quietly, unless ``COURSE_VERBOSE=1``."""
    train = logging.getLogger("ray.train")
    level = train.level
    if not verbose():
        train.setLevel(max(logging.WARNING, train.getEffectiveLevel()))
    try:
        result = Result.from_path(run)
    finally:
        train.setLevel(level)
    if result.checkpoint is None:
        raise FileNotFoundError(f"The run at {run} reported no checkpoint: run {FINE_TUNED_NOTEBOOK} again.")
    best = result.get_best_checkpoint(metric=metric, mode="max")
    return best, next(metrics for checkpoint, metrics in result.best_checkpoints if checkpoint.path == best.path)


def fine_tuned_checkpoint(sources: Sources, dogs: DogsBudget, storage: str | None = None) -> Checkpoint:
    """The model notebook 03 fine-tuned (the best checkpoint of its newest run, by validation accuracy), saying which.

    When notebook 03 has not run yet: with the stand-in sources, a stand-in fine-tuned here in a minute or two
    (and kept in results/ for the next run), saying so and naming the notebook to run; with the real sources, an
    error naming the notebook to run first.
    """
    run = latest_run(FINE_TUNED_RUN, storage)
    if run is not None:
        checkpoint, metrics = best_checkpoint(run)
        print(f"serving notebook 03's model, the best checkpoint of its newest run: {checkpoint.path}")
        accuracy = metrics.get("eval_accuracy", float("nan"))
        print(f"  reported at step {metrics.get('step')}, validation accuracy {accuracy:.3f} (the highest it kept)")
        return checkpoint
    where = f"{storage or storage_path()}/{FINE_TUNED_RUN}-*"
    if sources.kind != "standin":
        raise FileNotFoundError(
            f"Notebook 03's fine-tuned model is missing: no run at {where}. Run {FINE_TUNED_NOTEBOOK} first "
            "(it fine-tunes the model this notebook serves), then this notebook again."
        )
    where_standin = shared_path(STANDIN_FOLDER, storage)  # every replica reads it there
    print(f"Notebook 03's fine-tuned model is missing (no run at {where}): run {FINE_TUNED_NOTEBOOK} first")
    if not exists(f"{where_standin}/checkpoint/config.json"):
        with tempfile.TemporaryDirectory() as folder:
            seconds = build_standin_model(sources, dogs, Path(folder) / "checkpoint")
            publish_folder(Path(folder), where_standin)
        print(f"Until then this notebook serves a stand-in, fine-tuned here in {seconds:.0f} s: {where_standin}")
    else:
        print(f"Until then this notebook serves the stand-in fine-tuned by an earlier run: {where_standin}")
    return Checkpoint(where_standin)


def build_standin_model(sources: Sources, dogs: DogsBudget, folder: Path) -> float:
    """Fine-tune the pretrained model (``sources.model``) on dogs and fish, in this process, as notebook 03 does
    (``dogs``: its budget section's steps, batch size and learning rate); save it in ``folder``."""
    import torch

    from course.build import pretrain
    from helpers.features import pixel_values
    from helpers.models import load_classifier, load_processor

    start = time.perf_counter()
    class_names = sorted(set(IMAGENETTE_SYNSETS.values()))
    train = labelled_images(sources, "train")
    processor = load_processor(sources.model)
    pixels = pixel_values(processor, [Image.open(io.BytesIO(body)) for body in train["body"]])
    label_ids = torch.tensor([class_names.index(label) for label in train["label"]])
    model = load_classifier(sources.model, class_names)
    epochs = math.ceil(dogs.train_steps * dogs.batch_size / len(label_ids))  # notebook 03's steps, in whole epochs
    pretrain(model, pixels, label_ids, epochs=epochs, batch_size=dogs.batch_size, lr=dogs.learning_rate, progress=False)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return time.perf_counter() - start


def answer(probabilities: np.ndarray, class_names: Sequence[str], **more: object) -> dict:
    """A service's answer for one image: its most probable class and that class's probability (and ``more``)."""
    best = int(np.argmax(probabilities))
    return {"label": class_names[best], "probability": round(float(probabilities[best]), 4), **more}


# --- the images to send --------------------------------------------------------------------------------------


def labelled_images(sources: Sources, split: str = "val") -> pd.DataFrame:
    """The dogs-vs-fish images of ``split`` as files are sent: ``file_name``, ``label`` and the file's ``body``."""
    table = check_label_table(pd.read_csv(ensure_labels(sources), dtype=str))
    label_of = dict(zip(table["file_name"], table["label"], strict=True))
    rows = []
    for folder in class_folders(sources.imagenette, split):
        fs, path = filesystem(folder)
        for info in sorted(fs.get_file_info(pafs.FileSelector(path)), key=lambda info: info.path):
            with fs.open_input_stream(info.path) as f:
                rows.append((file_name(info.path), label_of.get(info.base_name, ""), f.read()))
    return pd.DataFrame(rows, columns=["file_name", "label", "body"])


# --- reading a request's image -------------------------------------------------------------------------------


class BadImage(ValueError):
    """A request body that is no image the model can take: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


HOW = "send an image file's bytes as the request body, for example `curl --data-binary @dog.jpg <url>`"


def read_image(body: bytes, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_IMAGE_PIXELS):
    """The RGB image in a request's ``body``; :class:`BadImage` (a 4xx status and what to do) when there is none."""
    if not body:
        raise BadImage(400, f"the request has no body: {HOW}")
    if len(body) > max_bytes:
        raise BadImage(
            413, f"the body is {len(body) / 1e6:.1f} MB, over this service's limit of {max_bytes / 1e6:g} MB: send a "
            "smaller file (the model sees 224 x 224 pixels at most: a few hundred kB is plenty)"
        )  # fmt: skip
    try:
        image = Image.open(io.BytesIO(body))  # reads the header only
    except (UnidentifiedImageError, OSError):
        raise BadImage(415, f"the body is not an image file (JPEG, PNG, ...): {HOW}") from None
    if image.width * image.height > max_pixels:
        raise BadImage(
            413,
            f"the image is {image.width} x {image.height} pixels, over this service's limit of {max_pixels:,} "
            "pixels: resize it first",
        )
    try:
        image.load()  # now the pixels: a file cut short fails here
    except (OSError, SyntaxError, ValueError) as error:
        raise BadImage(400, f"the image file is damaged ({error}): send the whole file") from None
    return to_rgb(image)


def probe_bodies(good: bytes) -> dict[str, bytes]:
    """Request bodies a service must refuse, with a 4xx and a message, and the good one it must then answer."""
    big = Image.new("RGB", (5000, 4000), "white")  # 20 M pixels, compressed to a small file: only its size is wrong
    out = io.BytesIO()
    big.save(out, format="PNG")
    return {
        "text, not an image": b"a dog, I promise",
        "an empty body": b"",
        "an oversized image": out.getvalue(),
        "a file cut short": good[: len(good) // 2],
        "a good image": good,
    }


# --- where Serve listens, what it logs -----------------------------------------------------------------------


def serve_port() -> int:
    """The port Serve's HTTP proxy takes on 127.0.0.1: ``$COURSE_SERVE_PORT`` if set, else a free one."""
    return settings.number(SERVE_PORT_ENV) or free_loopback_port()


# Serve's controller gives a new HTTP proxy 5 s to say it is ready, then replaces it, and `serve.start` fails with
# ActorDiedError. On a busy 2-core laptop a proxy took longer than that to start: give it a minute.
PATIENT_CONTROLLER = {"runtime_env": {"env_vars": {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60"}}}


def serve_logging() -> LoggingConfig:
    """Serve's logging for the course: errors only, no line per request (``COURSE_VERBOSE=1``: all of it).

    Pass it to ``serve.start`` (the controller and the HTTP proxy) and ``serve.run`` (the replicas). This process's
    own Serve messages ("Started Serve", "Application ... is ready") follow the same setting from this call on.
    Left out: a line per request, and warnings about Serve's own internals (on a busy 2-core laptop, every few
    requests: a replica took more than 0.1 s to say how many requests it holds).
    """
    if verbose():
        return LoggingConfig()
    logging.getLogger("ray.serve").setLevel(logging.ERROR)
    return LoggingConfig(log_level="ERROR", enable_access_log=False)


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts connections at ``host:port``."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def stops_listening(port: int, within_s: float = 10.0, host: str = "127.0.0.1") -> bool:
    """True once nothing accepts connections at ``host:port``, looking for up to ``within_s`` seconds.

    ``serve.shutdown()`` returns when Serve's controller has stopped; the proxy it killed on the way out may hold its
    port a moment longer (seen on 2 cores: still answering right after the call)."""
    deadline = time.monotonic() + within_s
    while is_listening(port, host):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# --- a bounded load test -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadTest:
    """What one load test measured: every request's latency (s) and answer, and the wall time of all of them."""

    latencies: np.ndarray
    answers: list
    seconds: float
    concurrency: int

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds  # requests per second

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) * 1000  # milliseconds

    def summary(self) -> dict[str, float]:
        return {
            "requests": len(self.latencies),
            "in flight": self.concurrency,
            "throughput (req/s)": round(self.throughput, 1),
            "p50 latency (ms)": round(self.percentile(50), 1),
            "p95 latency (ms)": round(self.percentile(95), 1),
        }


def load_test(send: Callable[[bytes], object], bodies: Sequence[bytes], concurrency: int) -> LoadTest:
    """Send every body once, ``concurrency`` requests in flight at a time; stops when the last one has answered.

    ``send(body)`` makes one request and returns its answer (it should have a timeout of its own: a request that
    never answers would hold the test). Each request's latency is timed from its send to its answer.
    """

    def timed(body: bytes) -> tuple[float, object]:
        start = time.perf_counter()
        answer = send(body)
        return time.perf_counter() - start, answer

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        done = list(pool.map(timed, bodies))
    seconds = time.perf_counter() - start
    return LoadTest(np.array([d[0] for d in done]), [d[1] for d in done], seconds, concurrency)


def watch_replicas(
    replicas: Callable[[], dict[str, int]],
    until: Callable[[dict[str, int]], bool],
    limit_s: float,
    send: Callable[[bytes], object] | None = None,
    bodies: Sequence[bytes] = (),
    concurrency: int = 0,
) -> pd.DataFrame:
    """Look at ``replicas()`` (replicas by state) every second until ``until`` says so or ``limit_s`` has passed;
    meanwhile, with ``send``, keep ``concurrency`` requests in flight (the bodies, round and round). One row per change.

    The table's ``attrs`` say how the watch ended: ``reached`` (whether ``until`` held), ``seconds`` (when it did, or
    when the watch gave up) and ``states`` (the replicas by state last seen).
    """
    stop, answered = threading.Event(), [0]

    def client(offset: int) -> None:
        i = offset
        while not stop.is_set():
            send(bodies[i % len(bodies)])
            answered[0] += 1
            i += concurrency

    start, rows = time.perf_counter(), []
    with ThreadPoolExecutor(max_workers=max(concurrency, 1)) as pool:
        clients = [pool.submit(client, i) for i in range(concurrency)] if send else []
        try:
            while True:
                states = dict(replicas())
                seconds = time.perf_counter() - start
                seen = ", ".join(f"{n} {state.lower()}" for state, n in sorted(states.items()) if n) or "none"
                if not rows or rows[-1][1] != seen:
                    rows.append((round(seconds), seen, answered[0]))
                reached = bool(until(states))
                if reached or seconds > limit_s:
                    break
                time.sleep(1)
        finally:
            stop.set()
        for finished in clients:
            finished.result()  # a client's error shows here
    table = pd.DataFrame(rows, columns=["second", "replicas", "requests answered"]).set_index("second")
    table.attrs.update(reached=reached, seconds=seconds, states=states)
    return table


_local = threading.local()


def post(url: str, body: bytes, timeout: float = 30) -> dict:
    """POST ``body`` to ``url`` (a connection kept per thread, as a client would); the JSON answer and its status."""
    import requests

    session = getattr(_local, "session", None) or requests.Session()
    _local.session = session
    response = session.post(url, data=body, timeout=timeout)
    return {"status": response.status_code, **response.json()}


# --- the page people use -------------------------------------------------------------------------------------

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dog or fish?</title>
<style>body{font-family:sans-serif;max-width:32em;margin:3em auto}img{max-width:12em;display:block;margin:1em 0}
#answer{font-size:1.5em}.error{color:#b00}</style></head>
<body><h1>Dog or fish?</h1>
<p>Pick an image: the fine-tuned ViT, served by Ray Serve, says what it sees.</p>
<input type="file" id="file" accept="image/*">
<img id="preview" alt="">
<p id="answer" role="status"></p>
<script>
const answer = document.getElementById("answer");
document.getElementById("file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  document.getElementById("preview").src = URL.createObjectURL(file);
  answer.className = ""; answer.textContent = "asking the model…";
  const response = await fetch("predict", {method: "POST", body: file});
  const result = await response.json();
  if (response.ok) {
    answer.textContent = `${result.label} (probability ${(100 * result.probability).toFixed(1)}%)`;
  } else {
    answer.className = "error"; answer.textContent = `${response.status}: ${result.error}`;
  }
});
</script></body></html>
"""
