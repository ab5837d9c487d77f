"""A name that starts with `_` is private to its module: no other module of `helpers/` (or script) imports it,
exports it, or reaches it on an object (`res._lr()`). What another module needs is public, or the call moves
to the module that owns it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: namedtuple's public API, spelled with a leading underscore
NAMEDTUPLE = {"_replace", "_fields", "_asdict", "_make", "_field_defaults"}
#: another library's attributes that helpers/ also sets, spelled with a leading underscore by that library
#: (transformers' config names its attention implementation `_attn_implementation`)
THIRD_PARTY = {"_attn_implementation"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined(tree: ast.AST) -> set[str]:
    """The names a module defines or assigns anywhere (functions, classes, methods, attributes, variables)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


def crossings(sources: dict[str, str], package: str = "helpers") -> list[str]:
    """Where a private name crosses a module among `sources` ({path: text}): imported from a `package` module,
    exported in `__all__`, or read on an object when the module does not define it and a module of `package`
    does. One line each: 'path:line: what'."""
    trees = {p: ast.parse(t) for p, t in sources.items()}
    own = {p: defined(t) for p, t in trees.items()}
    ours = set().union(*(names for p, names in own.items() if p.startswith(f"{package}/")))
    out = []
    for path, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0] == package):
                out += [f"{path}:{n.lineno}: imports {a.name}" for a in n.names if _private(a.name)]
            elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
                out += [f"{path}:{n.lineno}: exports {e.value}" for e in getattr(n.value, "elts", [])
                        if isinstance(e, ast.Constant) and _private(str(e.value))]
            elif (isinstance(n, ast.Attribute) and _private(n.attr) and n.attr not in NAMEDTUPLE | THIRD_PARTY
                  and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
                  and n.attr not in own[path] and n.attr in ours):
                out.append(f"{path}:{n.lineno}: reads {ast.unparse(n.value)}.{n.attr}")
    return out


def test_the_rule_finds_a_planted_crossing():
    planted = {
        "helpers/a.py": "def _lr(x):\n    return x\n\nclass R:\n    def _measured(self):\n        return self._lr\n",
        "helpers/b.py": ("from .a import _lr, R\n__all__ = ['_lr', 'R']\n\n"
                         "def f(res):\n    return res._measured(), res._replace(), res._local\n\n"
                         "def g(res):\n    res._local = 1\n"),
        "scripts/c.py": "import torch\nfrom helpers.a import _lr\nx = torch._C\n",
    }
    found = crossings(planted)
    assert sorted(line.split(": ", 1)[1] for line in found) == sorted(
        ["imports _lr", "exports _lr", "reads res._measured", "imports _lr"]), found
    assert any(line.startswith("scripts/c.py:2:") for line in found)
    # a module's own private names, namedtuple's API and another library's privates are no crossing
    assert not crossings({"helpers/a.py": planted["helpers/a.py"], "scripts/t.py": "import torch\nx = torch._C\n"})


def test_no_private_name_crosses_a_module_of_helpers_or_scripts():
    sources = {str(p.relative_to(ROOT)): p.read_text() for d in ("helpers", "scripts")
               for p in sorted((ROOT / d).rglob("*.py"))}
    found = crossings(sources)
    assert not found, "private names used outside their module (make them public, or move the call):\n" + "\n".join(
        found)
