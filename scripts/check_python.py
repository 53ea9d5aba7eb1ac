"""Before anything is installed: can this Python run the course? If not, say which one can, and how to get it.

Run by `make setup` with the interpreter it is about to use. Written for any Python 3 (no f-strings,
no tomllib), so that an old or new interpreter gets this sentence instead of a traceback from pip.
The versions come from `requires-python` in pyproject.toml, the same bound the lock was resolved for.
"""

import re
import sys
from os.path import abspath, dirname, join

PYPROJECT = join(dirname(dirname(abspath(__file__))), "pyproject.toml")


def required_range(pyproject_text):
    """(lowest, first too new) from a `requires-python = ">=3.11.5,<3.12"` line, as tuples of ints."""
    match = re.search(r'^requires-python\s*=\s*">=([\d.]+),\s*<([\d.]+)"', pyproject_text, re.MULTILINE)
    if not match:
        raise ValueError('pyproject.toml needs a `requires-python = ">=X.Y.Z,<X.Y"` line')
    return tuple(int(p) for p in match.group(1).split(".")), tuple(int(p) for p in match.group(2).split("."))


def dotted(version):
    return ".".join(str(part) for part in version)


def advice(found, lowest, too_new):
    """None when ``found`` (a version tuple) fits, else the message that says what to do."""
    if lowest <= tuple(found[:3]) < too_new:
        return None
    series = dotted(lowest[:2])
    lines = [
        "This course needs Python {0} ({1} or newer in the {0} series); `{2}` is Python {3}.",
        "Its pinned packages (TensorFlow, among others) exist for that version only. Three ways to get it:",
        "  conda:  conda env create -f environment.yml && conda activate vit-ray-course",
        "          make setup VENV=$CONDA_PREFIX",
        "  uv:     uv python install {0} && make setup PYTHON=$(uv python find {0})",
        "  pyenv:  pyenv install {0} && make setup PYTHON=$(pyenv root)/versions/$(pyenv latest {0})/bin/python",
        "(If a .venv was already made with another Python, remove it first: rm -rf .venv)",
    ]
    return "\n".join(lines).format(series, dotted(lowest), sys.executable, dotted(found[:3]))


def main():
    with open(PYPROJECT) as handle:
        lowest, too_new = required_range(handle.read())
    message = advice(sys.version_info, lowest, too_new)
    if message:
        sys.stderr.write(message + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
