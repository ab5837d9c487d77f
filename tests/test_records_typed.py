"""The chapter records are typed to the leaf: no field of a chapter's dataclasses is a bare `dict`, `list`, `tuple`
or `Any` (the queries-and-keys, STS and deep-LM chapters), and every value the committed runs give them has the
type its annotation says, down to the numbers (a `Band` where `[estimate, low, high]` is read, a typed dict's keys
and nothing else)."""

import ast
import dataclasses
import types
import typing
from pathlib import Path

import pytest

from helpers.experiments import qk, sts
from helpers.machinery.results import JSON, StoredRecord

EXPERIMENTS = Path(__file__).resolve().parent.parent / "helpers" / "experiments"
BARE = {"dict", "list", "tuple", "Any", "dict[str, Any]"}


def bare_fields(root: Path) -> list[str]:
    """`file:line Class.field` of every dataclass field annotated with a bare container or `Any`."""
    out = []
    for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                out += [f"{path.name}:{s.lineno} {node.name}.{s.target.id}" for s in node.body
                        if isinstance(s, ast.AnnAssign) and ast.unparse(s.annotation).strip("'\"") in BARE]
    return out


@pytest.mark.parametrize("chapter", ["qk", "sts", "deeplm"])
def test_no_bare_field(chapter):
    assert bare_fields(EXPERIMENTS / chapter) == []


def test_the_count_sees_a_bare_field(tmp_path):
    src = "from dataclasses import dataclass\n@dataclass\nclass R:\n    a: dict\n    b: dict[str, float]\n    c: list\n"
    (tmp_path / "m.py").write_text(src)
    assert bare_fields(tmp_path) == ["m.py:4 R.a", "m.py:6 R.c"]


def mistyped(tp, value, where: str = "") -> list[str]:
    """Where `value` is not of type `tp` (a typed dict: its keys too; a float takes an int; JSON: anything)."""
    if tp is JSON or tp is typing.Any or isinstance(tp, typing.ForwardRef):     # JSON within JSON: anything
        return []
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        tries = [mistyped(a, value, where) for a in args]
        return [] if any(not t for t in tries) else [f"{where}: {type(value).__name__} is none of {tp}"]
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        if not isinstance(value, dict) or set(value) - set(hints) or (value and tp.__required_keys__ - set(value)):
            return [f"{where}: {value!r:.80} is not a {tp.__name__}"]
        return [e for k, v in value.items() for e in mistyped(hints[k], v, f"{where}.{k}")]
    if isinstance(tp, type) and issubclass(tp, StoredRecord):
        if not isinstance(value, tp):
            return [f"{where}: not a {tp.__name__}"]
        hints = typing.get_type_hints(tp, localns={"JSON": JSON})
        return [e for f in dataclasses.fields(tp) for e in mistyped(hints[f.name], getattr(value, f.name),
                                                                   f"{where}.{f.name}")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not a dict"]
        return [e for k, v in value.items() for e in mistyped(args[1], v, f"{where}[{k}]")]
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            return [f"{where}: {type(value).__name__} is not a list"]
        return [e for i, v in enumerate(value) for e in mistyped(args[0], v, f"{where}[{i}]")][:5]
    if tp is float:
        return [] if isinstance(value, float | int) and not isinstance(value, bool) else [f"{where}: {value!r}"]
    if isinstance(tp, type) and hasattr(tp, "_fields"):                    # a named tuple (`Band`)
        return [] if type(value) is tp else [f"{where}: {type(value).__name__} is not a {tp.__name__}"]
    return [] if isinstance(value, tp) else [f"{where}: {type(value).__name__} is not a {tp.__name__}"]


def test_the_check_sees_a_mistyped_value():
    assert mistyped(dict[str, list[int]], {"a": [1, 2.5]}) == ["[a][1]: float is not a int"]
    assert mistyped(sts.records.Settings, {"halves": 1, "splits": 2, "split_boot": 3, "x": 4})
    assert mistyped(sts.Reading, sts.Reading.of({"intervals": {"q": {"m": [1.0, 0.0, 2.0]}}}, encoder="m",
                                                pooling="q", per_set=0, sets=(), bootstrap=1)) == []
    bad = dataclasses.replace(sts.Reading.of({}, encoder="m", pooling="q", per_set=0, sets=(), bootstrap=1),
                              intervals={"q": {"m": [1.0, 0.0, 2.0]}})
    assert mistyped(sts.Reading, bad) == [".intervals[q][m]: list is not a Band"]


@pytest.mark.parametrize("module", [sts, qk], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_the_committed_runs_have_the_types_their_records_say(module, monkeypatch):
    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")
    res = module.run(module.Params.resolve("book"))
    hints = typing.get_type_hints(type(res), localns={"JSON": JSON})
    assert [e for f in dataclasses.fields(res) for e in mistyped(hints[f.name], getattr(res, f.name), f.name)] == []
