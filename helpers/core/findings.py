"""A finding: one claim of a paper, what we measured for it, and the verdict — as data.

Every chapter's `Result.findings()` returns `Finding` records computed from its runs; the chapter opens
with them, and the book's findings page collects them all. Nothing here knows a chapter: this module is
the one place where an effect and its reference become a verdict (`verdict`), and where an interval
becomes text (`Interval.text`).

The rule (`verdict`), for an effect whose interval is [low, high], a paper's side (`direction`) and a
`reference` (zero, a baseline, chance), with the interval measured from the reference:

* **reproduced** — the interval lies wholly on the paper's side of the reference, and, where the paper
  gives a size (`paper_value`), does not lie wholly short of it;
* **direction only** — on the paper's side, but the interval excludes the paper's size (it lies wholly
  between the reference and the paper's value);
* **not detected** — the interval covers the reference (then `Finding.excludes` says which effects it
  rules out);
* **contradicted** — the interval lies wholly on the other side of the reference;
* for a claim that two things are *alike* (`direction="equal"`, with a `margin`): **reproduced** when
  the interval lies inside ±margin, **contradicted** when it lies wholly outside it on one side,
  **inconclusive** otherwise;
* **inconclusive** — no interval to test (a single seed);
* **not testable here** — no effect measured (`effect is None`): the run needs a GPU or the hub;
  `needs` and `command` say which and how.
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
#: the verdict vocabulary, in the order the findings page counts them
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_DETECTED, INCONCLUSIVE, CONTRADICTED, NOT_TESTABLE)

#: the three papers, by the key a Finding names them with
PAPERS = {
    "yan2022": "Yan et al. 2022 (SoftDecay)",
    "godey2024": "Godey et al. 2024 (anisotropy)",
    "yu2024": "Yu & Zhang 2024 (escalation)",
}

Direction = Literal["above", "below", "equal"]


def verdict(effect: Interval | None, direction: Direction, reference: float = 0.0,
            paper_value: float | None = None, margin: float | None = None) -> str:
    """The one rule that turns an effect into a verdict (see the module's docstring). `direction`: the
    side of `reference` the paper's claim puts the effect on ("above", "below"), or "equal" for a claim
    that two things are alike within ±`margin`."""
    if effect is None:
        return NOT_TESTABLE
    if direction not in ("above", "below", "equal"):
        raise ValueError(f"direction {direction!r}: use 'above', 'below' or 'equal'")
    if effect.method != "exact" and not effect.has_interval:
        return INCONCLUSIVE
    lo, hi = effect.low - reference, effect.high - reference
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
            if size > 0 and hi < size:
                return DIRECTION_ONLY
        return REPRODUCED
    if hi < 0:
        return CONTRADICTED
    return NOT_DETECTED


@dataclass(frozen=True)
class Finding:
    """One claim of a paper and what our runs say of it.

    `key`: a stable id (`<chapter>-<short name>`); `paper`: a key of `PAPERS`; `where`: the figure, table,
    equation or section ("Fig. 6", "Table 1", "eq. (8)"); `claim`: the claim in one sentence as the paper
    makes it; `measured`: what we ran (model, data, steps, seeds); `quantity`: what `effect` is, with its
    unit ("de-escalated − pre-norm final loss, nats"); `effect`: the Interval (None: not testable here);
    `direction`, `reference`, `paper_value`, `margin`: what the claim predicts, for `verdict`;
    `reference_label`: how to name the reference ("0", "chance 0.10", "the paper's 0.81"); `scale`: the
    run's scale against the paper's ("book: 2 % of the paper's steps"); `section`: the label of the
    chapter section that shows it; `needs`, `command`: for a claim not testable here."""

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
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"finding {self.key!r}: paper {self.paper!r} is not one of {sorted(PAPERS)}")
        if self.effect is None and not self.command:
            raise ValueError(f"finding {self.key!r} has no effect: name the command (and preset) that tests it")
        verdict(self.effect, self.direction, self.reference, self.paper_value, self.margin)   # validates

    @property
    def verdict(self) -> str:
        return verdict(self.effect, self.direction, self.reference, self.paper_value, self.margin)

    def effect_text(self) -> str:
        """The effect as '+0.055 [+0.041, +0.070]' (or '—' when not testable here)."""
        return "—" if self.effect is None else self.effect.text(self.digits)

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
        return d


def count_verdicts(findings) -> dict[str, dict[str, int]]:
    """{paper: {verdict: count}} over `findings`, every paper and verdict present (zeros included)."""
    out = {p: {v: 0 for v in VERDICTS} for p in PAPERS}
    for f in findings:
        out[f.paper][f.verdict] += 1
    return out


__all__ = ["Interval", "Finding", "t_interval", "verdict", "count_verdicts", "VERDICTS", "PAPERS",
           "REPRODUCED", "DIRECTION_ONLY", "NOT_DETECTED", "CONTRADICTED", "INCONCLUSIVE", "NOT_TESTABLE"]
