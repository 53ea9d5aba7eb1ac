"""The Hugging Face Hub's data set and model that the real sources name: each answers (online), or each is in this
machine's caches (``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from course.config import MODEL_ENV
from course.sources import is_local
from doctor_checks import Check
from doctor_checks.connection import CONNECT_TIMEOUT_S

HUB_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true in HF_HUB_OFFLINE (any case)


def in_hub_cache(kind: str, repo_id: str) -> bool:
    """Whether this machine's Hugging Face caches hold ``repo_id`` as an offline run reads it: a model's
    ``config.json`` in the Hub's cache; a data set prepared by datasets (its Arrow files: datasets reads only those
    offline, not the Hub cache's parquet files)."""
    if kind == "model":
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    from datasets import config as datasets_config

    prepared = Path(datasets_config.HF_DATASETS_CACHE) / repo_id.replace("/", "___")
    return any(prepared.rglob("*.arrow")) if prepared.is_dir() else False


def check_hub(sources) -> Check:
    """The Hub's data set and model that the real sources name: each answers (online), or each is in the caches
    (``HF_HUB_OFFLINE=1``)."""
    wanted = [
        (kind, repo) for kind, repo in (("dataset", sources.beans), ("model", sources.model)) if not is_local(repo)
    ]
    if not wanted:
        return Check("hub", True, "nothing to read from the Hub (local folders)")
    offline = os.environ.get("HF_HUB_OFFLINE", "")
    if offline.strip().upper() in HUB_TRUE:
        missing = [f"{kind} {repo}" for kind, repo in wanted if not in_hub_cache(kind, repo)]
        if missing:
            return Check(
                "hub",
                False,
                f"HF_HUB_OFFLINE={offline}, and the caches lack {', '.join(missing)}",
                "unset HF_HUB_OFFLINE and run the notebooks once online (it fills the caches), or fill them on a "
                "machine online and copy HF_HOME here",
            )
        cached = ", ".join(f"{kind} {repo}" for kind, repo in wanted)
        return Check("hub", True, f"HF_HUB_OFFLINE={offline}: {cached} in the caches")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    answered, problems = [], []
    for kind, repo in wanted:
        url = f"{endpoint}/api/{kind}s/{repo}"
        try:
            with urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT_S):
                answered.append(f"{kind} {repo}")
        except OSError as error:
            problems.append(f"{url}: {error}")
    if problems:
        return Check.failed(
            "hub",
            problems,
            "open the network to huggingface.co (or set HF_ENDPOINT to a mirror); a 404 names an id that moved: "
            f"set it in course/sources.py or {MODEL_ENV}",
        )
    return Check("hub", True, f"{endpoint} has " + ", ".join(answered))
