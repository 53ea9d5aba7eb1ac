import os
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from helpers.course import config


def test_standin_is_the_default(monkeypatch):
    monkeypatch.delenv(config.SOURCES_ENV, raising=False)
    assert config.get_sources().kind == "standin"


def test_env_switches_to_real(monkeypatch):
    monkeypatch.setenv(config.SOURCES_ENV, "real")
    monkeypatch.delenv(config.MODEL_ENV, raising=False)
    sources = config.get_sources()
    assert sources.kind == "real"
    assert sources.beans == "beans"
    assert sources.model == "google/vit-base-patch16-224-in21k"
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
    assert not config.is_local(real.beans) and not config.is_local(real.model)
    assert not config.is_local(real.imagenette) and not config.is_local(real.cifar10)


@pytest.mark.parametrize("sources_kind", ["standin", "real"])
@pytest.mark.parametrize("budget_kind", ["cpu", "gpu"])
def test_sources_and_budget_are_chosen_independently(monkeypatch, sources_kind, budget_kind):
    """The four combinations: the budget never depends on the sources, the sources never on the budget."""
    monkeypatch.setenv(config.SOURCES_ENV, sources_kind)
    monkeypatch.setenv(config.BUDGET_ENV, budget_kind)
    sources = config.get_sources()
    for gpus in (0, 4):  # the setting wins over the hardware
        budget = config.get_budget(gpus)
        assert (sources.kind, budget.kind) == (sources_kind, budget_kind)
    text = config.describe(sources, budget, "a plan", lesson="04_cifar10_pytorch_to_ray")
    assert f"sources: {sources_kind}" in text and f"budget: {budget_kind}" in text and "plan: a plan" in text
    assert f"\n  cifar: architecture={budget.cifar.architecture}," in text and "beans:" not in text


def test_the_budget_follows_the_hardware_when_unset(monkeypatch):
    monkeypatch.delenv(config.BUDGET_ENV, raising=False)
    assert config.get_budget(0).kind == "cpu" and config.get_budget(0.0).kind == "cpu"
    assert config.get_budget(1).kind == "gpu" and config.get_budget(8).kind == "gpu"


def test_an_unknown_budget_names_the_choices(monkeypatch):
    monkeypatch.setenv(config.BUDGET_ENV, "laptop")
    with pytest.raises(ValueError, match=r"COURSE_BUDGET='laptop'.*\['cpu', 'gpu'\]"):
        config.get_budget(0)


def test_the_cpu_budget_is_small_and_the_gpu_budget_is_the_real_thing():
    cpu, gpu = config.get_budget(kind="cpu"), config.get_budget(kind="gpu")
    assert cpu.cifar.architecture == "small" and cpu.cifar.train_size and cpu.cifar.batch_size <= 64
    assert gpu.cifar.architecture == "full" and gpu.cifar.train_size is None and gpu.cifar.batch_size == 512
    assert gpu.max_workers > cpu.max_workers
    for budget in (cpu, gpu):
        knobs = budget.shared() | {
            f"{s}.{k}": v for s in config.SECTIONS for k, v in asdict(getattr(budget, s)).items()
        }
        for name, value in knobs.items():
            assert value is None or isinstance(value, str) or value > 0, f"{budget.kind}: {name} = {value}"
        assert budget.beans.train_steps % budget.beans.eval_steps == 0, "the last step is an evaluation"


def test_describe_without_a_lesson_shows_every_source_and_knob(monkeypatch):
    monkeypatch.delenv(config.MODEL_ENV, raising=False)
    text = config.describe(config.get_sources("standin"), config.get_budget(kind="cpu"))
    assert "sources: standin" in text and config.STANDIN_VIT in text
    budget = config.get_budget(kind="cpu")
    assert all(f" {name}=" in text or f"  {name}=" in text for name in budget.shared())
    for section in config.SECTIONS:
        line = next(line for line in text.splitlines() if line.startswith(f"  {section}: "))
        assert all(f"{field.name}=" in line for field in fields(getattr(budget, section)))


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


def test_a_bucket_for_the_data_folder_is_refused_with_the_alternatives(monkeypatch):
    monkeypatch.setenv(config.DATA_DIR_ENV, "s3://my-bucket/data")
    with pytest.raises(ValueError, match="must be a folder every node mounts") as refused:
        config.get_sources("standin")
    assert config.STORAGE_ENV in str(refused.value) and "COURSE_SOURCES=real" in str(refused.value)


def test_one_setting_names_the_pretrained_model_for_both_kinds_of_sources(monkeypatch, tmp_path):
    monkeypatch.setenv(config.MODEL_ENV, "facebook/deit-tiny-patch16-224")
    assert config.get_sources("real").model == "facebook/deit-tiny-patch16-224"
    assert config.get_sources("standin").model == "facebook/deit-tiny-patch16-224"
    monkeypatch.delenv(config.MODEL_ENV)
    assert config.get_sources("real").model == config.REAL_MODEL
    assert config.get_sources("standin", tmp_path).model == str(tmp_path / config.STANDIN_VIT)
