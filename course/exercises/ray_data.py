"""The "Your turn" checks of notebook 03 (Ray Data) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from course.exercises.checking import NotDone, Raised, Verdict, attach_ray, attempt, check, learner_error, untouched
from course.exercises.classifier_judge import (
    BATCH_SIZE,
    confident_checkpoint,
    error_hint,
    expected_confidence,
    judge,
    run_here,
    unseen_images,
    watched_class,
)
from course.storage import publish_folder, remove, shared_path


@contextlib.contextmanager
def _removed_afterwards(uri: str):
    """Delete the folder at ``uri`` when the block ends."""
    try:
        yield uri
    finally:
        remove(uri)


@contextlib.contextmanager
def _ray_data_errors_unlogged():
    """In the block, Ray Data does not log a failed task's tracebacks (two, 60 lines on stderr) before it raises: the
    check names the learner's error itself, in one line."""
    logger = logging.getLogger("ray.data")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_confident_classifier(classifier_class: type) -> Verdict:
    """03.1: an actor class for ``map_batches`` that adds ``predicted`` and ``confidence`` to every row. Judged first
    in this process, on batches as an actor gets them (a wrong answer's verdict in seconds); a class passed there runs
    on an actor pool in Ray Data, as the lesson's does, and is judged again on what comes out."""
    import tempfile

    import ray.data
    from ray.train import Checkpoint

    images = unseen_images()
    rows = [{"id": i, "image": image} for i, image in enumerate(images)]
    judged: dict[str, Any] = {}  # what the local stage leaves for the run on Ray: the folder, the expected answers

    def locally() -> None:
        if not isinstance(classifier_class, type):
            raise AssertionError(
                f"`{getattr(classifier_class, '__name__', classifier_class)}` is not a class: write a class whose "
                "`__init__` loads the model once and whose `__call__` takes a batch, as `ImageClassifier` does"
            )
        if untouched(classifier_class.__init__) or untouched(classifier_class.__call__):
            raise NotDone
        judged["folder"] = tempfile.mkdtemp(prefix="exercise-03.1-")
        checkpoint = confident_checkpoint(Path(judged["folder"]))
        judged["names"], judged["confidence"] = expected_confidence(checkpoint, images)
        judge(run_here(classifier_class, checkpoint, rows), judged["names"], judged["confidence"])
        judged["passed"] = True

    def run() -> str:
        attach_ray()
        published = shared_path(f"exercise-03.1-{uuid.uuid4().hex[:8]}")  # every actor reads it there, on any node
        with _removed_afterwards(published), _ray_data_errors_unlogged():
            checkpoint = Checkpoint(publish_folder(Path(judged["folder"]), published))
            try:
                out = (
                    ray.data.from_items(rows)
                    .map_batches(
                        watched_class(classifier_class),
                        fn_constructor_kwargs={"checkpoint": checkpoint},
                        compute=ray.data.ActorPoolStrategy(size=1),
                        batch_size=BATCH_SIZE,
                    )
                    .to_pandas()
                )
            except Exception as error:  # the learner's error, wrapped by Ray Data
                failure = learner_error(error)
                raise AssertionError(f"running it on an actor pool raised {failure}{error_hint(failure)}") from None
        judge(out, judged["names"], judged["confidence"])
        return (
            f"{len(images)} images it had never seen, of several sizes and modes: every predicted class and its "
            "probability right, on an actor pool as in the lesson; the model loaded once per actor, one forward pass "
            "per batch"
        )

    try:
        return check(
            "03.1",
            run,
            limit_s=300,
            late="Does `__call__` return for every batch?",
            ray_first=lambda: bool(judged.get("passed")),  # Ray only for a class this process found right
            locally=locally,
        )
    finally:
        if "folder" in judged:
            shutil.rmtree(judged["folder"], ignore_errors=True)


READ_ONLY = (
    "it wrote into the batch's image array, which Ray Data gives read-only: `map_batches` hands the function views "
    "of its blocks without a copy (`zero_copy_batch=True`, the default), and such a write raises `ValueError: "
    "assignment destination is read-only`. Build the mirrored images anew (a list, `np.where`, or `images.copy()` "
    "first) and put them in the batch: `batch['image'] = ...`"
)


def called_as_map_batches(mirror_half: Callable[[dict], dict], batch: dict[str, np.ndarray]) -> Any:
    """``mirror_half`` called on ``batch`` as ``map_batches`` hands it over (:func:`as_map_batches_gives`); a write
    into its read-only columns is the finding :data:`READ_ONLY`, any other error :class:`Raised`."""
    try:
        return attempt(mirror_half, as_map_batches_gives(batch))
    except Raised as error:
        if "read-only" in str(error):
            raise AssertionError(READ_ONLY) from None
        raise


