"""The parts of the real-sources rehearsal, and each breakage it found, tested on their own (no Ray, seconds each).

The rehearsal itself (every notebook on the stand-ins of the Hub and S3) is tests/support/real_sources_rehearsal.py.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from real_sources import BEANS_ID, BEANS_OLD_ID, build_beans, build_model
from standin_hub import standin_hub

from course.cluster import PASSED_TO_WORKERS, job_env_vars
from course.sources import REAL_MODELS, Sources, get_sources
from helpers.cifar import load_split

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from doctor_checks.hub import check_hub  # noqa: E402

MINI_BEANS = {"train": 6, "validation": 3, "test": 3}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A Hub with a small beans and both budgets' models (their real configs; random weights for the cpu one)."""
    from real_sources import MODELS

    root = tmp_path_factory.mktemp("hub")
    build_beans(root / "datasets" / BEANS_ID, MINI_BEANS)
    for model, spec in MODELS.items():
        build_model(root / "models" / model, *spec)
    with standin_hub(root, {BEANS_OLD_ID: BEANS_ID}) as server:
        yield server


@pytest.fixture
def online(monkeypatch, tmp_path, hub):
    """This process reads from the Hub stand-in, with an empty cache (huggingface_hub reads its settings at import:
    they are set in its constants too)."""
    import huggingface_hub.constants as hub_constants
    from datasets import config as datasets_config

    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(
        hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets_config, "HF_ENDPOINT", hub.endpoint)
    monkeypatch.setattr(datasets_config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets_config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(datasets_config, "HF_DATASETS_OFFLINE", False)
    return hub


def test_the_hub_answers_a_renamed_id_with_a_redirect_as_the_hub_does(hub):
    request = urllib.request.Request(f"{hub.endpoint}/api/datasets/{BEANS_OLD_ID}/revision/main", method="GET")
    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as answer:
        opener.open(request, timeout=5)
    assert answer.value.code == 307 and answer.value.headers["Location"].startswith(f"/api/datasets/{BEANS_ID}/")
    with urllib.request.urlopen(f"{hub.endpoint}/api/datasets/{BEANS_ID}/revision/main", timeout=5) as info:
        assert json.load(info)["id"] == BEANS_ID


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_todays_client_refuses_the_old_beans_id_before_any_request(online):
    """What broke `COURSE_SOURCES=real`: the course named beans `beans` (a redirect on the Hub cannot help)."""
    from datasets import load_dataset
    from huggingface_hub.errors import HfUriError

    with pytest.raises(HfUriError, match="namespace/name"):
        load_dataset(BEANS_OLD_ID)


def test_beans_loads_by_its_id_with_the_real_columns_and_class_names(online):
    from helpers.beans import class_names_of, load_beans

    ds = load_beans(get_sources("real"))
    assert {split: len(ds[split]) for split in ds} == MINI_BEANS
    assert ds["train"].column_names == ["image_file_path", "image", "labels"]
    assert class_names_of(ds) == ["angular_leaf_spot", "bean_rust", "healthy"]
    assert ds["train"][0]["image"].size == (500, 500)


def test_the_cpu_models_processor_and_new_head_load_through_the_auto_classes(online):
    from helpers.models import load_classifier, load_processor

    model_id = REAL_MODELS["cpu"]
    processor = load_processor(model_id)
    model = load_classifier(model_id, ["a", "b", "c"])
    assert model.config.num_labels == 3 and model.config.image_size == 224
    from PIL import Image

    pixels = processor([Image.new("RGB", (500, 375))], return_tensors="pt")["pixel_values"]
    assert tuple(pixels.shape) == (1, 3, 224, 224)  # resized to 256, then cropped to what the model takes


def test_the_gpu_models_config_and_processor_load_through_the_auto_classes(online):
    """The gpu budget's ViT-B/16: its published config and processor, as the Hub serves them (weights left out)."""
    from transformers import AutoConfig

    from helpers.models import load_processor

    model_id = REAL_MODELS["gpu"]
    model_config = AutoConfig.from_pretrained(model_id)
    assert (model_config.image_size, model_config.patch_size, model_config.hidden_size) == (224, 16, 768)
    pixels = load_processor(model_id)([Image.new("RGB", (500, 375))], return_tensors="pt")["pixel_values"]
    assert tuple(pixels.shape) == (1, 3, 224, 224)


def test_the_doctor_checks_the_hubs_data_set_and_model(online, monkeypatch):
    sources = get_sources("real")
    row = check_hub(sources)
    assert row.ok and BEANS_ID in row.found and REAL_MODELS["cpu"] in row.found, row
    moved = check_hub(Sources(**{**vars(sources), "beans": "nobody/beans"}))
    assert not moved.ok and "nobody/beans" in moved.found and "moved" in moved.fix


def test_offline_the_doctor_passes_a_filled_cache_and_names_what_an_empty_one_lacks(online, monkeypatch):
    from datasets import load_dataset
    from huggingface_hub import hf_hub_download

    sources = get_sources("real")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    empty = check_hub(sources)
    assert not empty.ok and BEANS_ID in empty.found and "run the notebooks once online" in empty.fix
    load_dataset(BEANS_ID)  # what a run online leaves in the caches
    hf_hub_download(sources.model, "config.json")
    filled = check_hub(sources)
    assert filled.ok and "in the caches" in filled.found, filled
    monkeypatch.setenv("HF_HUB_OFFLINE", "True")  # huggingface_hub reads 1, on, yes and true alike
    assert check_hub(sources).ok


def test_a_few_rows_are_read_from_the_first_files_only(tmp_path):
    """`load_split(..., limit)` used to read the whole split first (about 150 MB of CIFAR-10 from S3 per call)."""
    split = tmp_path / "train"
    split.mkdir()
    for part in range(3):
        images = pa.FixedSizeListArray.from_arrays(pa.array([part] * 4 * 3072, pa.uint8()), 3072)
        table = pa.table({"image": images, "label": pa.array([part] * 4, pa.int64())})
        pq.write_table(table, split / f"part-{part:05d}.parquet")
    (split / "part-00003.parquet").write_bytes(b"not parquet: a read of the whole split fails here")
    images, labels = load_split(str(tmp_path), "train", 6)
    assert images.shape == (6, 32, 32, 3) and labels.tolist() == [0, 0, 0, 0, 1, 1]
    with pytest.raises(Exception, match="(?i)parquet"):
        load_split(str(tmp_path), "train")


def test_the_hugging_face_caches_reach_rays_workers(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert {"HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE"} <= set(PASSED_TO_WORKERS)
    assert job_env_vars()["HF_HOME"] == str(tmp_path)


def test_the_413_answer_names_the_real_input_size():
    from course.serving import BadImage, read_image

    with pytest.raises(BadImage) as refused:
        read_image(b"x" * 20, max_bytes=10)
    assert "224 x 224" in str(refused.value.args) and "64 x 64" not in str(refused.value.args)


def test_the_rehearsal_is_a_plugin_around_nbmakes_items_in_its_own_folder(request, tmp_path, monkeypatch):
    """`make test` runs the rehearsal as nbmake's items for copies in results/executed-real/ (the repository's
    conftest.py loads the plugin); a notebook nbmake runs anywhere else is left to nbmake alone."""
    from types import SimpleNamespace

    import real_sources_rehearsal as rehearsal

    assert request.config.pluginmanager.has_plugin("real_sources_rehearsal"), "conftest.py no longer loads it"
    copy = rehearsal.EXECUTED_REAL / "00_ray_core.ipynb"
    assert rehearsal.is_rehearsed(SimpleNamespace(nbmake=True, path=copy))
    assert not rehearsal.is_rehearsed(SimpleNamespace(nbmake=True, path=rehearsal.ROOT / "notebooks" / copy.name))
    assert not rehearsal.is_rehearsed(SimpleNamespace(path=copy))  # a test module's item, not nbmake's

    def session(*args: str, nbmake: bool = True) -> SimpleNamespace:
        return SimpleNamespace(config=SimpleNamespace(getoption=lambda name, default=None: nbmake, args=list(args)))

    folder = tmp_path / "executed-real"
    monkeypatch.setattr(rehearsal, "EXECUTED_REAL", folder)
    builds = []  # the stand-ins' content, started in the background with the copies
    monkeypatch.setattr(rehearsal.REHEARSAL, "build_in_the_background", lambda: builds.append(1))
    rehearsal.pytest_sessionstart(session("tests"))
    rehearsal.pytest_sessionstart(session(str(folder), nbmake=False))
    assert not folder.exists() and not builds, "copies only where make test asks nbmake for them"
    rehearsal.pytest_sessionstart(session("tests", str(folder / "07_ray_tune.ipynb")))
    copies = sorted(p.name for p in folder.iterdir())
    assert copies == sorted(p.name for p in (rehearsal.ROOT / "notebooks").glob("*.ipynb")), copies
    assert builds == [1]
