"""tests/support/python_source.parse: a syntax tree even while garbage whose clean-up formats a traceback is collected
(what failed CI's first session on Python 3.11: tests/unit/test_internals.py, "AST constructor recursion depth
mismatch")."""

from __future__ import annotations

import ast
import gc
import sys
import traceback

from python_source import parse

SOURCE = "\n".join(f"def f{i}(a, b):\n    return [x + y for x, y in zip(a, b) if x > (y - {i})]" for i in range(500))


class Litter:
    """Garbage in a cycle (only a collection frees it) whose finalizer formats a traceback, as a Ray Data iterator
    left unfinished does when Ray has gone."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        try:
            (lambda: 1 / 0)()
        except ZeroDivisionError:
            traceback.format_exc()


def parses_among_litter(parser) -> int:
    """How many of 5 parses of SOURCE raised SystemError, with 200 pieces of litter made before each and the
    collector run every 10 allocations."""
    thresholds = gc.get_threshold()
    gc.set_threshold(10)
    failed = 0
    try:
        for _ in range(5):
            for _ in range(200):
                Litter()
            try:
                assert len(parser(SOURCE).body) == 500
            except SystemError:
                failed += 1
    finally:
        gc.set_threshold(*thresholds)
    return failed


def test_parse_builds_the_tree_while_litter_is_collected():
    assert parses_among_litter(parse) == 0
    assert gc.isenabled(), "parse gives the collector back"


def test_the_hazard_is_real_on_python_3_11():
    """Where CPython shares the depth counter (3.11), ast.parse alone fails here: the test above shows something."""
    failed = parses_among_litter(ast.parse)
    if sys.version_info[:2] == (3, 11):
        assert failed > 0
