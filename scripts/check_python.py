"""Before anything is installed: which Python runs the course? If none can, say which versions can, and how.

`make setup` runs it twice: `--find` (with any python3) prints the interpreter to build .venv with, the
newest supported `python3.X` on the PATH, else `python3` if it fits; then, with no argument, under the
interpreter it is about to use, to check it (adding `--venv` when it is about to make .venv: can this interpreter make
a venv with pip in it? Debian's and Ubuntu's python3 cannot until `python3.X-venv` is installed). Written for any
Python 3 (no f-strings, no tomllib), so that an old or new interpreter gets a sentence instead of a traceback from pip.
The versions come from `requires-python` in pyproject.toml, the same bounds the lock was resolved for.
"""

import os
import re
import subprocess
import sys
from os.path import abspath, dirname, join

PYPROJECT = join(dirname(dirname(abspath(__file__))), "pyproject.toml")


def required_range(pyproject_text):
    """(lowest, first too new) from a `requires-python = ">=3.11.5,<3.15"` line, as tuples of ints."""
    match = re.search(r'^requires-python\s*=\s*">=([\d.]+),\s*<([\d.]+)"', pyproject_text, re.MULTILINE)
    if not match:
        raise ValueError('pyproject.toml needs a `requires-python = ">=X.Y.Z,<X.Y"` line')
    return tuple(int(p) for p in match.group(1).split(".")), tuple(int(p) for p in match.group(2).split("."))


def dotted(version):
    return ".".join(str(part) for part in version)


def supported_minors(lowest, too_new):
    """The `3.X` series the course supports, newest first: (3, 14), (3, 13), ... for 3.11.5 to <3.15."""
    last = too_new[1] - 1 if len(too_new) == 2 or too_new[2:] == (0,) else too_new[1]
    return [(lowest[0], minor) for minor in range(last, lowest[1] - 1, -1)]


def fits(found, lowest, too_new):
    return lowest <= tuple(found[:3]) < too_new


def advice(found, lowest, too_new, interpreter=None):
    """None when ``found`` (a version tuple, or None for no Python at all) fits, else what to do."""
    if found is not None and fits(found, lowest, too_new):
        return None
    newest = dotted(supported_minors(lowest, too_new)[0])
    if found is None:
        first = "No Python on the PATH can run this course."
    else:
        first = "`{0}` is Python {1}, which cannot run this course.".format(
            interpreter or sys.executable, dotted(found[:3])
        )
    lines = [
        first,
        "It runs on Python {0} to {1} ({2} or newer in the {3} series). One command gets one:".format(
            dotted(lowest[:2]), dotted(supported_minors(lowest, too_new)[0]), dotted(lowest), dotted(lowest[:2])
        ),
        "  uv python install {0} && make setup PYTHON=$(uv python find {0})".format(newest),
        "or, with conda:  conda env create -f environment.yml && conda activate vit-ray-course"
        " && make setup VENV=$CONDA_PREFIX",
        "(If a .venv was already made with another Python, remove it first: rm -rf .venv)",
    ]
    return "\n".join(lines)


def venv_advice(has_venv, version, debian):
    """None when this Python can make a venv with pip (``has_venv``), else what to install, before anything is made."""
    if has_venv:
        return None
    package = "python%s-venv" % dotted(version[:2])
    lines = [
        "`{0}` cannot make a virtual environment with pip in it (its `venv` or `ensurepip` module is missing).".format(
            sys.executable
        )
    ]
    if debian:
        lines.append("On Debian and Ubuntu it comes in its own package: sudo apt install {0}".format(package))
    else:
        lines.append(
            "Install your system's venv package for Python {0} (often named {1}),".format(dotted(version[:2]), package)
        )
        lines.append("or take a Python that has it: uv python install {0}".format(dotted(version[:2])))
    lines.append("then run the same make command again.")
    return "\n".join(lines)


def can_make_venv():
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def version_of(command):
    """The (major, minor, micro) of the interpreter ``command``, or None if it does not run."""
    try:
        out = subprocess.check_output(
            [command, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None  # not on the PATH, or a shim (pyenv's) that does not run
    return tuple(int(part) for part in out.decode().split("."))


def on_path(name):
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find(lowest, too_new):
    """(command, None) for the newest fitting python3.X on the PATH, else python3; else (None, advice)."""
    names = ["python%s" % dotted(series) for series in supported_minors(lowest, too_new)] + ["python3"]
    seen = None
    for name in names:
        path = on_path(name)
        version = version_of(path) if path else None
        if version is None:
            continue
        if fits(version, lowest, too_new):
            return path, None
        if name == "python3":
            seen = (version, path)
    return None, advice(seen and seen[0], lowest, too_new, seen and seen[1])


def main(argv):
    with open(PYPROJECT) as handle:
        lowest, too_new = required_range(handle.read())
    if argv[1:] == ["--find"]:
        command, message = find(lowest, too_new)
        if command:
            print(command)
            return 0
        sys.stderr.write(message + "\n")
        return 1
    message = advice(sys.version_info, lowest, too_new)
    if not message and "--venv" in argv[1:]:
        message = venv_advice(can_make_venv(), sys.version_info, os.path.exists("/etc/debian_version"))
    if message:
        sys.stderr.write(message + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
