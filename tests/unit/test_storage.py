"""Where Ray's workers write (course.storage): run names of their own, and the filesystem of a local path or a
bucket."""

import pytest

from course.storage import CHECKPOINTS_KEPT, filesystem, run_name


def test_filesystem_resolves_local_paths_and_public_buckets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs, path = filesystem("relative/folder")
    assert fs.type_name == "local" and path == str(tmp_path / "relative/folder")
    fs, path = filesystem("s3://anonymous@air-example-data-2/imagenette2")
    assert fs.type_name == "s3" and path == "air-example-data-2/imagenette2"


def test_every_run_gets_a_name_of_its_own():
    from datetime import datetime, timedelta

    first = datetime(2026, 11, 21, 22, 0, 0)
    assert run_name("02-beans", first) == "02-beans-2026-11-21_22-00-00"
    assert run_name("02-beans", first) != run_name("02-beans", first + timedelta(seconds=1))
    assert CHECKPOINTS_KEPT >= 1


@pytest.mark.parametrize("bucket", ["air-example-data-2", "ray-example-data"])
def test_the_public_buckets_are_read_in_their_own_region_on_a_machine_without_aws_settings(monkeypatch, bucket):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # no profile's region either
    fs, path = filesystem(f"s3://anonymous@{bucket}/some/prefix")
    assert fs.region == "us-west-2" and path == f"{bucket}/some/prefix"
