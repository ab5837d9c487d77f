"""The book's findings page: the papers' claims (`data/claims/<paper>.yaml`) and every chapter's findings,
collected from the chapters' own Results, each claim judged by the one rule of `core.findings.judge`.

`collect(scale)` runs each chapter's `run(Params.resolve(scale))` — at `book` scale that reads the committed
heavy runs back (about a minute for all chapters) — and returns the `Finding` records each Result computes,
in the book's chapter order. Nothing is typed here: a finding's number and verdict come from its chapter.

Under the test suite (`TOKUNI_RESULTS_SINCE` set by the nbval plugin to the session's start) a chapter's
Result that its own notebook saved during this session, with the same parameters, is read back instead of
running the chapter a second time.

**The findings as data.** `Collected.to_dataset()` turns the same collection the page shows into plain data:
one record per claim (the registry's claims in the papers' order, then the book's own questions), each with its
verdict and its tests (deciding, other in-scope, out of scope, controls) with their numbers, the command that
reruns each and the commit; `write_dataset(col, folder)` writes it as `findings.json` (described by
`findings.schema.json`, JSON Schema draft 2020-12, written beside it) and `findings.csv` (one row per test, the
claim's columns repeated on each; a claim no test meets has one row with empty test columns).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from ..core.findings import (
    INCONCLUSIVE,
    NOT_DETECTED,
    NOT_TESTABLE,
    PAPERS,
    VERDICTS,
    Claim,
    Finding,
    Headline,
    Judged,
    correct,
    count_claims,
    count_verdicts,
    headlines,
    in_family,
    in_scale_family,
    judge,
)
from ..machinery import runtime
from ..machinery.results import jsonable, write_atomic

#: the claims registry: one YAML file per paper, the claims in the paper's order
CLAIMS_DIR = runtime.REPO_ROOT / "data" / "claims"
#: the JSON Schema (draft 2020-12) of `Collected.to_dataset()`, shipped with the package
SCHEMA_PATH = Path(__file__).with_name("findings.schema.json")
#: where the book build writes the dataset (`make book` copies it to the site's root)
DATASET_DIR = runtime.REPO_ROOT / "_build" / "findings"
#: the version of the dataset's layout; the schema's `format` holds the same number
DATASET_FORMAT = 1
#: a test's part in its claim's verdict
ROLES = ("deciding", "other", "out of scope", "control")


def claims(paper: str | None = None) -> list[Claim]:
    """Every claim of the three papers (or of `paper`), in the papers' order, from `data/claims/<paper>.yaml`."""
    out = []
    for p in ([paper] if paper else list(PAPERS)):
        path = CLAIMS_DIR / f"{p}.yaml"
        if not path.is_file():
            raise FileNotFoundError(f"the claims of {p} are listed in {path.relative_to(runtime.REPO_ROOT)}")
        for rec in yaml.safe_load(path.read_text()) or []:
            out.append(Claim(paper=p, **{k: (v if isinstance(v, bool) else tuple(map(str, v)) if isinstance(v, list)
                                             else str(v)) for k, v in rec.items()}))
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return out


def chapter_order() -> list[str]:
    """The chapters with an experiment, in the order of the book's table of contents (`_toc.yml`)."""
    from . import CHAPTERS

    toc = yaml.safe_load((runtime.REPO_ROOT / "_toc.yml").read_text())
    files = [Path(c["file"]).stem for part in toc.get("parts", [toc]) for c in part.get("chapters", [])]
    return [c for c in files if c in CHAPTERS] + [c for c in CHAPTERS if c not in files]


def _saved(module, p) -> object | None:
    """The Result this session's notebook of the chapter saved with the same parameters, if any."""
    since = os.environ.get("TOKUNI_RESULTS_SINCE")
    if not since:
        return None
    path = runtime.REPO_ROOT / "_build" / "results" / p.CHAPTER / p.scale / f"{p.CHAPTER}.json"
    if not path.is_file() or path.stat().st_mtime < float(since):
        return None
    rec = json.loads(path.read_text())
    return module.Result.from_json(rec["results"]) if rec.get("params") == jsonable(p) else None


