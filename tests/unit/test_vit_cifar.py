"""The plain-PyTorch ViT and the CIFAR-10 loading of notebook 04."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from python_source import parse

from course import config
from course.sources import STANDIN_CIFAR10
from helpers.cifar import load_split, normalize
from helpers.loops import pairs, train_epoch, validate
from helpers.vit import FULL, SMALL, Architecture, VisionTransformer, architecture_named, count_parameters

CIFAR = str(config.DATA_DIR / STANDIN_CIFAR10)


def test_vit_gives_one_logit_per_class():
    model = VisionTransformer(SMALL)
    assert model(torch.zeros(5, 3, 32, 32)).shape == (5, 10)


def test_full_size_is_the_tutorials_14_3_million_parameters():
    assert count_parameters(VisionTransformer(FULL)) == pytest.approx(14.3e6, rel=0.01)
    assert count_parameters(VisionTransformer(SMALL)) < 1e6
    assert architecture_named("full") == FULL and architecture_named("small") == SMALL


def test_unknown_sizes_and_patches_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match="small"):
        architecture_named("huge")
    with pytest.raises(ValueError, match="multiple"):
        VisionTransformer(Architecture(patch_size=5))


def test_a_training_step_lowers_the_loss_on_a_fixed_batch():
    torch.manual_seed(0)
    model = VisionTransformer(SMALL)
    images, labels = torch.randn(16, 3, 32, 32), torch.arange(16) % 10
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = torch.nn.functional.cross_entropy(model(images), labels).item()
    for _ in range(5):
        train_epoch(model, [(images, labels)], optimizer, torch.device("cpu"), progress=False)
    assert validate(model, [(images, labels)], torch.device("cpu"))["val_loss"] < before


def test_normalize_maps_pixels_to_minus_one_to_one_channels_first():
    images = np.array([[[[0, 255, 128]]]], dtype=np.uint8)  # one 1x1 image
    out = normalize(images)
    assert out.shape == (1, 3, 1, 1) and out.dtype == np.float32
    assert out[0, :, 0, 0] == pytest.approx([-1.0, 1.0, 0.0039], abs=1e-3)


def test_load_split_reads_the_parquet_tensor_column_and_respects_the_limit():
    images, labels = load_split(CIFAR, "test", limit=50)
    assert images.shape == (50, 32, 32, 3) and images.dtype == np.uint8
    assert labels.shape == (50,) and set(labels) <= set(range(10))


def test_pairs_turns_ray_batches_into_tuples():
    batches = [{"image": torch.zeros(2, 3), "label": torch.tensor([1, 2])}]
    (images, labels), *rest = list(pairs(batches))
    assert images.shape == (2, 3) and labels.tolist() == [1, 2] and not rest


def test_load_split_gives_the_same_pixels_with_and_without_rays_tensor_type():
    """Importing ray.data registers Ray's tensor column type, which changes what pyarrow returns."""
    script = f"from helpers.cifar import load_split; print(int(load_split({CIFAR!r}, 'test', 20)[0].sum()))"
    without_ray = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    import ray.data  # noqa: F401

    assert int(without_ray.stdout) == int(load_split(CIFAR, "test", 20)[0].sum())


def test_ray_data_workers_can_normalize_without_importing_torch():
    """Notebook 04's ``map_batches`` makes every Ray Data worker import pipeline.cifar: torch cost 2-10 s each."""
    script = "import sys, helpers.cifar; print(sorted(m for m in ('torch', 'ray.train') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def notebook_function(notebook: str, name: str, namespace: dict):
    """The function ``name`` as a notebook's cell defines it, run in ``namespace`` (the names the notebook imports)."""
    import ast
    import json

    path = config.REPO_ROOT / "notebooks" / notebook
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = parse("".join(cell["source"]))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                exec(compile(ast.Module([node], []), path.name, "exec"), namespace)
                return namespace[name]
    raise AssertionError(f"{notebook} defines no function `{name}`")


def test_notebook_04s_normalize_batch_and_its_helper_twin_agree():
    """`make bench` maps helpers.cifar.normalize_batch over the images that notebook 04 maps its own over."""
    from helpers.cifar import normalize_batch

    written = notebook_function("04_cifar10_pytorch_to_ray.ipynb", "normalize_batch", {"normalize": normalize})
    batch = {"image": np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8), "label": np.arange(4)}
    ours, theirs = written(dict(batch)), normalize_batch(dict(batch))
    assert ours.keys() == theirs.keys()
    for column in ours:
        np.testing.assert_array_equal(ours[column], theirs[column])
