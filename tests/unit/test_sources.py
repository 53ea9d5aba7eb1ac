"""Where data and the pretrained model come from (course.sources): the stand-ins or the real ones, the model by
budget or by COURSE_MODEL, and what is missing said with its fix."""

import dataclasses
from dataclasses import fields
from pathlib import Path

import pytest

from course import config
from course.budget import get_budget
from course.sources import REAL_MODELS, STANDIN_VIT, Sources, get_sources, is_local, require_data, require_local


def test_standin_is_the_default(monkeypatch):
    monkeypatch.delenv(config.SOURCES_ENV, raising=False)
    assert get_sources().kind == "standin"


def test_env_switches_to_real(monkeypatch):
    monkeypatch.setenv(config.SOURCES_ENV, "real")
    monkeypatch.delenv(config.MODEL_ENV, raising=False)
    monkeypatch.delenv(config.BUDGET_ENV, raising=False)
    sources = get_sources()
    assert sources.kind == "real"
    assert sources.beans == "AI-Lab-Makerere/beans"
    assert sources.model == REAL_MODELS["cpu"]  # no GPUs here: the cpu budget's model
    assert sources.imagenette.startswith("s3://")
    assert sources.cifar10.startswith("s3://")


def test_unknown_setting_names_the_choices(monkeypatch):
    monkeypatch.setenv(config.SOURCES_ENV, "hub")
    with pytest.raises(ValueError, match=r"standin.*COURSE_SOURCES=standin|real"):
        get_sources()


def test_standin_sources_are_local_and_real_ones_remote(tmp_path):
    standin, real = get_sources("standin", tmp_path), get_sources("real", tmp_path)
    for field in fields(Sources):
        if field.name == "kind":
            continue
        assert is_local(getattr(standin, field.name)), field.name
        assert Path(getattr(standin, field.name)).is_relative_to(tmp_path)
    assert not is_local(real.beans) and not is_local(real.model)
    assert not is_local(real.imagenette) and not is_local(real.cifar10)


def test_missing_local_folder_names_the_build_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        require_local(tmp_path / "nope", "beans-like leaf data set")


def test_missing_stand_ins_say_make_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        require_data(get_sources("standin", tmp_path))
    here = dataclasses.replace(get_sources("real", tmp_path), imagenette=str(tmp_path), cifar10=str(tmp_path))
    assert require_data(here) is here  # Hub ids are left to the Hub; folders that exist pass


def test_only_the_sources_a_lesson_names_are_checked(tmp_path):
    missing = get_sources("standin", tmp_path)  # nothing built here
    assert require_data(missing, ()) is missing  # a lesson that reads no data (00) runs without any
    with pytest.raises(FileNotFoundError, match="stand-in `cifar10`.*make data"):
        require_data(missing, ("cifar10",))
    (tmp_path / "cifar10").mkdir()
    built = dataclasses.replace(missing, cifar10=str(tmp_path / "cifar10"))
    assert require_data(built, ("cifar10",)) is built  # the beans and the model are not looked for
    with pytest.raises(ValueError, match="'cifar'.* are not sources"):
        require_data(built, ("cifar",))


def test_a_bucket_for_the_data_folder_is_refused_with_the_alternatives(monkeypatch):
    monkeypatch.setenv(config.DATA_DIR_ENV, "s3://my-bucket/data")
    with pytest.raises(ValueError, match="must be a folder every node mounts") as refused:
        get_sources("standin")
    assert config.STORAGE_ENV in str(refused.value) and "COURSE_SOURCES=real" in str(refused.value)


def test_one_setting_names_the_pretrained_model_for_both_kinds_of_sources(monkeypatch, tmp_path):
    monkeypatch.setenv(config.MODEL_ENV, "google/vit-base-patch16-224")
    assert get_sources("real").model == "google/vit-base-patch16-224"
    assert get_sources("standin").model == "google/vit-base-patch16-224"
    monkeypatch.delenv(config.MODEL_ENV)
    assert get_sources("real").model == REAL_MODELS["cpu"]
    assert get_sources("standin", tmp_path).model == str(tmp_path / STANDIN_VIT)


def test_the_real_model_follows_the_budget_small_on_a_laptop_vit_b16_on_gpus(monkeypatch):
    monkeypatch.delenv(config.MODEL_ENV, raising=False)
    monkeypatch.delenv(config.BUDGET_ENV, raising=False)
    cpu, gpu = get_budget(kind="cpu", sources="real"), get_budget(kind="gpu", sources="real")
    assert get_sources("real", budget=cpu).model == "facebook/deit-tiny-patch16-224"
    assert get_sources("real", budget=gpu).model == "google/vit-base-patch16-224-in21k"
    assert get_sources("real").model == REAL_MODELS["cpu"]  # no budget, no GPUs: the cpu one
    monkeypatch.setenv(config.BUDGET_ENV, "gpu")
    assert get_sources("real").model == REAL_MODELS["gpu"]


def test_beans_is_named_by_its_hub_id_with_the_owner():
    """huggingface_hub 2.4 refuses `load_dataset("beans")` before any request (HfUriError: namespace/name)."""
    assert get_sources("real").beans == "AI-Lab-Makerere/beans"


def test_a_hub_id_is_not_a_local_path_whatever_folders_the_working_directory_holds(monkeypatch, tmp_path):
    (tmp_path / "beans").mkdir()
    (tmp_path / "AI-Lab-Makerere" / "beans").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert not is_local("beans") and not is_local("AI-Lab-Makerere/beans")
    assert is_local("./beans") and is_local(str(tmp_path / "beans")) and is_local("~/beans")
