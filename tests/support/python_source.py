"""Python source as a syntax tree, for the tests that read the course's code (``parse``).

``ast.parse`` with the garbage collector held off. On CPython 3.11 (3.11.7 here, CI's too) one conversion of a tree
into Python objects at a time is safe: the counter of its depth is shared by the whole interpreter. A collection that
starts inside it can finalize an object whose clean-up formats a traceback, and 3.11's traceback parses the failing
line for its ``^^^`` marks: the outer parse then fails with ``SystemError: AST constructor recursion depth mismatch``.
The suite met it in CI: a Ray Data iterator left unfinished by an earlier test, collected during a parse after
``ray.shutdown()``, logged "Ray is not initialized" with its traceback (cpython issue 106905 tells the bug's story).
"""

from __future__ import annotations

import ast
import gc


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, with no collection (and so no finalizer) running until the tree is built."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if was_enabled:
            gc.enable()
