"""The papers' own settings are written once, in `helpers.core.papers`: no default of `helpers` spells SoftDecay's
α as a number (a signature, a field or a preset names `SOFTDECAY_ALPHA`)."""

import ast
from pathlib import Path

import pytest

from helpers.core import papers

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def alpha_literals(source: str) -> list[int]:
    """The lines where a parameter or field named like an α (`alpha`, `token_alpha`, …) defaults to SoftDecay's α
    spelled as a number (other α — Yu & Zhang's, a test's level — are other settings)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arguments):
            args = [*node.posonlyargs, *node.args]
            pairs = list(zip(args[len(args) - len(node.defaults):], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            found += [d.lineno for a, d in pairs if "alpha" in a.arg and _number(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if "alpha" in node.target.id and _number(node.value):
                found.append(node.lineno)
    return found


def _number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, float) and abs(node.value) == 0.6


def test_softdecay_alpha_is_written_once():
    assert papers.SOFTDECAY_ALPHA == -0.6 and papers.SOFTDECAY_ALPHA in papers.SOFTDECAY_ALPHAS
    found = {str(p.relative_to(HELPERS)): lines for p in sorted(HELPERS.glob("**/*.py"))
             if p.name != "papers.py" and (lines := alpha_literals(p.read_text(encoding="utf-8")))}
    assert not found, f"an α default spelled as a number (name helpers.core.papers.SOFTDECAY_ALPHA): {found}"


@pytest.mark.parametrize("source, expected", [
    ("def f(x, alpha: float = -0.6):\n    pass\n", [1]),
    ("def f(x, *, token_alpha=-0.6):\n    pass\n", [1]),
    ("def f(x, alpha=SOFTDECAY_ALPHA):\n    pass\n", []),
    ("class P:\n    alpha: float = -0.6\n", [2]),
    ("class P:\n    alphas: tuple = (-0.2,)\n", []),
    ("def f(x, alpha=0.05):\n    pass\n", []),
])
def test_a_planted_alpha_literal_is_found(source, expected):
    assert alpha_literals(source) == expected
