"""The course's paths, and its settings by name, each read and checked through :mod:`course.settings`.

Every ``COURSE_*`` variable is declared in :mod:`course.settings` (meaning, default, allowed values); the names below
are its names, for the Python that reads them. Two settings are independent of each other:

* ``COURSE_SOURCES`` picks where data and the pretrained model come from (:mod:`course.sources`): the offline
  stand-ins that ``make data`` builds in ``data/`` (``standin``, the default), or the Hugging Face Hub and S3
  (``real``, network needed). ``COURSE_MODEL`` names another pretrained model than the sources' own.
* ``COURSE_BUDGET`` picks how much work the notebooks do (:mod:`course.budget`): ``cpu`` (a laptop) or ``gpu`` (a GPU
  cluster); unset, it follows the hardware. ``COURSE_SMOKE=1`` takes either down to the smoke size.

Where Ray's workers write (``COURSE_STORAGE_PATH``) is :mod:`course.storage`'s.
"""

from __future__ import annotations

from pathlib import Path

from course import settings

REPO_ROOT = Path(__file__).resolve().parents[1]
# A clone of the course (`make setup` installs it in place) keeps data/ and results/ in the clone. The package
# installed alone (a lesson opened on its own, on Colab say: its first cell installs it) keeps them in the working
# directory, beside the notebook.
IN_A_CLONE = (REPO_ROOT / "pyproject.toml").is_file()
HOME = REPO_ROOT if IN_A_CLONE else Path.cwd()
# Where the course's data sets are: HOME's data/ (one machine), or a folder every node of a cluster mounts.
DATA_DIR_ENV = "COURSE_DATA_DIR"
DATA_DIR = Path(settings.raw(DATA_DIR_ENV) or HOME / "data").absolute()  # checked where it is used: data_folder
# What this process writes for you to read (executed notebooks, headline figures, exercise verdicts).
RESULTS_DIR_ENV = "COURSE_RESULTS_DIR"
RESULTS_DIR = Path(settings.read(RESULTS_DIR_ENV) or HOME / "results").absolute()
# What Ray's workers write (checkpoints, predictions): results/ray, or storage every node reaches (course.storage).
STORAGE_ENV = "COURSE_STORAGE_PATH"

SOURCES_ENV = "COURSE_SOURCES"
# The pretrained model the beans and dogs lessons (01 to 03, and 06 serving 03's) fine-tune, named once: unset, the
# stand-in (COURSE_SOURCES=standin) or course.sources.REAL_MODELS[budget] (real). Any image classifier that
# transformers' Auto classes load will do, a Hub id (with COURSE_SOURCES=real: the Hub is reachable) or a
# `save_pretrained` folder written as a path (/..., ./... or ~/...).
MODEL_ENV = "COURSE_MODEL"
BUDGET_ENV = "COURSE_BUDGET"
SMOKE_ENV = "COURSE_SMOKE"
VERBOSE_ENV = "COURSE_VERBOSE"
# Whether a notebook's headline must reach its floor (course.results.record): `enforce` (default), or `report`
# for a run whose content cannot learn (the real-sources rehearsal's random weights): the figure and its floor are
# printed, and nothing is enforced.
FLOORS_ENV = "COURSE_FLOORS"
# Notebook 06's service: where it listens (unset: a free port on 127.0.0.1, chosen at run time).
SERVE_PORT_ENV = "COURSE_SERVE_PORT"


def data_folder() -> Path:
    """:data:`DATA_DIR`, a folder: the stand-ins are read as files (a Hugging Face image folder, a saved model), so on
    a cluster they go on a shared mount. A bucket is the storage's place (``COURSE_STORAGE_PATH``), not the data's."""
    settings.read(DATA_DIR_ENV)  # a URI is refused, with the alternatives
    return DATA_DIR


def sources_kind(kind: str | None = None) -> str:
    """The chosen kind of sources: the argument, else ``$COURSE_SOURCES``, else ``standin`` (course.settings)."""
    return settings.read(SOURCES_ENV, kind)


def budget_kind(gpus: float = 0, kind: str | None = None) -> str:
    """The budget: the argument, else ``$COURSE_BUDGET``, else ``gpu`` when there are GPUs, ``cpu`` otherwise."""
    return settings.read(BUDGET_ENV, kind) or ("gpu" if gpus else "cpu")


def smoke(value: bool | None = None) -> bool:
    """The smoke size: the argument, else ``$COURSE_SMOKE`` (off by default)."""
    return settings.flag(SMOKE_ENV) if value is None else value


def floors() -> str:
    """``$COURSE_FLOORS``: ``enforce`` (default) or ``report``; anything else is an error that names both."""
    return settings.read(FLOORS_ENV)


def verbose() -> bool:
    """``COURSE_VERBOSE=1``: keep Ray's, Ray Train's and TensorFlow's info logs (off by default: the lesson's
    own output stays readable; true, yes and on work too, anything but a flag is refused)."""
    return settings.flag(VERBOSE_ENV)
