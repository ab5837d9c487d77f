"""The book's findings page: the papers' claims (`data/claims/<paper>.yaml`) and every chapter's findings,
collected from the chapters' own Results, each claim judged by the one rule of `core.findings.judge`.

`collect(scale)` runs each chapter's `run(Params.resolve(scale))` — at `book` scale that reads the committed
heavy runs back (about a minute for all chapters) — and returns the `Finding` records each Result computes,
in the book's chapter order. Nothing is typed here: a finding's number and verdict come from its chapter.

Under the test suite (`TOKUNI_RESULTS_SINCE` set by the nbval plugin to the session's start) a chapter's
Result that its own notebook saved during this session, with the same parameters, is read back instead of
running the chapter a second time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..book import runtime
from ..book.results import _jsonable
from ..core.findings import PAPERS, VERDICTS, Claim, Finding, Judged, count_claims, count_verdicts, judge

#: the claims registry: one YAML file per paper, the claims in the paper's order
CLAIMS_DIR = runtime.REPO_ROOT / "data" / "claims"


def claims(paper: str | None = None) -> list[Claim]:
    """Every claim of the three papers (or of `paper`), in the papers' order, from `data/claims/<paper>.yaml`."""
    out = []
    for p in ([paper] if paper else list(PAPERS)):
        path = CLAIMS_DIR / f"{p}.yaml"
        if not path.is_file():
            raise FileNotFoundError(f"the claims of {p} are listed in {path.relative_to(runtime.REPO_ROOT)}")
        for rec in yaml.safe_load(path.read_text()) or []:
            out.append(Claim(paper=p, **{k: str(v) for k, v in rec.items()}))
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
    return module.Result.from_json(rec["results"]) if rec.get("params") == _jsonable(p) else None


@dataclass
class Collected:
    """Every chapter's findings at one scale, and the chapters that do not yet give findings."""

    scale: str
    findings: list[Finding] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    claims: list[Claim] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        """{paper: {verdict: count}} over the findings (every kind; the page counts claims: `claim_counts`)."""
        return count_verdicts(self.findings)

    def judged(self, paper: str | None = None) -> list[Judged]:
        """Every claim (of `paper`) with its verdict, in the papers' order."""
        return [judge(c, self.findings) for c in self.claims if paper in (None, c.paper)]

    def claim_counts(self) -> dict[str, dict]:
        """Per paper: claims, tested at the paper's setting, at a reduced one, not at all, and the verdicts."""
        return count_claims(self.judged())

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


def collect(scale: str = "book", chapters: list[str] | None = None) -> Collected:
    """Run (or read back) every chapter at `scale` and collect its findings."""
    from importlib import import_module

    out = Collected(scale=scale, claims=claims())
    for ch in chapters or chapter_order():
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
    return out


__all__ = ["collect", "claims", "chapter_order", "Collected", "PAPERS", "VERDICTS", "CLAIMS_DIR"]