@dataclass
class Collected:
    """Every chapter's findings at one scale, and the chapters that do not yet give findings; `chapters`: the
    chapters collected, in order."""

    scale: str
    findings: list[Finding] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    claims: list[Claim] = field(default_factory=list)
    chapters: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        """{paper: {verdict: count}} over the findings (every kind; the page counts claims: `claim_counts`)."""
        return count_verdicts(self.findings)

    def judged(self, paper: str | None = None) -> list[Judged]:
        """Every claim (of `paper`) with its verdict, in the papers' order."""
        return [judge(c, self.findings) for c in self.claims if paper in (None, c.paper)]

    def claim_counts(self) -> dict[str, dict]:
        """Per paper: claims, tested at the paper's setting, at a reduced one, not at all, and the verdicts."""
        return count_claims(self.judged())

    def family_sizes(self) -> dict[str, int]:
        """{paper: how many tests its family holds} (`core.findings.in_family`)."""
        return {p: max((f.family_size for f in self.findings if f.paper == p), default=0) for p in PAPERS}

    def family_levels(self) -> tuple[float, float] | None:
        """The lowest and highest level the family correction reads an interval at; None without a family."""
        levels = [f.family_level for f in self.findings if f.family_level is not None]
        return (min(levels), max(levels)) if levels else None

    def uncorrected_counts(self) -> dict[str, dict]:
        """`claim_counts` as the uncorrected 95 % intervals would give them (no family correction): a sensitivity
        reading the page shows beside the verdicts, never the verdicts."""
        plain = [replace(f, family_level=None, family_size=0) for f in self.findings]
        return count_claims([judge(c, plain) for c in self.claims])

    def choice_free_counts(self) -> dict[str, dict]:
        """`claim_counts` as they would be if every out-of-scope test counted and no registry entry named a
        deciding test: the choices made after the runs (`scope`, `decides`) undone, so a reader sees whether any
        of them decides a count."""
        inside = [replace(f, out_of_scope="") for f in self.findings]
        claims_ = [replace(c, decides="", decides_why="") for c in self.claims]
        return count_claims([judge(c, inside) for c in claims_])

    def headlines(self, paper: str | None = None) -> list[Headline]:
        """The headline claims (of `paper`) with their verdicts at the book's and at the paper's setting."""
        return headlines(self.claims, self.findings, paper)

    def extensions(self) -> list[Finding]:
        """The book's own questions, counted on their own."""
        return [f for f in self.findings if f.kind == "extension"]

    def controls(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "control"]

    def orphans(self) -> list[Finding]:
        """Findings of kind claim or control whose claim is not in the registry (a test fails on any)."""
        ids = {c.id for c in self.claims}
        return [f for f in self.findings if f.kind != "extension" and f.claim_id not in ids]

    def untestable(self) -> list[Finding]:
        """The findings that need a GPU or the hub, each with its command."""
        return [f for f in self.findings if f.effect is None]

    def to_dataset(self, commit: str | None = None, generated_at: str | None = None) -> dict[str, Any]:
        """The collection as plain data (JSON-able, described by `SCHEMA_PATH`): the scale, the book's version,
        the UTC time, the commit (`git_commit()` unless given), the chapters collected, the claim counts per paper
        (`claim_counts`) and those of the book's own questions, and `claims`: one record per registry claim in
        the papers' order, then one per book's own question (`kind` "extension"), each with its verdict, setting
        and tests. A test's `command` reruns it: the finding's own, else `make rerun CHAPTER=<its chapter>
        SCALE=<scale>`. Numbers that are not finite (a single seed's interval) are null."""
        import helpers  # the package's one version (pyproject reads it too)

        commit = git_commit() if commit is None else commit
        records = [_claim_record(j, self.scale, commit) for j in self.judged()]
        records += [_extension_record(f, self.scale, commit) for f in self.extensions()]
        return {
            "format": DATASET_FORMAT,
            "book_version": helpers.__version__,
            "scale": self.scale,
            "generated_at": generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit or None,
            "chapters": list(self.chapters),
            "pending": list(self.pending),
            "papers": dict(PAPERS),
            "counts": self.claim_counts(),
            "extension_counts": count_verdicts(self.extensions()),
            "claims": records,
            "headlines": [{"paper": h.claim.paper, "claim_id": h.claim.id, "verdict": h.verdict,
                           "paper_scale_verdict": h.paper_scale_verdict, "judged_from": list(h.claim.judged_from),
                           "basis": h.basis()} for h in self.headlines()],
        }


