"""A claim of a paper, a finding that tests it, and the verdicts — as data.

A **claim** (`Claim`) is one statement of a paper that a reader would quote: the abstract's, a numbered figure,
table, proposition, or a section's statement, with the paper's number where it gives one and a predicate. The
claims live in `data/claims/<paper>.yaml`, listed once each, in the paper's order; which claims exist is kept
apart from which ones this book tests.

A **finding** (`Finding`) is one test: an effect with its interval, what it predicts, and at which setting it was
run. Each chapter's `Result.findings()` computes its findings from its runs. A finding is of one of three kinds:

* `"claim"` — it tests the paper's claim `claim_id` (several findings may test one claim: one per encoder,
  reading or block type);
* `"control"` — a check of the method (a leakage control, a planted case) shown beside the claim `claim_id`
  it validates, never counted;
* `"extension"` — a question of the book's own, counted on its own.

**The verdict of a finding** (`verdict`), for an effect whose interval is [low, high], a paper's side
(`direction`), a `reference` (zero, a baseline, chance), and the interval measured from the reference:

* **reproduced** — the interval lies wholly on the paper's side of the reference and, where the paper gives a
  size (`paper_value`), covers it;
* **direction only** — on the paper's side, but the interval excludes the paper's size: wholly short of it
  (*smaller*) or wholly beyond it (*larger*) — `size_side` says which;
* **not detected** — the interval covers the reference (then `Finding.excludes` says which effects it rules out);
* **contradicted** — the interval lies wholly on the other side of the reference;
* for a claim that two things are *alike* (`direction="equal"`, with a `margin`): **reproduced** when the
  interval lies inside ±margin, **contradicted** when it lies wholly outside it on one side, **inconclusive**
  otherwise;
* **inconclusive** — no interval to test (a single seed);
* **not testable here** — no effect measured (the run needs a GPU or the hub: `needs`, `command`), or the
  chapter says its run cannot test the claim (`cannot_test`).

An `exact` effect (no sampling: a bound, an identity, a computed constant) is read as the interval
estimate ± `tolerance`, which the finding must state with the reason it has no sampling (`exact_why`); a sample
statistic always has an interval.

**The setting.** `reduced` is empty for a test at the paper's setting (its model, its budget) and otherwise a
short phrase that says how the test falls short of it ("at 1.7 % of the paper's steps", "on MiniLM-L6 in place of
BERT-base"); the phrase is part of the verdict's text (`Finding.verdict_text`), and the counts keep the two
settings apart.

**The verdict of a claim** (`judge`) — one rule: of the claim's findings of kind `"claim"` that give a verdict,
the one closest to the paper's setting decides (a test at the paper's setting before a reduced one; among equals,
the first as its chapter lists it — each chapter lists its closest test first); the others are shown beneath it.
A claim whose findings all need a GPU or the hub is *not testable here*; a claim with no finding is *not tested
here*, with the registry's reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .stats import Interval, t_interval

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_DETECTED = "not detected"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable here"
NOT_TESTED = "not tested here"
#: the verdict vocabulary of a finding, in the order the findings page counts them
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_DETECTED, INCONCLUSIVE, CONTRADICTED, NOT_TESTABLE)
#: a claim's verdicts: a finding's, and "not tested here" for a claim no chapter tests
CLAIM_VERDICTS = (*VERDICTS, NOT_TESTED)
#: the kinds of finding
KINDS = ("claim", "control", "extension")

#: the three papers, by the key a Finding names them with
PAPERS = {
    "yan2022": "Yan et al. 2022 (SoftDecay)",
    "godey2024": "Godey et al. 2024 (anisotropy)",
    "yu2024": "Yu & Zhang 2024 (escalation)",
}

Direction = Literal["above", "below", "equal"]
Kind = Literal["claim", "control", "extension"]


def _bounds(effect: Interval, tolerance: float | None) -> tuple[float, float]:
    if effect.method == "exact":
        tol = float(tolerance or 0.0)
        return effect.estimate - tol, effect.estimate + tol
    return effect.low, effect.high


def verdict(effect: Interval | None, direction: Direction, reference: float = 0.0,
            paper_value: float | None = None, margin: float | None = None,
            tolerance: float | None = None) -> str:
    """The one rule that turns an effect into a verdict (see the module's docstring). `direction`: the
    side of `reference` the paper's claim puts the effect on ("above", "below"), or "equal" for a claim
    that two things are alike within ±`margin`; `tolerance`: the half-width an exact effect is read with."""
    if effect is None:
        return NOT_TESTABLE
    if direction not in ("above", "below", "equal"):
        raise ValueError(f"direction {direction!r}: use 'above', 'below' or 'equal'")
    if effect.method != "exact" and not effect.has_interval:
        return INCONCLUSIVE
    lo, hi = _bounds(effect, tolerance)
    lo, hi = lo - reference, hi - reference
    if direction == "equal":
        if margin is None or margin <= 0:
            raise ValueError("an 'equal' claim needs a positive margin")
        if -margin <= lo and hi <= margin:
            return REPRODUCED
        if lo > margin or hi < -margin:
            return CONTRADICTED
        return INCONCLUSIVE
    sign = 1.0 if direction == "above" else -1.0
    lo, hi = sorted((sign * lo, sign * hi))          # the paper's side is now positive
    if lo > 0:
        if paper_value is not None:
            size = sign * (paper_value - reference)
            if size > 0 and (hi < size or lo > size):
                return DIRECTION_ONLY
        return REPRODUCED
    if hi < 0:
        return CONTRADICTED
    return NOT_DETECTED


def size_side(effect: Interval | None, direction: Direction, reference: float = 0.0,
              paper_value: float | None = None, tolerance: float | None = None) -> str:
    """For a 'direction only' effect: "smaller" when its interval lies wholly short of the paper's size,
    "larger" when wholly beyond it; "" otherwise."""
    if effect is None or paper_value is None or direction == "equal":
        return ""
    if verdict(effect, direction, reference, paper_value, tolerance=tolerance) != DIRECTION_ONLY:
        return ""
    sign = 1.0 if direction == "above" else -1.0
    lo, hi = _bounds(effect, tolerance)
    hi = max(sign * (lo - reference), sign * (hi - reference))
    return "smaller" if hi < sign * (paper_value - reference) else "larger"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, as `data/claims/<paper>.yaml` lists it.

    `id`: a stable id (`yan-table1`); `paper`: a key of `PAPERS`; `where`: the paper's own number ("Table 1",
    "Fig. 6", "Prop. 2.3", "§3.3"); `section`: the paper's section it belongs to, for the page's order;
    `claim`: the claim in one sentence as the paper makes it; `predicate`: what would make it true, precisely (a
    side, a size, or alike within a margin), with the paper's number; `untested`: why no chapter tests it, and
    `command` what would, for a claim no finding attaches to."""

    id: str
    paper: str
    where: str
    claim: str
    predicate: str
    section: str = ""
    paper_value: str = ""
    untested: str = ""
    command: str = ""

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"claim {self.id!r}: paper {self.paper!r} is not one of {sorted(PAPERS)}")
        if not (self.claim and self.predicate and self.where):
            raise ValueError(f"claim {self.id!r} needs where, claim and predicate")


