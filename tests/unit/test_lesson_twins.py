"""Where a lesson writes code in its cells that ``helpers`` also holds for the lessons after it, the two agree. Each
such helper says which cell it copies ("A copy of the ``name`` that notebook NN writes ..."), and has a test here."""

import ast
import re
from pathlib import Path

import numpy as np
import torch
from lesson_code import from_notebook
from PIL import Image
from python_source import parse
from ray.train import FailureConfig

from course import config
from course.build import standin_processor
from course.sources import STANDIN_CIFAR10
from course.storage import CHECKPOINTS_KEPT
from helpers import cifar, features, ingest, loops, metrics, train


def test_notebook_01s_transform_and_collator_are_those_the_later_lessons_import():
    transform, collate = from_notebook("01_local_finetune", "transform", "collate")
    processor = standin_processor()
    transform.__globals__["processor"] = processor  # the notebook's own, made in an earlier cell
    batch = {"image": [Image.new("RGB", (80, 60), (200, 10, 10)), Image.new("L", (40, 90), 128)], "labels": [2, 0]}
    lesson, helper = transform(batch), features.make_transform(processor)(batch)
    assert torch.equal(lesson["pixel_values"], helper["pixel_values"])
    assert list(lesson["labels"]) == list(helper["labels"])
    examples = [{"pixel_values": lesson["pixel_values"][i], "labels": lesson["labels"][i]} for i in range(2)]
    for column, stacked in collate(examples).items():
        assert torch.equal(stacked, features.collate(examples)[column]), column


def test_notebook_02s_run_config_is_the_one_the_later_lessons_import(monkeypatch):
    """02b to 05 build their RunConfig with helpers.train.run_config: the function notebook 02 writes."""
    lesson = from_notebook("02_ray_train_finetune", "run_config")
    monkeypatch.setitem(lesson.__globals__, "run_name", lambda name: f"{name}-at-one-time")  # the notebook's import
    monkeypatch.setattr(train, "run_name", lambda name: f"{name}-at-one-time")
    for verbose in ("0", "1"):
        monkeypatch.setenv("COURSE_VERBOSE", verbose)
        for options in ({}, {"failure_config": FailureConfig(max_failures=1)}):
            ours, theirs = lesson("02-x", **options), train.run_config("02-x", **options)
            assert ours.name == theirs.name == "02-x-at-one-time"
            assert ours.storage_path == theirs.storage_path
            assert ours.checkpoint_config == theirs.checkpoint_config
            assert ours.logging_config == theirs.logging_config
            assert ours.failure_config == theirs.failure_config
    assert lesson("02-x").checkpoint_config.num_to_keep == CHECKPOINTS_KEPT


def test_notebook_04s_loaders_and_train_epoch_are_those_the_later_lessons_import():
    """Notebook 04 writes its DataLoaders and its training loop in step 1; `make bench` and notebook 07 import the
    helpers' copies. Same data, same batches in the same order; same model, same losses and weights."""
    lesson_loaders, lesson_epoch = from_notebook("04_cifar10_pytorch_to_ray", "loaders", "train_epoch")
    uri = str(config.DATA_DIR / STANDIN_CIFAR10)
    for ours, theirs in zip(lesson_loaders(uri, 16, 64, 32), cifar.loaders(uri, 16, 64, 32), strict=True):
        for _ in range(2):  # two epochs: the training loader's second shuffle too
            for (a, b), (c, d) in zip(ours, theirs, strict=True):
                assert torch.equal(a, c) and torch.equal(b, d)
    models = []
    for epoch in (lesson_epoch, loops.train_epoch):  # called as the lesson calls its own (solutions/04 too)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train_loader, _ = lesson_loaders(uri, 16, 64, 32)
        losses = [epoch(model, train_loader, optimizer, torch.device("cpu")) for _ in range(2)]
        models.append((losses, model.state_dict()))
    (ours, our_weights), (theirs, their_weights) = models
    assert ours == theirs
    for name, weights in our_weights.items():
        assert torch.equal(weights, their_weights[name]), name


def test_notebook_01s_compute_metrics_is_the_one_the_ray_train_lessons_import():
    compute_metrics = from_notebook("01_local_finetune", "compute_metrics")
    compute_metrics.__globals__["metric"] = metrics.load_accuracy()  # the notebook's own, made in the same cell
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    ours, theirs = (
        compute_metrics((logits, labels)),
        metrics.accuracy_for_trainer(metrics.load_accuracy())((logits, labels)),
    )
    assert ours == theirs and 0 < ours["accuracy"] < 1


def test_notebook_02s_training_arguments_are_those_02b_and_03_import(tmp_path):
    """The save and evaluation settings decide when RayTrainReportCallback reports: the lesson shows them."""
    lesson = from_notebook("02_ray_train_finetune", "worker_training_args")
    arguments = (str(tmp_path), 8, 40, 10, 16, 3e-4)
    ours, theirs = lesson(*arguments).to_dict(), train.worker_training_args(*arguments).to_dict()
    assert ours == theirs
    assert ours["save_strategy"] == "steps" and ours["save_steps"] == ours["eval_steps"] == 10


def test_notebook_03s_channel_counting_is_the_helpers():
    """A mixed block: RGB (H, W, 3), grayscale as (H, W) and as Ray Data's (1, H, W), RGBA (H, W, 4)."""
    add_shapes = from_notebook("03_ray_data", "channels", "add_shapes")[1]
    images = np.empty(4, dtype=object)
    images[:] = [np.zeros((5, 6, 3), np.uint8), np.zeros((5, 6), np.uint8), np.zeros((1, 5, 6), np.uint8)] + [
        np.zeros((5, 6, 4), np.uint8)
    ]
    ours, theirs = add_shapes({"image": images.copy()}), ingest.add_shapes({"image": images.copy()})
    assert ours["channels"].tolist() == theirs["channels"].tolist() == [3, 1, 1, 4]
    for column in ("shape", "ndim"):
        assert ours[column].tolist() == theirs[column].tolist()


COPY = re.compile(r"A copy of the ``(\w+)``(?: \(and ``(\w+)``\))? that notebook (\w+) writes")


def test_every_helper_that_copies_a_lesson_cell_has_its_twin_test_here():
    """Every docstring that says it copies a lesson's cell is named by a ``from_notebook`` call of this file."""
    helpers_folder = Path(__file__).resolve().parents[2] / "helpers"
    copies = set()
    for path in helpers_folder.rglob("*.py"):
        for found in COPY.finditer(path.read_text().replace("\n    ", " ")):
            copies.add((found[3], found[1]))
    tested = set()
    for node in ast.walk(parse(Path(__file__).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "from_notebook":
            notebook, *names = (ast.literal_eval(argument) for argument in node.args)
            tested |= {(notebook.split("_")[0], name) for name in names}
    assert copies, "no helper says it copies a lesson's cell: the pattern above no longer matches their docstrings"
    untested = sorted(copies - tested)
    assert not untested, f"helpers copy these lesson cells without a twin test here: {untested}"
