"""Storage: where Ray's workers write (``COURSE_STORAGE_PATH``: :func:`storage_path`), a run's name and checkpoints
there, and the files of a local path or a bucket (``s3://...``) through one pyarrow filesystem (:func:`filesystem`)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pyarrow.fs as pafs

from course import settings
from course.config import RESULTS_DIR, STORAGE_ENV

ANONYMOUS_S3 = "s3://anonymous@"  # public buckets: no credentials
# The public buckets' region. S3 answers only in a bucket's own region, and pyarrow takes us-east-1 where a machine has
# no AWS settings; Ray Data looks the region up itself. Another bucket's region is looked up (pyarrow.fs.from_uri).
PUBLIC_BUCKET_REGIONS = {"air-example-data-2": "us-west-2", "ray-example-data": "us-west-2"}


def storage_path() -> str:
    """Where Ray's workers write: Ray Train's checkpoints and results, and files a Ray Data job writes.
    ``$COURSE_STORAGE_PATH``, else ``results/ray``.

    One machine can use a local folder; a multi-node cluster needs storage that every node
    reaches, such as an NFS mount (``/mnt/cluster_storage``) or a bucket (``s3://bucket/prefix``).
    """
    storage = settings.read(STORAGE_ENV) or str(RESULTS_DIR / "ray")
    return storage if "://" in storage else str(Path(storage).absolute())


def shared_path(name: str, storage: str | None = None) -> str:
    """``name`` under ``storage`` (default :func:`storage_path`): a place every worker can write to and this process
    can read from."""
    return f"{(storage or storage_path()).rstrip('/')}/{name}"


# Checkpoints kept per Ray Train run; older ones are deleted (the real ViT's are about 1 GB each). Ray Train's
# `result.metrics_dataframe` lists the reports of kept checkpoints only: 6 keeps every evaluation of the course's runs.
CHECKPOINTS_KEPT = 6


def run_name(name: str, now: datetime | None = None) -> str:
    """A Ray Train run name of its own for every run, ``<name>-<date>_<time>``.

    Runs with the same name and storage would share one folder: a rerun would find the last run's
    checkpoints, and ``result.metrics_dataframe`` would hold both runs' rows.
    """
    return f"{name}-{(now or datetime.now()).strftime('%Y-%m-%d_%H-%M-%S')}"


def publish_folder(folder: Path, uri: str) -> str:
    """Copy the local ``folder`` to ``uri`` (a path every node mounts, or ``s3://...``): return ``uri``."""
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)
    pafs.copy_files(str(folder), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return uri


def exists(uri: str) -> bool:
    """True when something is at ``uri`` (a local path or ``s3://...``)."""
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def remove(uri: str) -> None:
    """Delete the folder at ``uri`` (a local path or ``s3://...``) if there is one."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path for a local path (relative ones too) or a URI such as ``s3://...``."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), str(Path(uri).resolve())
    path = uri.removeprefix(ANONYMOUS_S3)
    region = PUBLIC_BUCKET_REGIONS.get(path.split("/", 1)[0])
    if uri.startswith(ANONYMOUS_S3) and region:  # a public bucket of the course: its region, without a look-up
        # (an S3-compatible server, a mirror or a test server, comes from AWS_ENDPOINT_URL, as from_uri reads it)
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        return pafs.S3FileSystem(anonymous=True, region=region, endpoint_override=endpoint), path
    return pafs.FileSystem.from_uri(uri)  # anonymous@ too; from_uri looks the bucket's region up