@dataclass(frozen=True)
class Finding:
    """One test of a claim and what our runs say of it.

    `key`: a stable id (`<chapter>-<short name>`); `paper`: a key of `PAPERS`; `where`: the figure, table,
    equation or section ("Fig. 6", "Table 1", "eq. (8)"); `claim`: what this test checks, in one sentence;
    `claim_id`: the registry's claim it tests (kind "claim") or validates (kind "control"); `kind`: "claim",
    "control" or "extension"; `measured`: what we ran (model, data, steps, seeds); `quantity`: what `effect` is,
    with its unit ("de-escalated − pre-norm final loss, nats"); `effect`: the Interval (None: not testable here);
    `direction`, `reference`, `paper_value`, `margin`: what the claim predicts, for `verdict`; `tolerance`,
    `exact_why`: for an exact effect, the half-width it is read with and why it has no sampling;
    `reference_label`: how to name the reference ("0", "chance 0.10", "the paper's 0.81"); `reduced`: "" at the
    paper's setting, else how the test falls short of it ("at 2 % of the paper's steps"); `cannot_test`: the
    chapter's reason its run cannot test the claim (then no verdict); `scale`: the run's scale against the
    paper's, in full; `section`: the label of the chapter section that shows it; `needs`, `command`: for a claim
    not testable here."""

    key: str
    paper: str
    where: str
    claim: str
    measured: str
    quantity: str
    effect: Interval | None
    direction: Direction = "above"
    reference: float = 0.0
    reference_label: str = "0"
    paper_value: float | None = None
    margin: float | None = None
    scale: str = ""
    section: str = ""
    needs: str = ""
    command: str = ""
    chapter: str = ""
    digits: int = 3
    claim_id: str = ""
    kind: Kind = "claim"
    reduced: str = ""
    tolerance: float | None = None
    exact_why: str = ""
    cannot_test: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"finding {self.key!r}: paper {self.paper!r} is not one of {sorted(PAPERS)}")
        if self.kind not in KINDS:
            raise ValueError(f"finding {self.key!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind != "extension" and not self.claim_id:
            raise ValueError(f"finding {self.key!r}: a {self.kind} names the claim it tests (claim_id)")
        if self.effect is None and not self.command:
            raise ValueError(f"finding {self.key!r} has no effect: name the command (and preset) that tests it")
        if self.effect is not None and self.effect.method == "exact":
            if self.tolerance is None or self.tolerance < 0 or not self.exact_why:
                raise ValueError(f"finding {self.key!r}: an exact effect states its tolerance and why it has no "
                                 "sampling (exact_why); a sample statistic has an interval")
        verdict(self.effect, self.direction, self.reference, self.paper_value, self.margin, self.tolerance)

    @property
    def verdict(self) -> str:
        if self.cannot_test:
            return NOT_TESTABLE
        return verdict(self.effect, self.direction, self.reference, self.paper_value, self.margin, self.tolerance)

    @property
    def setting(self) -> str:
        """"paper" at the paper's setting, "reduced" otherwise."""
        return "reduced" if self.reduced else "paper"

    def size_side(self) -> str:
        """"smaller" or "larger" than the paper's size, for a 'direction only' verdict; "" otherwise."""
        if self.cannot_test:
            return ""
        return size_side(self.effect, self.direction, self.reference, self.paper_value, self.tolerance)

    def verdict_text(self) -> str:
        """The verdict with its setting in the words: 'direction only (larger than the paper's) at 1.7 % of the
        paper's steps'; 'reproduced' at the paper's setting."""
        v = self.verdict
        side = self.size_side()
        text = v + (f" ({side} than the paper's)" if side else "")
        if v == NOT_TESTABLE:
            return text
        return f"{text} {self.reduced}" if self.reduced else text

    def effect_text(self) -> str:
        """The effect as '+0.055 [+0.041, +0.070]', an exact one as '+0.999 (exact, ± 1e-06)' ('—' when not
        testable here)."""
        if self.effect is None:
            return "—"
        if self.effect.method == "exact":
            return f"{self.effect.text(self.digits)} (exact ± {self.tolerance:.2g})"
        return self.effect.text(self.digits)

    def excludes(self) -> str:
        """What the interval rules out, for a 'not detected' or 'inconclusive' reading: 'excludes effects
        below −0.040 and above +0.031' (measured on the effect's own scale); '' otherwise."""
        e = self.effect
        if e is None or not e.has_interval or e.method == "exact":
            return ""
        f = f"{{:+.{self.digits}f}}"
        return f"excludes effects below {f.format(e.low)} and above {f.format(e.high)}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict
        d["verdict_text"] = self.verdict_text()
        return d


@dataclass(frozen=True)
class Judged:
    """A claim with its findings and its verdict (`judge`): `deciding`, the finding that gives the verdict
    (None when no finding gives one); `others`, the claim's other tests; `controls`, the checks of the
    method shown beside it."""

    claim: Claim
    verdict: str
    deciding: Finding | None = None
    others: tuple[Finding, ...] = ()
    controls: tuple[Finding, ...] = ()

    @property
    def setting(self) -> str:
        """"paper", "reduced", or "untested" (no finding gave a verdict)."""
        return self.deciding.setting if self.deciding is not None else "untested"

    def verdict_text(self) -> str:
        if self.deciding is not None:
            return self.deciding.verdict_text()
        return self.verdict

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for f in (self.deciding, *self.others) if f is not None)


