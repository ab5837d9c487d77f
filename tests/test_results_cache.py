"""The results cache survives faults: a results file is written atomically, so a writer killed
mid-write leaves the old file intact; a truncated or corrupt file gives one clear error naming the file and
the command that makes it again."""

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from helpers.machinery import results
from helpers.machinery.runtime import REPO_ROOT


def test_a_truncated_committed_result_names_the_file_and_the_command(tmp_path):
    committed = next((REPO_ROOT / "results" / "drift" / "book").glob("*.json"))
    folder = tmp_path / "results" / "drift" / "book"
    folder.mkdir(parents=True)
    broken = folder / committed.name
    broken.write_bytes(committed.read_bytes()[: len(committed.read_bytes()) // 2])
    with pytest.raises(results.CorruptResults) as err:
        results.load_results(broken)
    msg = str(err.value)
    assert str(broken) in msg and "make rerun CHAPTER=drift SCALE=book" in msg and "JSONDecodeError" in msg
    broken.write_text('{"name": "x"}')
    with pytest.raises(results.CorruptResults, match="no 'results' entry"):
        results.load_results(broken)
    shutil.copy(committed, broken)
    assert results.load_results(broken)["results"]


def test_a_writer_killed_mid_write_leaves_the_old_file_intact(tmp_path):
    target = tmp_path / "run.json"
    target.write_text(json.dumps({"results": {"old": 1}}))
    # the writer has written its temporary file and is stopped before the rename: killed there
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from helpers.machinery import results
        def stall(*a, **k):
            print("written", flush=True)
            time.sleep(60)
        os.replace = stall
        results.write_atomic({str(target)!r}, '{{"results": {{"new": ' + "1" * 1_000_000 + '}}}}')
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "written"
    proc.kill()
    proc.wait()
    assert results.load_results(target)["results"] == {"old": 1}
    results.write_atomic(target, json.dumps({"results": {"new": 2}}))
    assert results.load_results(target)["results"] == {"new": 2}


def test_save_results_writes_the_key_with_the_record(tmp_path):
    path = results.save_results("r", {"a": 1}, {"seed": 0, "scale": "book"}, tmp_path, key={"k": 1})
    rec = json.loads(path.read_text())
    assert rec["key"] == {"k": 1} and rec["results"] == {"a": 1} and list(rec)[-1] == "key"


def test_jsonable_turns_every_kind_the_results_hold_into_plain_json():
    import dataclasses
    import math

    import numpy as np
    import torch

    from helpers.machinery.results import Result, jsonable

    @dataclasses.dataclass
    class Inner:
        xs: tuple = (1, 2.5)

    @dataclasses.dataclass
    class Outer(Result):
        a: object = None
        inner: Inner = dataclasses.field(default_factory=Inner)

    assert jsonable(float("nan")) is None and jsonable(np.float32(1.5)) == 1.5 and type(jsonable(np.int64(3))) is int
    assert jsonable([float("inf"), -math.inf]) == [1e308, -1e308]
    assert jsonable(np.array([1.0, np.nan, np.inf])) == [1.0, None, 1e308]
    assert jsonable(np.array([[1, 2]])) == [[1, 2]] and jsonable(np.array(np.nan)) is None
    assert jsonable(torch.tensor([1.5, float("nan")], dtype=torch.bfloat16)) == [1.5, None]
    assert jsonable(torch.tensor([True])) == [True] and jsonable({1: (2, [np.float32(0.25)])}) == {"1": [2, [0.25]]}
    # a Result is its fields, nested dataclasses and tuples included; what it writes reads back equal
    out = Outer(a={"k": np.arange(3.0), "n": float("nan")}).to_json()
    assert out == {"a": {"k": [0.0, 1.0, 2.0], "n": None}, "inner": {"xs": [1, 2.5]}}
    assert json.loads(json.dumps(out)) == out


def test_a_stored_record_reads_each_field_as_its_annotation_says_and_writes_back_the_stored_layout():
    """`StoredRecord.of`: a field typed as a record, a `Band` or a container of them is converted item by item; a
    number, a string or a typed dict is kept as stored; keys it does not name stay in `other`; `to_json` gives back
    the stored dict, keys in their stored order."""
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Leaf(results.StoredRecord):
        n: int = 0
        other: results.Unread = field(default_factory=dict)
        layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @dataclass(frozen=True)
    class Node(results.StoredRecord):
        CONTEXT = ("name",)
        name: str
        bands: dict[str, dict[str, results.Band]] = field(default_factory=dict)
        leaves: tuple[Leaf, ...] = ()
        maybe: results.Band | None = None
        plain: dict[str, list[float]] = field(default_factory=dict)
        other: results.Unread = field(default_factory=dict)
        layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    stored = {"extra": {"x": [1]}, "leaves": [{"n": 3, "kept": True}], "bands": {"a": {"m": [1.0, 0.5, 1.5]}},
              "maybe": None, "plain": {"a": [1.0, 2.0]}}
    node = Node.of(stored, name="n")
    assert node.bands["a"]["m"] == results.Band(1.0, 0.5, 1.5) and type(node.bands["a"]["m"]) is results.Band
    assert node.leaves == (Leaf(n=3, other={"kept": True}),) and node.maybe is None
    assert node.plain is stored["plain"] and node.other == {"extra": {"x": [1]}} and node.name == "n"
    assert node.to_json() == stored and list(node.to_json()) == list(stored)
    assert json.loads(json.dumps(Node.of(json.loads(json.dumps(node.to_json())), name="n").to_json())) == stored
    assert Node.of({"maybe": [0.0, -1.0, 1.0]}, name="m").maybe.low == -1.0
