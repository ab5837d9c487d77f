"""The layer rule of STYLE.md: each layer of `helpers` imports only the layers below it, and chapters
import only `helpers.experiments` and `helpers.figures`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
ALLOWED = {
    "core": {"core"},
    "machinery": {"machinery"},
    "data": {"machinery", "data"},
    "hf": {"core", "machinery", "data", "hf"},
    "train": {"core", "machinery", "data", "hf", "train"},
    "diagnose": {"core", "machinery", "data", "hf", "diagnose"},
    "experiments": {"core", "machinery", "data", "hf", "train", "diagnose", "experiments"},
    "figures": {"core", "machinery", "experiments", "figures"},
}


def imported_paths(path: Path) -> list[list[str]]:
    """Every `helpers` module the module at `path` imports, as its dotted path split (["helpers", "core",
    "measures"]), absolute or relative at any depth (a chapter package's `from ...core import x`); an import of
    names from a package (`from .. import blocks`) gives the package's path plus each name."""
    package = ["helpers", *path.relative_to(HELPERS).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module.split(".") if node.module else []
            else:
                base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            if base[:1] != ["helpers"]:
                continue
            found += [base + [a.name] for a in node.names] if len(base) < 3 else [base]
        elif isinstance(node, ast.Import):
            found += [a.name.split(".") for a in node.names if a.name.startswith("helpers.")]
    return found


def helper_imports(path: Path) -> set[str]:
    """The layers of `helpers` that the module at `path` imports (absolute or relative imports)."""
    return {parts[1] for parts in imported_paths(path) if len(parts) > 1}


def modules():
    return sorted(p for p in HELPERS.rglob("*.py") if p.parent != HELPERS)


def test_every_module_sits_in_a_layer():
    stray = [p.name for p in HELPERS.glob("*.py") if p.name != "__init__.py"]
    assert not stray, f"modules outside the layers: {stray}"
    assert {p.relative_to(HELPERS).parts[0] for p in modules()} <= set(ALLOWED)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(HELPERS)))
def test_layer_imports(path):
    layer = path.relative_to(HELPERS).parts[0]
    bad = helper_imports(path) - ALLOWED[layer]
    assert not bad, f"helpers/{path.relative_to(HELPERS)} ({layer}) imports {sorted(bad)}"


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    """The checker itself: a core module importing `machinery` is reported."""
    fake = HELPERS / "core" / "measures.py"
    src = "from ..machinery.runtime import progress\nfrom helpers.hf import models\nfrom . import blocks\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: src)
    assert helper_imports(fake) == {"machinery", "hf", "core"}
    # a chapter package's module, three levels down: `...figures` is the figures layer, `..qk` a sibling chapter
    deep = HELPERS / "experiments" / "sts" / "findings.py"
    src = "from ...figures import common\nfrom ..qk import Params\nfrom .records import Run\n"
    assert helper_imports(deep) == {"figures", "experiments"}
    assert unit_imports(deep, "experiments") == {"qk"}


CHAPTERS = sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapters_import_only_experiments_and_figures(path):
    text = path.read_text()
    pattern = r"^[ \t]*(from helpers\S*|import helpers\S*)(?: import ([\w, ]+))?"
    bad = [m.group(0) for m in re.finditer(pattern, text, re.M)
           if not (m.group(1) == "from helpers" and set(x.strip() for x in (m.group(2) or "").split(","))
                   <= {"experiments", "figures"})
           and not re.match(r"from helpers\.(experiments|figures)\b", m.group(1))]
    assert not bad, f"{path.name} imports {bad}"


def unit_imports(path: Path, layer: str) -> set[str]:
    """The other modules and packages of its layer that a module imports, at its top or inside a function (a
    chapter package's modules importing each other are inside one unit)."""
    own = path.relative_to(HELPERS / layer).parts[0].removesuffix(".py")
    return {parts[2] for parts in imported_paths(path)
            if len(parts) > 2 and parts[1] == layer and parts[2] not in (own, "__init__")}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_no_import_circle_inside_a_layer(layer):
    """Within a layer the modules import each other without a circle (hf/models ↔ sequence_models
    ↔ whisper is the kind it catches)."""
    graph: dict[str, set[str]] = {}
    for p in (HELPERS / layer).rglob("*.py"):
        unit = p.relative_to(HELPERS / layer).parts[0].removesuffix(".py")
        if unit != "__init__":
            graph.setdefault(unit, set()).update(unit_imports(p, layer))

    def visit(node, stack):
        if node in stack:
            raise AssertionError(f"helpers/{layer}: import circle {' -> '.join([*stack[stack.index(node):], node])}")
        for nxt in graph.get(node, ()):
            visit(nxt, [*stack, node])
    for start in graph:
        visit(start, [])