def judge(claim: Claim, findings) -> Judged:
    """A claim's verdict from its findings, by the rule of the module's docstring: of the findings of kind
    "claim" that test it and give a verdict, the first at the paper's setting decides, else the first."""
    tests = [f for f in findings if f.kind == "claim" and f.claim_id == claim.id]
    controls = tuple(f for f in findings if f.kind == "control" and f.claim_id == claim.id)
    giving = [f for f in tests if f.verdict != NOT_TESTABLE]
    if not giving:
        return Judged(claim, NOT_TESTABLE if tests else NOT_TESTED, None, tuple(tests), controls)
    deciding = next((f for f in giving if f.setting == "paper"), giving[0])
    return Judged(claim, deciding.verdict, deciding, tuple(f for f in tests if f is not deciding), controls)


def count_claims(judged) -> dict[str, dict[str, Any]]:
    """Per paper: how many claims, how many tested at the paper's setting, at a reduced one, not at all, and the
    verdicts per setting — `{paper: {"claims": n, "paper": n, "reduced": n, "untested": n,
    "verdicts": {setting: {verdict: n}}}}`. A claim counts once, whatever the number of its findings."""
    out = {p: {"claims": 0, "paper": 0, "reduced": 0, "untested": 0,
               "verdicts": {s: {v: 0 for v in CLAIM_VERDICTS} for s in ("paper", "reduced", "untested")}}
           for p in PAPERS}
    for j in judged:
        c = out[j.claim.paper]
        c["claims"] += 1
        c[j.setting] += 1
        c["verdicts"][j.setting][j.verdict] += 1
    return out


def count_verdicts(findings) -> dict[str, dict[str, int]]:
    """{paper: {verdict: count}} over `findings`, every paper and verdict present (zeros included)."""
    out = {p: {v: 0 for v in VERDICTS} for p in PAPERS}
    for f in findings:
        out[f.paper][f.verdict] += 1
    return out


__all__ = ["Interval", "Claim", "Finding", "Judged", "t_interval", "verdict", "size_side", "judge", "count_claims",
           "count_verdicts", "VERDICTS", "CLAIM_VERDICTS", "KINDS", "PAPERS", "REPRODUCED", "DIRECTION_ONLY",
           "NOT_DETECTED", "CONTRADICTED", "INCONCLUSIVE", "NOT_TESTABLE", "NOT_TESTED"]