def git_commit() -> str | None:
    """The book's commit (`git rev-parse HEAD`), with "-dirty" when tracked files have uncommitted changes; None
    outside a git checkout."""
    from ..diagnose.run import git_commit as _git

    g = _git()
    return None if not g["commit"] else g["commit"] + ("-dirty" if g["dirty"] else "")


def _number(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _interval(iv) -> dict[str, Any]:
    if iv is None:
        return {"estimate": None, "low": None, "high": None, "method": None, "n": None, "level": None}
    return {"estimate": _number(iv.estimate), "low": _number(iv.low), "high": _number(iv.high),
            "method": iv.method, "n": int(iv.n), "level": float(iv.level)}


def _test_record(f: Finding, role: str, scale: str) -> dict[str, Any]:
    """One test as plain data: what it measured, its interval, what the claim predicts, its verdict, the command
    that reruns it."""
    page = f"book/{f.chapter}.html" + (f"#{f.section}" if f.section else "") if f.chapter else None
    return {
        "key": f.key, "label": f.name(), "role": role, "kind": f.kind, "chapter": f.chapter or None,
        "where": f.where, "claim": f.claim, "measured": f.measured, "quantity": f.quantity, "scale": f.scale,
        **_interval(f.effect), "n": f.n_units, "unit": f.unit_name, "resamples": f.resamples,
        "effect_text": f.effect_text(), "p_value": _number(f.p_value), "family_size": f.family_size,
        "family_level": _number(f.family_level), "corrected_low": _number(f.read_effect.low) if f.effect else None,
        "corrected_high": _number(f.read_effect.high) if f.effect else None,
        "uncorrected_verdict": f.uncorrected_verdict, "smallest": _number(f.smallest),
        "alternatives": [{"name": n, **_interval(iv), "verdict": v}
                         for (n, iv), (_, v) in zip(f.alternatives, f.alternative_verdicts(), strict=True)],
        "direction": f.direction, "reference": _number(f.reference), "reference_label": f.reference_label,
        "paper_value": _number(f.paper_value), "margin": _number(f.margin), "tolerance": _number(f.tolerance),
        "verdict": f.verdict, "verdict_text": f.verdict_text(), "setting": f.setting, "reduced": f.reduced,
        "excludes": f.excludes() if f.verdict in (NOT_DETECTED, INCONCLUSIVE) else "",
        "flags": f.flags(), "members": list(f.members), "out_of_scope": f.out_of_scope, "standin": f.standin,
        "caveat": f.caveat, "size_word": f.size_word, "cannot_test": f.cannot_test, "needs": f.needs,
        "distance": [{"what": d.what, "ours": _number(d.ours), "paper": _number(d.paper), "unit": d.unit}
                     for d in f.distance],
        "paper_scale_verdict": f.paper_scale_verdict, "paper_scale_text": f.paper_scale_text(),
        "paper_scale": _scale_record(f),
        "command": f.command or (f"make rerun CHAPTER={f.chapter} SCALE={scale}" if f.chapter else None),
        "page": page,
    }


def _scale_record(f: Finding) -> dict[str, Any] | None:
    """A reduced test's trend to the paper's setting as plain data (None without one): the axis, its points, the
    paper's point, the band and each form's interval there, and how far along the axis the band decides."""
    t = f.at_scale
    if t is None:
        return None
    return {"axis": t.axis, "x": list(t.x), "y": list(t.y), "units": t.units, "target": t.target,
            "points": t.points, "span": _number(t.span), **_interval(t.band), "why": t.why,
            "forms": [{"form": ff.form, **_interval(ff.at_target)} for ff in t.fits],
            "decides_to": _number(f.decides_to()), "family_size": f.scale_family_size}


def _claim_record(j: Judged, scale: str, commit: str | None) -> dict[str, Any]:
    c = j.claim
    tests = {"deciding": [_test_record(f, "deciding", scale) for f in j.deciding],
             "others": [_test_record(f, "other", scale) for f in j.others],
             "out_of_scope": [_test_record(f, "out of scope", scale) for f in j.out_of_scope],
             "controls": [_test_record(f, "control", scale) for f in j.controls]}
    first = (tests["deciding"] or tests["others"] or [{}])[0]
    return {
        "paper": c.paper, "claim_id": c.id, "kind": "claim", "where": c.where, "section": c.section,
        "claim": c.claim, "predicate": c.predicate, "paper_value": c.paper_value, "scope": c.scope,
        "class_of": c.class_of, "setting": j.setting, "verdict": j.verdict, "verdict_text": j.verdict_text(),
        "paper_scale_verdict": j.paper_scale_verdict, "paper_scale_text": j.paper_scale_text(),
        "underlying": j.underlying, "decides": c.decides, "decides_why": c.decides_why, "untested": c.untested,
        "command": c.command or first.get("command") or None, "commit": commit or None, **tests,
    }


def _extension_record(f: Finding, scale: str, commit: str | None) -> dict[str, Any]:
    """A book's own question as a claim record of kind "extension": its one test decides unless it needs a GPU
    or the hub."""
    test = _test_record(f, "deciding", scale)
    gives = f.verdict != NOT_TESTABLE
    if not gives:
        test["role"] = "other"
    return {
        "paper": f.paper, "claim_id": f.key, "kind": "extension", "where": f.where, "section": "",
        "claim": f.claim, "predicate": "", "paper_value": "", "scope": "", "class_of": "",
        "setting": f.setting if gives else "untested", "verdict": f.verdict,
        "verdict_text": f.verdict_text(), "paper_scale_verdict": f.paper_scale_verdict,
        "paper_scale_text": f.paper_scale_text(), "underlying": "", "decides": "", "decides_why": "", "untested": "",
        "command": test["command"], "commit": commit or None,
        "deciding": [test] if gives else [], "others": [] if gives else [test], "out_of_scope": [], "controls": [],
    }


#: the flat CSV's columns: the claim's (repeated on each of its tests), then the test's (prefixed `test_`)
CLAIM_COLUMNS = ("paper", "claim_id", "kind", "where", "claim", "paper_value", "scope", "setting", "verdict",
                 "verdict_text", "paper_scale_verdict", "command", "commit", "scale")
TEST_COLUMNS = ("role", "key", "label", "chapter", "kind", "estimate", "low", "high", "method", "n", "unit",
                "resamples", "level", "p_value", "family_size", "family_level", "corrected_low", "corrected_high",
                "uncorrected_verdict",
                "paper_value", "reference", "direction", "margin", "tolerance", "verdict", "verdict_text",
                "setting", "reduced", "paper_scale_verdict", "paper_scale_text", "distance", "quantity", "measured",
                "out_of_scope", "alternatives", "flags", "command", "page")
CSV_COLUMNS = CLAIM_COLUMNS + tuple(f"test_{c}" for c in TEST_COLUMNS)


def dataset_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The flat table of `to_dataset()`'s data: one row per test of a claim (deciding, other, out of scope,
    control, in that order), the claim's columns repeated on each; a claim with no test is one row whose test
    columns are empty. Lists are joined with "; " (an alternative procedure as "name: estimate [low, high]
    verdict")."""
    def cell(test: dict[str, Any], col: str) -> Any:
        v = test.get(col)
        if col == "alternatives":
            return "; ".join(f"{a['name']}: {a['estimate']} [{a['low']}, {a['high']}] {a['verdict']}" for a in v)
        if col == "flags":
            return "; ".join(v)
        if col == "distance":
            return "; ".join(f"{d['what']}: {d['ours']} of {d['paper']}" for d in v)
        return v

    rows = []
    for rec in data["claims"]:
        head = {c: (data["scale"] if c == "scale" else rec[c]) for c in CLAIM_COLUMNS}
        tests = [*rec["deciding"], *rec["others"], *rec["out_of_scope"], *rec["controls"]]
        for t in tests or [{}]:
            rows.append({**head, **{f"test_{c}": (cell(t, c) if t else None) for c in TEST_COLUMNS}})
    return rows


def dataset_csv(data: dict[str, Any]) -> str:
    """`dataset_rows(data)` as CSV text (a header of `CSV_COLUMNS`; an empty cell for null)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in dataset_rows(data):
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def dataset_schema() -> dict[str, Any]:
    """The JSON Schema of `Collected.to_dataset()`."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def write_dataset(col: Collected, folder: str | os.PathLike | None = None, **to_dataset: Any) -> dict[str, Path]:
    """Write `col.to_dataset()` into `folder` (default `DATASET_DIR`) as `findings.json` and `findings.csv`, with
    the schema beside them (`findings.schema.json`); each file written atomically, readable by all. Returns
    {"json", "csv", "schema"}: their paths."""
    out = Path(folder) if folder is not None else DATASET_DIR
    out.mkdir(parents=True, exist_ok=True)
    data = col.to_dataset(**to_dataset)
    paths = {"json": out / "findings.json", "csv": out / "findings.csv", "schema": out / SCHEMA_PATH.name}
    write_atomic(paths["json"], json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    write_atomic(paths["csv"], dataset_csv(data))
    if paths["schema"].resolve() != SCHEMA_PATH.resolve():
        write_atomic(paths["schema"], SCHEMA_PATH.read_text(encoding="utf-8"))
    for path in paths.values():
        path.chmod(0o644)                  # published files: readable by the web server, as the build's own are
    return paths


#: the book's family of tests at `book` scale, as {paper: {finding key: p-value}}: what a chapter's own findings
#: table reads to correct its tests within the whole paper's family without collecting every chapter (written and
#: checked with the golden file: `scripts/golden_findings.py`)
FAMILY_PATH = runtime.REPO_ROOT / "results" / "findings-family.json"


def family_p_values(findings) -> dict[str, dict[str, float]]:
    """{paper: {key: p-value}} of the findings that belong to their paper's family (`core.findings.in_family`)."""
    out: dict[str, dict[str, float]] = {p: {} for p in PAPERS}
    for f in findings:
        if in_family(f):
            out[f.paper][f.key] = float(f"{f.p_value:.6g}")
    return out


def scale_family(findings) -> dict[str, list[str]]:
    """{paper: [key]} of the findings in their paper's family of trends (`core.findings.in_scale_family`)."""
    return {p: sorted(f.key for f in findings if f.paper == p and in_scale_family(f)) for p in PAPERS}


def book_family() -> dict[str, dict[str, float]]:
    """The committed family (`FAMILY_PATH`); empty when it is not there."""
    if not FAMILY_PATH.is_file():
        return {}
    return json.loads(FAMILY_PATH.read_text(encoding="utf-8"))["p_values"]


def book_scale_family() -> dict[str, list[str]]:
    """The committed family of trends (`FAMILY_PATH`); empty when it is not there."""
    if not FAMILY_PATH.is_file():
        return {}
    return json.loads(FAMILY_PATH.read_text(encoding="utf-8")).get("trends", {})


def corrected(findings) -> list[Finding]:
    """A chapter's findings corrected within their papers' whole families: the chapter's own tests with their own
    p-values and trends, the other chapters' from the committed families (`book_family`, `book_scale_family`), so a
    chapter's table gives the verdicts the findings page gives."""
    mine = {f.key for f in findings}
    others = {p: {k: v for k, v in ps.items() if k not in mine} for p, ps in book_family().items()}
    trends = {p: [k for k in ks if k not in mine] for p, ks in book_scale_family().items()}
    return correct(list(findings), others=others, scale_others=trends)


def collect(scale: str = "book", chapters: list[str] | None = None) -> Collected:
    """Run (or read back) every chapter at `scale` and collect its findings, each paper's family corrected
    (`core.findings.correct`: over the collected findings when every chapter is collected; within the committed
    family otherwise)."""
    from importlib import import_module

    out = Collected(scale=scale, claims=claims(), chapters=list(chapters or chapter_order()))
    for ch in out.chapters:
        module = import_module(f"{__package__}.{ch}")
        p = module.Params.resolve(scale)
        res = _saved(module, p) or module.run(p)
        if not hasattr(res, "findings"):
            out.pending.append(ch)
            continue
        for f in res.findings():
            if f.chapter != ch:
                raise ValueError(f"{ch}: finding {f.key!r} names chapter {f.chapter!r}")
            out.findings.append(f)
    keys = [f.key for f in out.findings]
    if len(set(keys)) != len(keys):
        raise ValueError(f"finding keys repeat: {sorted(k for k in keys if keys.count(k) > 1)}")
    out.findings = correct(out.findings) if chapters is None else corrected(out.findings)
    return out


__all__ = ["collect", "claims", "chapter_order", "Collected", "PAPERS", "VERDICTS", "CLAIMS_DIR", "write_dataset",
           "dataset_rows", "dataset_csv", "dataset_schema", "git_commit", "SCHEMA_PATH", "DATASET_DIR", "ROLES",
           "CSV_COLUMNS"]
