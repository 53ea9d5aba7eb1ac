import os
from dataclasses import fields
from pathlib import Path

import pytest

from helpers import config


def test_standin_is_the_default(monkeypatch):
    monkeypatch.delenv(config.SOURCES_ENV, raising=False)
    assert config.get_sources().kind == "standin"


def test_env_switches_to_real(monkeypatch):
    monkeypatch.setenv(config.SOURCES_ENV, "real")
    sources = config.get_sources()
    assert sources.kind == "real"
    assert sources.beans == "beans"
    assert sources.vit == "google/vit-base-patch16-224-in21k"
    assert sources.imagenette.startswith("s3://")
    assert sources.cifar10.startswith("s3://")


def test_unknown_setting_names_the_choices(monkeypatch):
    monkeypatch.setenv(config.SOURCES_ENV, "hub")
    with pytest.raises(ValueError, match=r"standin.*COURSE_SOURCES=standin|real"):
        config.get_sources()


def test_standin_sources_are_local_and_real_ones_remote(tmp_path):
    standin, real = config.get_sources("standin", tmp_path), config.get_sources("real", tmp_path)
    for field in fields(config.Sources):
        if field.name == "kind":
            continue
        assert config.is_local(getattr(standin, field.name)), field.name
        assert Path(getattr(standin, field.name)).is_relative_to(tmp_path)
    assert not config.is_local(real.beans) and not config.is_local(real.vit)
    assert not config.is_local(real.imagenette) and not config.is_local(real.cifar10)


def test_both_settings_have_the_same_fields_and_positive_sizes():
    for kind in ("standin", "real"):
        sizes = config.get_sizes(kind)
        assert sizes.beans_train_steps > 0 and sizes.beans_batch_size > 0 and sizes.learning_rate > 0


def test_describe_names_every_source_and_size():
    text = config.describe(config.get_sources("standin"), config.get_sizes("standin"))
    assert "sources: standin" in text and "beans_train_steps" in text and config.STANDIN_VIT in text


def test_missing_local_folder_names_the_build_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        config.require_local(tmp_path / "nope", "beans-like leaf data set")


def test_filesystem_resolves_local_paths_and_public_buckets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs, path = config.filesystem("relative/folder")
    assert fs.type_name == "local" and path == str(tmp_path / "relative/folder")
    fs, path = config.filesystem("s3://anonymous@air-example-data-2/imagenette2")
    assert fs.type_name == "s3" and path == "air-example-data-2/imagenette2"


def test_every_run_gets_a_name_of_its_own():
    from datetime import datetime, timedelta

    first = datetime(2026, 11, 21, 22, 0, 0)
    assert config.run_name("02-beans", first) == "02-beans-2026-11-21_22-00-00"
    assert config.run_name("02-beans", first) != config.run_name("02-beans", first + timedelta(seconds=1))
    assert config.CHECKPOINTS_KEPT >= 1


def test_missing_stand_ins_say_make_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        config.require_data(config.get_sources("standin", tmp_path))
    import dataclasses

    here = dataclasses.replace(config.get_sources("real", tmp_path), imagenette=str(tmp_path), cifar10=str(tmp_path))
    assert config.require_data(here) is here  # Hub ids are left to the Hub; folders that exist pass


def test_the_makefile_reads_course_sources_as_python_does():
    import subprocess

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "COURSE_", "MAKE"))}  # as a fresh shell
    for value in ("", "standin", "Real", " REAL ", "real"):
        shown = subprocess.run(
            ["make", "-s", "-C", str(root), "sources", f"COURSE_SOURCES={value}"],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        kind = config.sources_kind(value or None)
        assert f"COURSE_SOURCES={kind} " in shown, (value, shown)
        assert ("HF_HUB_OFFLINE=1" in shown) == (kind != "real"), (value, shown)
