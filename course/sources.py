"""The sources: where each data set and the pretrained model come from (``COURSE_SOURCES``, ``COURSE_MODEL``).

``standin`` (default): small, offline stand-ins that ``make data`` builds in ``data/`` (:mod:`course.build`).
``real``: the Hugging Face Hub's ``beans`` and a pretrained image classifier (:data:`REAL_MODELS`: a small one for the
cpu budget, ViT-B/16 for the gpu budget), CIFAR-10 and imagenette on S3 (network needed). Both go through the same
code; ``COURSE_MODEL`` names another pretrained model than the sources' own. :func:`require_data` says what is
missing, and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from course import settings
from course.budget import Budget
from course.config import MODEL_ENV, SOURCES_ENV, budget_kind, data_folder, sources_kind
from course.storage import exists

# The real pretrained model, by budget. cpu: DeiT-tiny (5.7 M parameters, an ImageNet-1k classifier, 224 px): a
# lesson fine-tunes it on real photos in minutes on a laptop's CPU. gpu: ViT-B/16 pretrained on ImageNet-21k (86 M
# parameters, no classification head), the course's model on a GPU.
REAL_MODELS = {"cpu": "facebook/deit-tiny-patch16-224", "gpu": "google/vit-base-patch16-224-in21k"}
REAL_BEANS = "AI-Lab-Makerere/beans"  # the Hub's beans, under its owner's name (the old id `beans` is refused)
BUILD_COMMAND = "make data"

# Names of the stand-ins, said plainly: they are synthetic and built by this repo.
STANDIN_BEANS = "synthetic-beans"
STANDIN_IMAGENETTE = "synthetic-imagenette-dogs-fish"
STANDIN_CIFAR10 = "synthetic-cifar10"
STANDIN_VIT = "vit-tiny-pretrained-on-synthetic-cifar10"


@dataclass(frozen=True)
class Sources:
    """Where each data set and the pretrained model come from."""

    kind: str
    beans: str  # a local imagefolder directory, or a Hub dataset id
    model: str  # the pretrained image classifier 01 to 03 fine-tune: a `save_pretrained` folder, or a Hub model id
    imagenette: str  # URI of a folder holding train/ and val/ synset folders
    imagenette_labels: str  # URI of the labels CSV (file_name,label)
    cifar10: str  # URI of a folder holding train/ and test/ parquet files


def _standin_sources(data_dir: Path, budget: str) -> Sources:
    imagenette = data_dir / STANDIN_IMAGENETTE
    return Sources(
        kind="standin",
        beans=str(data_dir / STANDIN_BEANS),
        model=str(data_dir / STANDIN_VIT),
        imagenette=str(imagenette),
        imagenette_labels=str(imagenette / "labels.csv"),
        cifar10=str(data_dir / STANDIN_CIFAR10),
    )


def _real_sources(data_dir: Path, budget: str) -> Sources:
    return Sources(
        kind="real",
        beans=REAL_BEANS,
        model=REAL_MODELS[budget],
        imagenette="s3://anonymous@air-example-data-2/imagenette2",
        # imagenette ships no labels file: notebook 03 writes one from the real folders on first use (ensure_labels).
        imagenette_labels=str(data_dir / "imagenette2-labels.csv"),
        cifar10="s3://anonymous@ray-example-data/cifar10-parquet",
    )


_SOURCES = {"standin": _standin_sources, "real": _real_sources}
assert set(_SOURCES) == set(settings.declared(SOURCES_ENV).choices), "course/settings.py declares the same sources"


def get_sources(kind: str | None = None, data_dir: Path | None = None, budget: Budget | None = None) -> Sources:
    """The sources for ``kind`` (see :func:`sources_kind`), with ``$COURSE_MODEL``'s model where it is set.

    The real sources' model follows ``budget`` (:data:`REAL_MODELS`; without one, :func:`budget_kind` with no GPUs)."""
    sources = _SOURCES[sources_kind(kind)](data_dir or data_folder(), budget.kind if budget else budget_kind())
    model = settings.read(MODEL_ENV)
    return replace(sources, model=model) if model else sources


def is_local(uri: str) -> bool:
    """True for a local path, written as one (``/...``, ``./...``, ``../...``, ``~/...``); False for a Hub id
    (``beans``, ``ns/name``: whatever folders the working directory holds) or a remote URI such as ``s3://...``."""
    return "://" not in uri and uri.startswith(("/", ".", "~"))


def require_local(path: str | Path, what: str) -> Path:
    """Return ``path`` if it exists; otherwise fail with the command that builds it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"The {what} is missing at {path}. Build the course data and model with "
            f"`{BUILD_COMMAND}` in the repository root (about a minute, no network needed)."
        )
    return path


def require_data(sources: Sources, names: Iterable[str] | None = None) -> Sources:
    """``sources`` if what they name is there (``names``: only those fields, as a lesson's record lists them in
    ``course.lessons``; None: every one); otherwise an error that names the place and the fix.

    Stand-ins must be built (`make data`); folders on S3 must exist (a wrong bucket or prefix is named,
    with the setting that chose it). Hub ids are checked by the Hub when they are loaded.
    """
    fields_ = {name: uri for name, uri in asdict(sources).items() if name != "kind"}
    unknown = sorted(set(names or ()) - set(fields_))
    if unknown:
        raise ValueError(f"{unknown} are not sources: Sources has {sorted(fields_)}")
    for name, uri in fields_.items():
        if names is not None and name not in names:
            continue
        if sources.kind == "real" and name == "imagenette_labels":  # written on first use
            continue
        if "://" in uri:
            require_remote(uri, f"`{name}` of {SOURCES_ENV}={sources.kind}")
        elif is_local(uri) or sources.kind == "standin":
            require_local(uri, f"stand-in `{name}`")
    return sources


def require_remote(uri: str, what: str) -> str:
    """``uri`` if something is there; otherwise an error naming the URI, what it is for, and how to change it."""
    fix = f"check the bucket and prefix, or change {SOURCES_ENV} (or the URI in course/sources.py)"
    try:
        found = exists(uri)
    except OSError as error:  # no such bucket, no network, no permission
        raise FileNotFoundError(f"Cannot read {uri} ({what}): {error}. {fix[0].upper() + fix[1:]}.") from None
    if not found:
        raise FileNotFoundError(f"Nothing at {uri} ({what}): {fix}.")
    return uri