def as_map_batches_gives(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A copy of ``batch`` as ``map_batches`` hands it to a function by default: each column read-only."""
    given = {}
    for name, column in batch.items():
        given[name] = column.copy()
        given[name].setflags(write=False)
    return given


MIRROR_BATCH = 100  # 03.2's first batch: not a batch size the lesson uses, so a length written in shows
LARGE_BATCH = 5000  # 03.2's large batch: Ray Data gives batches of any size `map_batches(batch_size=...)` asks for
ANY_BATCH_SIZE = "draw one choice for each image of the batch you are given (`len(batch['image'])`)"


def check_mirror_half(mirror_half: Callable[[dict], dict]) -> Verdict:
    """03.2: ``mirror_half(batch)`` mirrors about half of a batch's (H, W, C) images left to right, nothing else."""

    def run() -> str:
        rng = np.random.default_rng(0)
        size = MIRROR_BATCH
        images = rng.integers(0, 256, (size, 8, 10, 3), dtype=np.uint8)
        paths = np.array([f"photo_{number:03d}.jpg" for number in range(size)])  # a column the lesson's batches lack
        batch = {"image": images, "label": np.arange(size), "path": paths}
        columns = list(batch)  # before the learner's function may change the batch
        try:
            out = called_as_map_batches(mirror_half, batch)
        except Raised as error:
            about_lengths = any(word in str(error) for word in ("zip()", "shape", "broadcast", "index"))
            raise AssertionError(
                f"on a batch of {size} images {error}" + (f": {ANY_BATCH_SIZE}" if about_lengths else "")
            ) from None
        assert isinstance(out, dict) and {"image", "label"} <= set(out), "return the batch: a dict with its columns" + (
            "" if isinstance(out, dict) else f" (it returned {type(out).__name__ if out is not None else 'None'})"
        )
        result = np.asarray(out["image"])
        assert len(result) != len(columns), (
            f"{len(result)} images came back of {len(images)}: `len(batch)` counts the batch's columns "
            f"({', '.join(columns)}), not its images. A batch is a dict of columns: {ANY_BATCH_SIZE}"
        )
        assert len(result) == len(images), (
            f"{len(result)} images came back of {len(images)}: return every image, the chosen ones mirrored and the "
            "others as they were (a filter such as `images[chosen]` drops the rest; a choice drawn for a fixed "
            f"number of images, zipped with the batch, stops at that number: {ANY_BATCH_SIZE})"
        )
        assert result.shape == images.shape and result.dtype == images.dtype, (
            f"images came back {result.shape} {result.dtype}, went in {images.shape} {images.dtype}: mirroring "
            "changes neither the size nor the pixel type"
        )
        assert np.array_equal(out["label"], np.arange(size)), "the labels changed: mirror the images only"
        dropped = [column for column in columns if column not in out]
        assert not dropped, (
            f"the batch's other column(s) {dropped} did not come back: a batch may hold more than `image` and "
            "`label` (a file's path, its size), and `map_batches` keeps only what the function returns. Put the "
            "mirrored images in the batch you were given and return it whole"
        )
        assert np.array_equal(out["path"], paths), "the `path` column changed: mirror the images only"
        same = [np.array_equal(a, b) for a, b in zip(result, images, strict=True)]
        mirrored = [np.array_equal(a, b[:, ::-1]) for a, b in zip(result, images, strict=True)]
        upside_down = [np.array_equal(a, b[::-1]) for a, b in zip(result, images, strict=True)]
        assert not any(u and not s for u, s in zip(upside_down, same, strict=True)), (
            "some images are upside down: images are (height, width, channels), mirror along the width axis. On the "
            "whole batch, an (N, H, W, C) array, `[:, ::-1]` flips axis 1, the height: mirror each image, "
            "`image[:, ::-1]`, or the batch along axis 2, `images[:, :, ::-1]`"
        )
        colours = [np.array_equal(a, b[..., ::-1]) for a, b in zip(result, images, strict=True)]
        assert not any(c and not s for c, s in zip(colours, same, strict=True)), (
            "some images have their colour channels reversed (RGB became BGR): `image[..., ::-1]` flips the last "
            "axis, the channels. Mirror along the width, axis 1 of an (H, W, C) image: `image[:, ::-1]`"
        )
        assert all(s or m for s, m in zip(same, mirrored, strict=True)), (
            "some images are neither unchanged nor mirrored left to right: mirror an image whole, `image[:, ::-1]`"
        )
        share = sum(m and not s for m, s in zip(mirrored, same, strict=True)) / size
        assert share not in (0, 1), (
            f"{share:.0%} of the images were mirrored: every image of the batch got the same choice, as if one draw "
            f"decided for the whole batch. Pick about half, at random: {ANY_BATCH_SIZE}"
        )
        assert 0.2 < share < 0.8, f"{share:.0%} of the images were mirrored: pick about half, at random"
        large = LARGE_BATCH  # more images than a length written in "for any batch" (1000, 1024) draws for
        tiny = rng.integers(0, 256, (large, 2, 3, 3), dtype=np.uint8)
        try:
            out = called_as_map_batches(mirror_half, {"image": tiny, "label": np.arange(large)})
        except Raised as error:
            raise AssertionError(f"on a batch of {large} images {error}: {ANY_BATCH_SIZE}") from None
        returned = len(out["image"]) if isinstance(out, dict) and "image" in out else None
        assert returned == large, (
            f"on a batch of {large} images, {returned} came back: a choice drawn for a fixed number of images, "
            f"zipped with the batch, stops at that number, and Ray Data's batches can be larger: {ANY_BATCH_SIZE}"
        )
        ragged = np.empty(4, dtype=object)  # real photos: a batch of images of different sizes
        ragged[:] = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(5, 7), (9, 4), (6, 6), (3, 8)]]
        try:
            out = called_as_map_batches(mirror_half, {"image": ragged, "label": np.arange(4)})
        except Raised as error:
            raise AssertionError(
                f"on a batch of 4 images of different sizes (real photos are) {error}: mirror each image by itself "
                f"(such a batch is an array of separate images, not one 4-D array), and {ANY_BATCH_SIZE}"
            ) from None
        assert isinstance(out, dict) and len(out.get("image", [])) == 4, (
            "on a batch of 4 images of different sizes (real photos are) it did not return the 4 images: mirror "
            "each image by itself, and return the batch"
        )
        kept = [
            np.array_equal(a, b) or np.array_equal(a, b[:, ::-1]) for a, b in zip(out["image"], ragged, strict=True)
        ]
        assert all(kept), (
            "on a batch of images of different sizes (real photos are) some images came back changed: mirror each "
            "image by itself"
        )
        again = called_as_map_batches(mirror_half, {"image": images, "label": np.arange(size), "path": paths})
        chosen_again = [np.array_equal(a, b[:, ::-1]) for a, b in zip(np.asarray(again["image"]), images, strict=True)]
        assert chosen_again != [m and not s for m, s in zip(mirrored, same, strict=True)], (
            "called twice on the same batch, it mirrored the same images both times: the choice is not random (a "
            "fixed pattern, or a generator seeded with the same number at every call), so epoch after epoch the "
            "same images of a batch are mirrored. Draw anew at each call: `np.random.default_rng()` without a seed"
        )
        through = through_ray_data(mirror_half, images, paths)
        return (
            f"{share:.0%} of {size} images mirrored left to right, the rest untouched, labels kept; in Ray Data's "
            f"map_batches too, as the lesson runs it ({through} rows, every column kept)"
        )

    # no ray_first: most wrong answers are refused on the check's own batches, without Ray; the lesson's kernel has
    # Ray attached long before (its section 1), so through_ray_data attaches nothing new there
    return check("03.2", run, late="Does your function return for every batch?")


def through_ray_data(mirror_half: Callable[[dict], dict], images: np.ndarray, paths: np.ndarray) -> int:
    """``mirror_half`` run by Ray Data, as the lesson runs it (``map_batches`` on a dataset of the images, their
    labels and paths): the rows that came out, all of them with every column, or the finding."""
    import ray.data

    attach_ray()
    pairs = enumerate(zip(images, paths, strict=True))
    rows = [{"image": image, "label": label, "path": path} for label, (image, path) in pairs]
    with _ray_data_errors_unlogged():
        try:
            out = ray.data.from_items(rows).map_batches(mirror_half, batch_size=len(rows) // 4).take_all()
        except Exception as error:  # the learner's error, wrapped by Ray Data
            failure = learner_error(error)
            raise AssertionError(
                READ_ONLY if "read-only" in failure else f"run by Ray Data's map_batches, it raised {failure}"
            ) from None
    assert len(out) == len(rows), f"run by Ray Data's map_batches, {len(out)} rows came out of {len(rows)}"
    assert all({"image", "label", "path"} <= set(row) for row in out), (
        "run by Ray Data's map_batches, some rows lost a column: return the batch you were given, whole"
    )
    return len(out)
