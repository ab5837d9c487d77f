"""No backslash line continuations in the project's Python: a continuation hides the functions below it from tools
that follow names through the code, and parentheses say the same. A backslash inside a string (a template that
begins with '''\\) is not a continuation."""

import io
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def continuations(source: str) -> list[int]:
    """The line numbers that end in a backslash continuation (outside any string)."""
    inside: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            inside.update(range(tok.start[0], tok.end[0]))           # a string's lines but its last
    return [i for i, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("\\") and i not in inside
            and not line.lstrip().startswith("#")]


def test_no_python_file_of_the_project_continues_a_line_with_a_backslash():
    found = {str(p.relative_to(REPO)): lines for p in sorted([*REPO.glob("helpers/**/*.py"),
                                                              *REPO.glob("scripts/*.py"), *REPO.glob("tests/**/*.py"),
                                                              REPO / "conftest.py"])
             if (lines := continuations(p.read_text(encoding="utf-8")))}
    assert not found, f"backslash continuations (use parentheses): {found}"


@pytest.mark.parametrize("source, expected", [
    ("x = 1 + \\\n    2\n", [1]),
    ("x = (1 +\n     2)\n", []),
    ("T = '''\\\nabc\n'''\n", []),
    ("s = 'a\\\\'\n", []),
])
def test_a_planted_continuation_is_found_and_a_string_is_not(source, expected):
    assert continuations(source) == expected
