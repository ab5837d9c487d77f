"""A claim of a paper, a finding that tests it, and the verdicts — as data.

A **claim** (`Claim`) is one statement of a paper that a reader would quote: the abstract's, a numbered figure,
table, proposition, or a section's statement, with the paper's number where it gives one and a predicate. The
claims live in `data/claims/<paper>.yaml`, listed once each, in the paper's order; which claims exist is kept
apart from which ones this book tests. A claim may state its `scope` (the models it is about), that it is about a
class of models (`class_of`), and which of its tests decides when they disagree (`decides`, with `decides_why`).

A **finding** (`Finding`) is one test: an effect with its interval, what it predicts, and at which setting it was
run. Each chapter's `Result.findings()` computes its findings from its runs. A finding is of one of three kinds:

* `"claim"` — it tests the paper's claim `claim_id` (several findings may test one claim: one per encoder,
  reading or block type); a test outside the claim's scope (`out_of_scope`, with the reason: a contrastive
  encoder for a claim about raw language models) is shown with the claim as evidence, never deciding or counting;
* `"control"` — a check of the method (a leakage control, a planted case, a shuffled set) shown beside the claim
  `claim_id` it validates, never counted;
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
* for a one-sided bound (`direction="at most"` or `"at least"`, with a `margin`: "no substantial improvement" is
  at most +margin): **reproduced** when the interval lies wholly within the bound, **contradicted** when wholly
  beyond it, **inconclusive** otherwise — an effect on the other side of the reference never contradicts it;
* for a claim of *no effect* stated without a margin (`direction="none"`: the paper's own test did not reject
  zero): **contradicted** when the interval excludes the reference, **not detected** otherwise (the row says what
  the interval excludes);
* **inconclusive** — no interval to test (a single seed); a sampled quantity whose interval has zero width (no
  resample moved it: the resampling unit carries no uncertainty) unless the finding says why that is right
  (`point_why`: a discrete quantity no resample moves); or the same quantity under two procedures
  (`alternatives`) that give different verdicts — a verdict stands only where every procedure gives it (where
  they agree on the paper's side and differ only on its size, the verdict is direction only);
* **not testable here** — no effect measured (the run needs a GPU or the hub: `needs`, `command`), or the
  chapter says its run cannot test the claim (`cannot_test`).

An `exact` effect (no sampling: a bound, an identity, a computed constant) is read as the interval
estimate ± `tolerance`, which the finding must state with the reason it has no sampling (`exact_why`); a sample
statistic always has an interval.

**The setting.** `reduced` is empty for a test at the paper's setting (its model, its budget) and otherwise a
short phrase that says how the test falls short of it ("at 1.7 % of the paper's steps", "on MiniLM-L6 in place of
BERT-base"); the phrase is part of the verdict's text (`Finding.verdict_text`), and the counts keep the two
settings apart. A stand-in says how far it is from the paper's model on the baseline the paper reports
(`standin`: "raw STS 40.92 against BERT-base-cased's 62.97"); a verdict read from a near-identity or with
another limit says so in its row (`caveat`).

**At the paper's setting.** A reduced test's verdict holds at its own setting. It speaks for the paper's setting
only through a measured trend (`at_scale`: the effect at several points of the axis on which the test falls
short, a fitted form and its band at the paper's point, `core.scale`): the finding's own rule read on that band
gives `paper_scale_verdict` — reproduced, direction only or contradicted only where the band decides; otherwise
**inconclusive at the paper's scale** (with `decides_to`, how far along the axis the band still decides); a
reduced test with no trend has **no trend to the paper's scale**. The trends of one paper are a family (`correct`,
`in_scale_family`): each band is read at 1 − 0.05/m for its paper's m trends (Bonferroni). A claim's verdict there
(`Judged.paper_scale_verdict`) is its verdict where a deciding test ran at the paper's setting, else the one its
deciding tests' trends share (mixed where they differ).

**The verdict of a claim** (`judge`) — one rule, over the claim's in-scope tests of kind `"claim"` that give a
verdict:

1. tests at the paper's setting decide before reduced ones (the paper's own model and budget is the closest
   evidence there is); the others are shown beside them;
2. among the tests that decide, one verdict shared by all is the claim's; tests that disagree make the claim
   **mixed** ("mixed: reproduced on A; contradicted on B"), counted as such — unless the registry names the test
   that decides (`decides`) and says why (`decides_why`: the closest to the paper's model and budget, then the
   strongest evidence);
3. a claim about a class of models (`class_of`: "most CNN-based vision models") whose deciding tests cover fewer
   than two of its members (`Finding.members`) cannot be reproduced or contradicted for the class: its verdict
   is **on one model** (with the member's verdict in its text), counted apart;
4. a claim whose tests all need a GPU or the hub is *not testable here*; a claim with no in-scope finding is *not
   tested here*, with the registry's reason (out-of-scope evidence still shown).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from .scale import Distance, Extrapolation, num
from .stats import Interval, t_interval

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_DETECTED = "not detected"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable here"
NOT_TESTED = "not tested here"
MIXED = "mixed"
ON_ONE_MODEL = "on one model"
#: a reduced test read at the paper's setting through a trend whose band there does not decide
SCALE_INCONCLUSIVE = "inconclusive at the paper's scale"
#: a reduced test with no measured trend to the paper's setting: it says nothing there
NOT_JUDGED = "no trend to the paper's scale"
#: the verdicts at the paper's setting (`Finding.paper_scale_verdict`), in the order the headline screen counts them
SCALE_VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_DETECTED, INCONCLUSIVE, CONTRADICTED, SCALE_INCONCLUSIVE,
                  NOT_JUDGED, NOT_TESTABLE)
#: the verdict vocabulary of a finding, in the order the findings page counts them
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_DETECTED, INCONCLUSIVE, CONTRADICTED, NOT_TESTABLE)
#: a claim's verdicts: a finding's; "mixed" (its deciding tests disagree), "on one model" (a class claim tested on
#: one member), and "not tested here" for a claim no chapter tests
CLAIM_VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_DETECTED, INCONCLUSIVE, CONTRADICTED, MIXED, ON_ONE_MODEL,
                  NOT_TESTABLE, NOT_TESTED)
#: a claim's verdicts at the paper's setting (`Judged.paper_scale_verdict`)
CLAIM_SCALE_VERDICTS = (*SCALE_VERDICTS, MIXED, ON_ONE_MODEL, NOT_TESTED)
#: the kinds of finding
KINDS = ("claim", "control", "extension")
#: the directions a finding's claim can take
DIRECTIONS = ("above", "below", "equal", "at most", "at least", "none")

#: the three papers, by the key a Finding names them with
PAPERS = {
    "yan2022": "Yan et al. 2022 (SoftDecay)",
    "godey2024": "Godey et al. 2024 (anisotropy)",
    "yu2024": "Yu & Zhang 2024 (escalation)",
}

Direction = Literal["above", "below", "equal", "at most", "at least", "none"]
Kind = Literal["claim", "control", "extension"]


def _bounds(effect: Interval, tolerance: float | None) -> tuple[float, float]:
    if effect.method == "exact":
        tol = float(tolerance or 0.0)
        return effect.estimate - tol, effect.estimate + tol
    return effect.low, effect.high


def zero_width(effect: Interval | None) -> bool:
    """True for a sampled effect (not `exact`) whose interval has zero width: every resample gave the same
    value, so the resampling unit carries none of the uncertainty."""
    if effect is None or effect.method == "exact" or not effect.has_interval:
        return False
    return effect.high - effect.low <= 1e-12 * max(1.0, abs(effect.estimate))


def verdict(effect: Interval | None, direction: Direction, reference: float = 0.0,
            paper_value: float | None = None, margin: float | None = None,
            tolerance: float | None = None, point_why: str = "", smallest: float | None = None) -> str:
    """The one rule that turns an effect into a verdict (see the module's docstring). `direction`: the
    side of `reference` the paper's claim puts the effect on ("above", "below"), "equal" for a claim
    that two things are alike within ±`margin`, "at most" / "at least" for a one-sided bound at
    reference ± `margin`, "none" for a claim of no effect without a margin; `tolerance`: the half-width an
    exact effect is read with; `point_why`: why a zero-width interval on a sampled quantity is right (else it
    is inconclusive); `smallest`: the smallest effect of interest (its size from the reference, on the paper's
    side), for a claim whose paper gives no size: an interval that covers the reference is "not detected" only
    when it lies wholly short of the paper's size, else of `smallest`, and inconclusive otherwise."""
    if effect is None:
        return NOT_TESTABLE
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: use one of {DIRECTIONS}")
    if effect.method != "exact" and not effect.has_interval:
        return INCONCLUSIVE
    if zero_width(effect) and not point_why:
        return INCONCLUSIVE
    lo, hi = _bounds(effect, tolerance)
    lo, hi = lo - reference, hi - reference
    if direction in ("equal", "at most", "at least"):
        if margin is None or (margin <= 0 if direction == "equal" else margin < 0):
            raise ValueError(f"an {direction!r} claim needs a {'positive' if direction == 'equal' else ''} margin")
        if direction == "equal":
            if -margin <= lo and hi <= margin:
                return REPRODUCED
            if lo > margin or hi < -margin:
                return CONTRADICTED
            return INCONCLUSIVE
        if direction == "at least":
            lo, hi = -hi, -lo                      # at least −margin ⇔ −effect at most +margin
        if hi <= margin:
            return REPRODUCED
        if lo > margin:
            return CONTRADICTED
        return INCONCLUSIVE
    if direction == "none":
        return CONTRADICTED if (lo > 0 or hi < 0) else NOT_DETECTED
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
    # the interval covers the reference: "not detected" only where it also excludes the paper's effect (an exact
    # value within its tolerance of the reference excludes every effect beyond that round-off)
    if effect.method == "exact":
        return NOT_DETECTED
    size = sign * (paper_value - reference) if paper_value is not None else None
    if size is None or size <= 0:
        size = smallest
    if size is not None and size > 0 and hi < size:
        return NOT_DETECTED
    return INCONCLUSIVE


def size_side(effect: Interval | None, direction: Direction, reference: float = 0.0,
              paper_value: float | None = None, tolerance: float | None = None) -> str:
    """For a 'direction only' effect: "smaller" when its interval lies wholly short of the paper's size,
    "larger" when wholly beyond it; "" otherwise."""
    if effect is None or paper_value is None or direction not in ("above", "below"):
        return ""
    if verdict(effect, direction, reference, paper_value, tolerance=tolerance, point_why="-") != DIRECTION_ONLY:
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
    `command` what would, for a claim no finding attaches to; `scope`: the models the claim is about (tests
    outside it are marked `out_of_scope` by their chapter); `class_of`: set for a claim about a class of models
    (a verdict needs two members); `decides`, `decides_why`: the finding that decides when its tests disagree,
    and why; `headline`: a claim of the paper's abstract or conclusion, shown first on the findings page;
    `judged_from`: for a headline claim that sums up others, the claims it rests on (`Headline`)."""

    id: str
    paper: str
    where: str
    claim: str
    predicate: str
    section: str = ""
    paper_value: str = ""
    untested: str = ""
    command: str = ""
    scope: str = ""
    class_of: str = ""
    decides: str = ""
    decides_why: str = ""
    headline: bool = False
    judged_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "judged_from", tuple(self.judged_from))
        if self.judged_from and not self.headline:
            raise ValueError(f"claim {self.id!r}: only a headline claim is judged from others (judged_from)")
        if self.id in self.judged_from:
            raise ValueError(f"claim {self.id!r} is judged from itself")
        if self.paper not in PAPERS:
            raise ValueError(f"claim {self.id!r}: paper {self.paper!r} is not one of {sorted(PAPERS)}")
        if not (self.claim and self.predicate and self.where):
            raise ValueError(f"claim {self.id!r} needs where, claim and predicate")
        if bool(self.decides) != bool(self.decides_why):
            raise ValueError(f"claim {self.id!r}: a deciding test (decides) comes with the reason (decides_why)")


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
    not testable here; `label`: the test's short name among its claim's tests ("book MLM BERT", "τ = 1/2");
    `members`: the models the test measured, for a claim about a class; `out_of_scope`: why the test lies
    outside its claim's scope (shown, never deciding); `point_why`: why a zero-width interval is right;
    `alternatives`: the same effect under other procedures, `(name, Interval)` pairs (the verdict stands only
    where each gives it); `standin`: how far a stand-in is from the paper's model on the paper's baseline;
    `caveat`: a limit of the reading the row must carry (a test that is nearly a definition); `size_word`: a size
    word of the claim ("slightly", "huge") for which no `margin` is stated: an effect on the paper's side is then
    read as direction only, since nothing says how large "slightly" is; `distance`: how far the test's setting is
    from the paper's, as numbers (`core.scale.Distance`: steps, width, layers, tokens, a baseline score);
    `at_scale`: for a reduced test, the measured trend along the axis on which it falls short, read at the paper's
    point (`core.scale.Extrapolation`), from which `paper_scale_verdict` judges the paper's setting; its band is
    read at 95 % until `correct` reads it at its paper's trend family's level (`scale_family_size` trends)."""

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
    label: str = ""
    members: tuple[str, ...] = ()
    out_of_scope: str = ""
    point_why: str = ""
    alternatives: tuple[tuple[str, Interval], ...] = ()
    standin: str = ""
    caveat: str = ""
    size_word: str = ""
    smallest: float | None = None
    smallest_why: str = ""
    unit: str = ""
    units: int | None = None
    family_level: float | None = None
    family_size: int = 0
    distance: tuple[Distance, ...] = ()
    at_scale: Extrapolation | None = None
    scale_family_size: int = 0
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
        if self.smallest is not None and (self.smallest <= 0 or not self.smallest_why):
            raise ValueError(f"finding {self.key!r}: a smallest effect of interest is positive and says why "
                             "(smallest_why)")
        if self.family_level is not None and not 0 < self.family_level < 1:
            raise ValueError(f"finding {self.key!r}: family_level {self.family_level} is not a confidence level")
        object.__setattr__(self, "members", tuple(self.members))
        object.__setattr__(self, "alternatives", tuple((str(n), i) for n, i in self.alternatives))
        object.__setattr__(self, "distance", tuple(self.distance))
        if self.at_scale is not None and not self.reduced:
            raise ValueError(f"finding {self.key!r}: a test at the paper's setting needs no trend to it (at_scale)")
        self._rule(self.effect)

    def _rule(self, effect: Interval | None, corrected: bool = True) -> str:
        if corrected and effect is not None and self.family_level is not None:
            effect = effect.at_level(self.family_level)
        return verdict(effect, self.direction, self.reference, self.paper_value, self.margin, self.tolerance,
                       self.point_why, self.smallest)

    @property
    def read_effect(self) -> Interval | None:
        """The interval the verdict is read on: `effect` at its family's corrected level (`family_level`, set by
        `correct`), else `effect` as measured."""
        if self.effect is None or self.family_level is None:
            return self.effect
        return self.effect.at_level(self.family_level)

    @property
    def p_value(self) -> float | None:
        """The p-value of the question the verdict asks first (`test_p`), None for an effect with no sampling."""
        return None if self.cannot_test else test_p(self.effect, self.direction, self.reference, self.margin)

    @property
    def primary_verdict(self) -> str:
        """The verdict of `effect` alone (the first procedure), read at the family's level."""
        return NOT_TESTABLE if self.cannot_test else self._rule(self.effect)

    def alternative_verdicts(self, corrected: bool = True) -> list[tuple[str, str]]:
        """(procedure, verdict) of each alternative procedure (read at the family's level, unless `corrected` is
        False)."""
        return [(name, self._rule(iv, corrected)) for name, iv in self.alternatives]

    @property
    def uncorrected_verdict(self) -> str:
        """The verdict the uncorrected 95 % interval would give (a sensitivity reading, never the verdict)."""
        if self.family_level is None:
            return self.verdict
        return self._combine(NOT_TESTABLE if self.cannot_test else self._rule(self.effect, False),
                             {a for _, a in self.alternative_verdicts(False)})

    @property
    def verdict(self) -> str:
        return self._combine(self.primary_verdict, {a for _, a in self.alternative_verdicts()})

    def _combine(self, v: str, alt: set[str]) -> str:
        if v != NOT_TESTABLE and alt - {v}:
            # procedures on the paper's side that differ only on the paper's size agree on the direction
            return DIRECTION_ONLY if alt | {v} == {REPRODUCED, DIRECTION_ONLY} else INCONCLUSIVE
        if v == REPRODUCED and self.size_word and self.margin is None:
            return DIRECTION_ONLY
        return v

    def flags(self) -> list[str]:
        """Why the rule set this finding's verdict aside, in words (empty when it did not)."""
        out = []
        if not self.cannot_test and zero_width(self.effect) and not self.point_why:
            out.append(f"zero-width interval over {self.effect.n} resamples: the resampling unit carries none of "
                       "the uncertainty, so the rule reads it as inconclusive")
        alt = self.alternative_verdicts()
        if alt and any(a != self.primary_verdict for _, a in alt):
            said = "; ".join(f"{n}: {v}" for n, v in [("main procedure", self.primary_verdict), *alt])
            out.append(f"procedures disagree ({said}), so " + ("only the direction stands"
                                                              if self.verdict == DIRECTION_ONLY else
                                                              "no verdict stands"))
        if self.family_level is not None and self.uncorrected_verdict != self.verdict:
            out.append(f"read at {_pct(self.family_level)} by the family correction (Holm over its paper's "
                       f"{self.family_size} tests); at 95 % alone: {self.uncorrected_verdict}")
        if self.smallest is not None and self.verdict == NOT_DETECTED:
            out.append(f"not detected against the smallest effect of interest {self.smallest:g} "
                       f"({self.smallest_why})")
        return out

    @property
    def setting(self) -> str:
        """"paper" at the paper's setting, "reduced" otherwise."""
        return "reduced" if self.reduced else "paper"

    @property
    def in_scope(self) -> bool:
        return not self.out_of_scope

    def size_side(self) -> str:
        """"smaller" or "larger" than the paper's size, for a 'direction only' verdict; "" otherwise."""
        if self.cannot_test or self.primary_verdict != DIRECTION_ONLY:
            return ""
        return size_side(self.read_effect, self.direction, self.reference, self.paper_value, self.tolerance)

    def verdict_words(self) -> str:
        """The verdict with its size: 'direction only (larger than the paper's)'; 'direction only (the paper's
        "slightly" states no size)'."""
        side = self.size_side()
        if not side and self.verdict == DIRECTION_ONLY and self.size_word and self.margin is None:
            return f'{self.verdict} (the paper\'s "{self.size_word}" states no size)'
        return self.verdict + (f" ({side} than the paper's)" if side else "")

    def verdict_text(self) -> str:
        """The verdict with its setting in the words: 'direction only (larger than the paper's) at 1.7 % of the
        paper's steps'; 'reproduced' at the paper's setting."""
        text = self.verdict_words()
        if self.verdict == NOT_TESTABLE:
            return text
        return f"{text} {self.reduced}" if self.reduced else text

    # --- at the paper's setting ----------------------------------------------------------------------------------

    def _scale_rule(self, band: Interval) -> str:
        v = verdict(band, self.direction, self.reference, self.paper_value, self.margin, None, "", self.smallest)
        v = self._combine(v, set())
        return v if v in (REPRODUCED, DIRECTION_ONLY, CONTRADICTED) else SCALE_INCONCLUSIVE

    @property
    def paper_scale_verdict(self) -> str:
        """What this test says at the paper's setting: its own verdict for a test run there; for a reduced test,
        the finding's rule applied to its trend's band at the paper's point (`at_scale`, read at its trend family's
        corrected level once `correct` has set it, else at 95 %) — reproduced,
        direction only or contradicted only where the band decides, else "inconclusive at the paper's scale"; and
        "no trend to the paper's scale" for a reduced test with no measured trend (its verdict stays at its own
        setting). A test whose own run cannot test the claim (`cannot_test`, e.g. a model trained too little) may
        still speak for the paper's setting through its trend."""
        if self.at_scale is not None:
            return self._scale_rule(self.at_scale.band)
        if self.verdict == NOT_TESTABLE:
            return NOT_TESTABLE
        return NOT_JUDGED if self.reduced else self.verdict

    def decides_to(self, grid: int = 60) -> float | None:
        """The paper's point where the trend's band decides there (reproduced, direction only or contradicted); else
        the farthest point between the last measured one and the paper's at which it decides; None where it decides
        nowhere past the measured points or where there is no trend."""
        t = self.at_scale
        if t is None:
            return None
        last, target = max(t.x), t.target
        if target <= last:
            return target if self._scale_rule(t.band) != SCALE_INCONCLUSIVE else None
        if self._scale_rule(t.band) != SCALE_INCONCLUSIVE:
            return target
        deciding = [float(x0) for x0 in np.geomspace(last, target, grid)[:-1]
                    if self._scale_rule(t.at(float(x0))) != SCALE_INCONCLUSIVE]
        return max(deciding) if deciding else None

    def paper_scale_text(self) -> str:
        """The verdict at the paper's setting in words, with the band it is read from: 'inconclusive at the paper's
        scale: +0.12 [−0.40, +0.64] at 60,000 training steps, from 4 points over 250–1,000 (4×), forms log and
        inverse square root; the band decides up to 1,900'."""
        v = self.paper_scale_verdict
        t = self.at_scale
        if t is None or not self.reduced:
            return v
        where = self.decides_to()
        tail = ("" if where is None or where >= t.target else
                f"; the band decides up to {num(where)} {t.axis}")
        if where is None and v == SCALE_INCONCLUSIVE:
            tail = "; the band decides nowhere past the measured points"
        if self.scale_family_size > 1:
            tail += f"; read at {_pct(t.level)} (Bonferroni over its paper's {self.scale_family_size} trends)"
        return f"{v}: {t.text(self.digits)}{tail}"

    def name(self) -> str:
        """The test's short name among its claim's tests: `label`, else its members, else its key."""
        return self.label or ", ".join(self.members) or self.key

    def effect_text(self) -> str:
        """The effect as '+0.055 [+0.041, +0.070]', an exact one as '+0.999 (exact, ± 1e-06)' ('—' when not
        testable here)."""
        if self.effect is None:
            return "—"
        if self.effect.method == "exact":
            return f"{self.effect.text(self.digits)} (exact ± {self.tolerance:.2g})"
        if self.effect.method == "range":
            f = f"{{:+.{self.digits}f}}"
            return (f"{f.format(self.effect.estimate)} (range over {self.n_units} {self.unit_name}: "
                    f"{f.format(self.effect.low)} to {f.format(self.effect.high)}; not a confidence interval)")
        return self.effect.text(self.digits)

    def excludes(self) -> str:
        """What the interval rules out, for a 'not detected' or 'inconclusive' reading: 'excludes effects
        below −0.040 and above +0.031' (measured on the effect's own scale); '' otherwise."""
        e = self.read_effect
        if e is None or not e.has_interval or e.method == "exact":
            return ""
        f = f"{{:+.{self.digits}f}}"
        return f"excludes effects below {f.format(e.low)} and above {f.format(e.high)}"

    #: methods whose `Interval.n` counts resamples, not the units resampled
    RESAMPLED = ("bootstrap", "cross-fit", "subsample")

    @property
    def resamples(self) -> int | None:
        """The draws behind a resampled interval (bootstrap, cross-fit, subsample); None otherwise."""
        e = self.effect
        return int(e.n) if e is not None and e.method in self.RESAMPLED else None

    @property
    def n_units(self) -> int | None:
        """How many units the interval is taken over (`units`, else the interval's own n where it counts units:
        seeds, layers, models, inputs); None where a resampled interval does not state its units."""
        if self.units is not None:
            return int(self.units)
        e = self.effect
        if e is None or e.method in self.RESAMPLED or e.method == "exact":
            return None
        return int(e.n)

    @property
    def unit_name(self) -> str:
        """What the interval is taken over (`unit`, else what its method's n counts: seeds for a t-interval over
        seeds, the models of a binomial share, …)."""
        if self.unit:
            return self.unit
        e = self.effect
        if e is None:
            return ""
        return {"t": "seeds", "binomial": "models", "fisher-z": "points", "range": "values"}.get(e.method, "")

    def corrected_text(self) -> str:
        """The interval the verdict is read on, where the family correction widened it: '[−0.50, +1.14] at
        99.8 %'; '' otherwise."""
        e = self.read_effect
        if e is None or e is self.effect or not e.has_interval:
            return ""
        f = f"{{:+.{self.digits}f}}"
        return f"[{f.format(e.low)}, {f.format(e.high)}] at {_pct(e.level)}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict
        d["uncorrected_verdict"] = self.uncorrected_verdict
        d["p_value"] = self.p_value
        d["verdict_text"] = self.verdict_text()
        d["flags"] = self.flags()
        d["paper_scale_verdict"] = self.paper_scale_verdict
        d["paper_scale_text"] = self.paper_scale_text()
        return d


def _pct(level: float) -> str:
    """A confidence level as a percentage with the digits it needs: 95 %, 99.8 %, 99.93 %."""
    miss = 100 * (1 - level)
    digits = max(0, min(4, -math.floor(math.log10(miss)) + 1)) if miss > 0 else 0
    return f"{100 * level:.{digits}f} %"


def test_p(effect: Interval | None, direction: str, reference: float = 0.0,
           margin: float | None = None) -> float | None:
    """The two-sided p-value of the question a finding's verdict turns on, read off its interval
    (`Interval.tail`), such that the interval at level L answers it exactly when p < 1 − L: for a side ("above",
    "below") or no effect ("none"), whether the effect differs from `reference`; for a bound ("at most",
    "at least"), on which side of reference ± `margin` it lies; for a likeness ("equal"), with the estimate inside
    reference ± `margin`, the two one-sided tests that it lies inside (the larger p, doubled), and with the
    estimate outside, the test that it lies beyond the nearer edge. None for an effect with no sampling (exact,
    a range, a single seed)."""
    if effect is None or not effect.sampled:
        return None
    if direction in ("above", "below", "none"):
        return min(1.0, 2 * effect.tail(reference))
    m = float(margin or 0.0)
    lo, hi = reference - m, reference + m
    if direction == "at most":
        return min(1.0, 2 * effect.tail(hi))
    if direction == "at least":
        return min(1.0, 2 * effect.tail(lo))
    if direction == "equal":
        if lo < effect.estimate < hi:
            return min(1.0, 2 * max(effect.tail(lo), effect.tail(hi)))
        return min(1.0, 2 * effect.tail(hi if effect.estimate >= hi else lo))
    raise ValueError(f"direction {direction!r}: use one of {DIRECTIONS}")


#: the family-wise error rate each paper's family of tests is held to
FAMILY_ALPHA = 0.05


def in_family(f: Finding) -> bool:
    """Whether a finding belongs to its paper's family of tests: a claim's in-scope test or one of the book's own
    questions, with a sampled interval (not exact, not a range) that could have moved. Controls and out-of-scope
    tests are shown, never counted, and read at 95 %."""
    return (f.kind in ("claim", "extension") and f.in_scope and not f.cannot_test and f.effect is not None
            and f.p_value is not None and not zero_width(f.effect))


def holm_levels(p_values: Mapping[str, float], alpha: float = FAMILY_ALPHA) -> dict[str, float]:
    """Holm's step-down correction over one family, as the confidence level each test's interval is read at.
    The tests are ranked by p-value; the r-th of m has the adjusted p-value p̃ = max over j ≤ r of
    min(1, (m − j + 1)·p₍ⱼ₎) (Holm 1979), and it rejects when p̃ ≤ `alpha`. Its interval is read at
    1 − alpha·p/p̃ (at 1 − alpha/(m − r + 1) when p = 0), the level at which the interval excludes the null exactly
    when Holm rejects it: never narrower than Bonferroni's level for a family of m − r + 1."""
    items = sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))
    m = len(items)
    out, running = {}, 0.0
    for r, (key, p) in enumerate(items):
        running = max(running, min(1.0, (m - r) * p))
        a = alpha * p / running if p > 0 else alpha / (m - r)
        out[key] = 1.0 - min(alpha, a)
    return out


def in_scale_family(f: Finding) -> bool:
    """Whether a test belongs to its paper's family of trends: an in-scope claim test or book's own question carried
    to the paper's setting by a measured trend (`at_scale`)."""
    return f.kind in ("claim", "extension") and f.in_scope and f.at_scale is not None


def correct(findings, alpha: float = FAMILY_ALPHA, others: Mapping[str, Mapping[str, float]] | None = None,
            scale_others: Mapping[str, Sequence[str]] | None = None) -> list[Finding]:
    """`findings` with their family's correction: one family per paper, its members `in_family`, each read at
    its Holm level (`holm_levels`) — `family_level` and `family_size` set. And one family of trends per paper, its
    members `in_scale_family`, each band read at Bonferroni's level 1 − alpha/m for m trends (a band is a union
    of forms' prediction intervals, with no one p-value to rank for Holm's steps) — `at_scale` re-read and
    `scale_family_size` set. The rest unchanged. `others`: {paper: {key: p}} of the family's members that are not
    among `findings`, `scale_others`: {paper: [key]} of the trend family's (a chapter's tests corrected within the
    whole book's families); a finding among `findings` replaces its own entry there."""
    fams: dict[str, dict[str, float]] = {p: dict((others or {}).get(p, {})) for p in PAPERS}
    members = [f for f in findings if in_family(f)]
    for f in members:
        fams[f.paper][f.key] = float(f.p_value)
    levels = {p: holm_levels(ps, alpha) for p, ps in fams.items()}
    trends = {p: set((scale_others or {}).get(p, ())) for p in PAPERS}
    for f in findings:
        if in_scale_family(f):
            trends[f.paper].add(f.key)
    from dataclasses import replace

    out = []
    for f in findings:
        if f in members:
            f = replace(f, family_level=levels[f.paper][f.key], family_size=len(fams[f.paper]))
        if in_scale_family(f):
            m = len(trends[f.paper])
            f = replace(f, at_scale=f.at_scale.at_level(1 - alpha / m) if m > 1 else f.at_scale, scale_family_size=m)
        out.append(f)
    return out


def value_of(column: Any, res: Any) -> Any:
    """A spec's column on a Result: the column itself, or what it gives when it is a function of the Result."""
    return column(res) if callable(column) else column


@dataclass(frozen=True)
class Partial:
    """What a row's `read` finds on the Result: the effect, and the `Finding` fields only a reading of the Result
    knows. A field left None keeps what the row's columns (and the chapter's fixed fields) say; `case` picks the
    finding's key from the row's table of keys (`Spec.key`); `how`, how the interval was made, is appended to the
    row's quantity in parentheses ("… mean over the sets (paired bootstrap over the pairs)")."""

    effect: Interval | None
    case: Any = None
    how: str = ""
    claim: str | None = None
    measured: str | None = None
    quantity: str | None = None
    scale: str | None = None
    section: str | None = None
    reduced: str | None = None
    label: str | None = None
    members: tuple[str, ...] | None = None
    out_of_scope: str | None = None
    reference: float | None = None
    reference_label: str | None = None
    paper_value: float | None = None
    margin: float | None = None
    tolerance: float | None = None
    exact_why: str | None = None
    point_why: str | None = None
    cannot_test: str | None = None
    smallest: float | None = None
    smallest_why: str | None = None
    size_word: str | None = None
    alternatives: tuple[tuple[str, Interval], ...] | None = None
    standin: str | None = None
    caveat: str | None = None
    unit: str | None = None
    units: int | None = None
    distance: tuple[Distance, ...] | None = None
    at_scale: Extrapolation | None = None
    needs: str | None = None
    command: str | None = None
    digits: int | None = None
    extra: dict[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        """The `Finding` fields this reading sets (those not left None), `effect` always."""
        skip = ("case", "how")
        return {k: v for k, v in vars(self).items() if k not in skip and (v is not None or k == "effect")}


#: what a row's `read` is: a function of the chapter's Result giving one `Partial`, a list of them (one finding
#: each), or None when the Result holds nothing the row reads
Reader = Callable[[Any], "Partial | Sequence[Partial] | None"]


@dataclass(frozen=True)
class Spec:
    """One row of a chapter's table of findings; `findings(res, **fixed)` turns it into its `Finding`s.

    * `key`: the finding's key, a literal written once in `helpers/`; or, for a row that gives one finding per case
      (a task, a model), a module-level table of such keys by case (`finding_key` reads it).
    * The other columns are `Finding` fields that describe the row (what the paper claims, what was measured, what
      the claim predicts), each a value or a function of the chapter's Result (`value_of`); `more` holds the fields
      a row sets beyond the columns (digits, tolerance, caveat, …).
    * `read`: the one way a row measures — a function of the Result (`Reader`) returning a `Partial`: the effect
      and what only that reading knows (what was run, how the interval was made, at which scale); or a list of
      them, one finding each (each naming its `case` when `key` is a table); None or an empty list when the
      Result holds nothing the row reads. A row without `read` measures nothing: its finding has no effect (it
      names the `command` that would test it). A reader several rows share is given its row's setting as a
      callable object or a `functools.partial` (`sts.findings.On`), never by name.
    * `when`: whether a Result holds what the row reads; `setting`: what the chapter's `build` reads to say how a
      run falls short of the paper's setting (Params field names, a function of the Result).

    A field is taken from, last winning: the columns, `more`, `fixed` (what the chapter sets for every row: paper,
    chapter, scale, …, each also a value or a function of the Result), the fields the `Partial` sets."""

    key: str | Mapping[Any, str]
    where: str
    claim: str | Callable[[Any], str] = ""
    measured: str | Callable[[Any], str] = ""
    quantity: str | Callable[[Any], str] = ""
    direction: str = "above"
    section: str = ""
    claim_id: str = ""
    kind: str = "claim"
    reference: float | Callable[[Any], float] = 0.0
    reference_label: str | Callable[[Any], str] = "0"
    margin: float | Callable[[Any], float] | None = None
    read: Reader | None = None
    setting: Any = None
    when: Callable[[Any], bool] = field(default=lambda res: True)
    more: Mapping[str, Any] = field(default_factory=dict)

    COLUMNS = ("where", "claim", "measured", "quantity", "direction", "section", "claim_id", "kind",
               "reference", "reference_label", "margin")

    def readings(self, res: Any) -> list[Partial]:
        """What `read` finds on `res`, as a list (one `Partial` with no effect for a row without `read`)."""
        if self.read is None:
            return [Partial(None)]
        got = self.read(res)
        if got is None:
            return []
        got = [got] if isinstance(got, Partial) else list(got) if isinstance(got, (list, tuple)) else [got]
        for p in got:
            if not isinstance(p, Partial):
                raise TypeError(f"the reader of {self.key_text()} returned {type(p).__name__}, not a Partial")
        return got

    def findings(self, res: Any, **fixed: Any) -> list[Finding]:
        """The `Finding`s this row gives on `res` (none when `when` says the Result lacks what it reads, or
        `read` finds nothing)."""
        got = self.readings(res) if self.when(res) else []
        if not got:
            return []
        cols = {name: getattr(self, name) for name in self.COLUMNS} | dict(self.more) | fixed
        values = {name: value_of(v, res) for name, v in cols.items()}
        out = []
        for p in got:
            row = values | p.fields()
            if p.how:
                row["quantity"] = f"{row['quantity']} ({p.how})"
            out.append(Finding(key=self.key_of(p.case), **row))
        return out

    def key_text(self) -> str:
        """The row's key, or the first key of its table (what grep finds)."""
        return repr(self.key if isinstance(self.key, str) else next(iter(self.key.values())))

    def key_of(self, case: Any) -> str:
        """The key of the finding a reading of `case` gives: `key`, or what its table of keys says for `case`
        (a case without a key raises KeyError, naming the table by its first key, which grep finds)."""
        if isinstance(self.key, str):
            return self.key
        return finding_key(self.key, case, f"the table of keys holding {next(iter(self.key.values()))!r}")

    def finding(self, res: Any, **fixed: Any) -> Finding:
        """The one `Finding` of a row (whose `read` gives one)."""
        (one,) = self.findings(res, **fixed)
        return one


@dataclass(frozen=True)
class Judged:
    """A claim with its findings and its verdict (`judge`): `deciding`, the tests whose verdicts make the
    claim's (one when they agree or the registry names it; several for a mixed claim; none when no test gives a
    verdict); `others`, the claim's other in-scope tests; `out_of_scope`, the tests outside its scope;
    `controls`, the checks of the method shown beside it; `underlying`, for a claim tested on one member of its
    class, the verdict its tests give."""

    claim: Claim
    verdict: str
    deciding: tuple[Finding, ...] = ()
    others: tuple[Finding, ...] = ()
    controls: tuple[Finding, ...] = ()
    out_of_scope: tuple[Finding, ...] = ()
    underlying: str = ""

    @property
    def lead(self) -> Finding | None:
        """The first deciding test (the row's effect), or None."""
        return self.deciding[0] if self.deciding else None

    @property
    def setting(self) -> str:
        """"paper", "reduced", or "untested" (no finding gave a verdict)."""
        if not self.deciding:
            return "untested"
        return "paper" if all(f.setting == "paper" for f in self.deciding) else "reduced"

    @property
    def split(self) -> bool:
        """True when the deciding tests disagree."""
        return len({f.verdict_words() for f in self.deciding}) > 1

    @property
    def readings(self) -> list[list[Finding]]:
        """The deciding tests, the readings of one test together (`group_readings`)."""
        return group_readings(self.deciding)

    def sign_convention(self) -> str:
        """The difference the claim's row gives its numbers in ('whitening − SoftDecay'): the first clause of its
        deciding tests' quantity, asides in parentheses left out, as far as they share it word by word; '' where
        that is not a difference. The row's effect and the paper's value are both in this sign."""
        clauses = [re.sub(r" \([^)]*\)", "", f.quantity).split(", ")[0].split() for f in self.deciding]
        common_words = []
        for words in zip(*clauses, strict=False):
            if len(set(words)) > 1:
                break
            common_words.append(words[0])
        text = " ".join(common_words)
        return text if " − " in text and not text.endswith("−") else ""

    def _tests_text(self) -> str:
        by: dict[str, list[str]] = {}
        for f in self.deciding:
            by.setdefault(f.verdict_words(), []).append(f.name())
        return "; ".join(f"{v} on {', '.join(names)}" for v, names in by.items())

    def verdict_text(self) -> str:
        """'mixed: reproduced on A; contradicted on B'; 'on one model: contradicted on X'; a single deciding
        test's own text; the bare verdict otherwise."""
        if self.verdict == MIXED:
            return f"{MIXED}: {self._tests_text()}"
        if self.verdict == ON_ONE_MODEL:
            members = sorted({m for f in self.deciding for m in f.members}) or [self.deciding[0].name()]
            under = self._tests_text() if self.split else self.deciding[0].verdict_words()
            return f"{ON_ONE_MODEL} ({', '.join(members)}): {under}"
        if len(self.deciding) == 1:
            text = self.deciding[0].verdict_text()
            differ = [f for f in self.others if f.verdict != NOT_TESTABLE
                      and f.verdict_words() != self.deciding[0].verdict_words()]
            if differ:
                text += "; the other tests: " + "; ".join(f"{f.verdict_words()} on {f.name()}" for f in differ)
            return text
        if self.deciding:
            return f"{self.deciding[0].verdict_words()} on each of {len(self.deciding)} tests"
        return self.verdict

    @property
    def paper_scale_verdict(self) -> str:
        """The claim's verdict at the paper's setting: its verdict where a deciding test ran there; else what its
        deciding tests' trends say there (`Finding.paper_scale_verdict`; one shared verdict, else mixed), or, where
        none has a trend, its other in-scope tests' trends; "no trend to the paper's scale" where no test has one."""
        if self.setting == "paper":
            return self.verdict
        read = self._scale_tests()
        if not read:
            return self.verdict if self.verdict in (NOT_TESTED, NOT_TESTABLE) else NOT_JUDGED
        got = [f.paper_scale_verdict for f in read]
        return got[0] if len(set(got)) == 1 else MIXED

    def _scale_tests(self) -> list[Finding]:
        """The tests a claim is read from at the paper's setting: its deciding tests with a trend there, else its
        other in-scope tests with one (a test whose own run cannot test the claim may still have a trend)."""
        return ([f for f in self.deciding if f.at_scale is not None]
                or [f for f in self.others if f.at_scale is not None])

    def paper_scale_text(self) -> str:
        """`paper_scale_verdict` with its tests' words where a trend gave it."""
        v = self.paper_scale_verdict
        read = [f for f in self._scale_tests() if f.reduced]
        if v in (NOT_TESTED, NOT_TESTABLE, NOT_JUDGED) or self.setting == "paper" or not read:
            return v
        if len(read) == 1:
            return read[0].paper_scale_text()
        return f"{v}: " + "; ".join(f"{f.paper_scale_verdict} on {f.name()}" for f in read)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every in-scope test: the deciding ones first."""
        return (*self.deciding, *self.others)


def group_readings(tests) -> list[list[Finding]]:
    """`tests` grouped so that the readings of one test go together: tests of the same members with the same
    effect (estimate, interval, n and method) are one test read several ways (Whisper base's drift test: the
    literal test and the paper's point), in the order of their first reading."""
    groups: dict[tuple, list[Finding]] = {}
    for f in tests:
        key = (f.members or (f.key,), f.effect) if f.effect is not None else (f.key,)
        groups.setdefault(key, []).append(f)
    return list(groups.values())


def group_name(group: list[Finding]) -> str:
    """A test's name, or for the readings of one test what they share and each reading ('whisper-base encoder,
    one test read 2 ways: the literal test; the paper's point'), from names that end in the reading after a
    comma."""
    if len(group) == 1:
        return group[0].name()
    heads = {f.name().rsplit(", ", 1)[0] for f in group}
    who = heads.pop() if len(heads) == 1 else (", ".join(group[0].members) or group[0].key)
    ways = "; ".join(f.name().removeprefix(f"{who}, ") for f in group)
    return f"{who}, one test read {len(group)} ways ({ways})"


def judge(claim: Claim, findings) -> Judged:
    """A claim's verdict from all its in-scope tests, by the rule of the module's docstring."""
    tests = [f for f in findings if f.kind == "claim" and f.claim_id == claim.id]
    controls = tuple(f for f in findings if f.kind == "control" and f.claim_id == claim.id)
    inscope = [f for f in tests if f.in_scope]
    outside = tuple(f for f in tests if not f.in_scope)
    giving = [f for f in inscope if f.verdict != NOT_TESTABLE]
    if not giving:
        v = NOT_TESTABLE if inscope else NOT_TESTED
        return Judged(claim, v, (), tuple(inscope), controls, outside)
    named = [f for f in giving if f.key == claim.decides]
    if claim.decides and not named and claim.decides not in {f.key for f in tests}:
        raise ValueError(f"claim {claim.id!r} is decided by {claim.decides!r}, which is not one of its tests")
    at_paper = [f for f in giving if f.setting == "paper"]
    deciding = named or at_paper or giving
    rest = tuple(f for f in inscope if f not in deciding)
    verdicts = {f.verdict_words() for f in deciding}
    v = deciding[0].verdict if len(verdicts) == 1 else MIXED
    if claim.class_of and len({m for f in deciding for m in (f.members or (f.key,))}) < 2:
        return Judged(claim, ON_ONE_MODEL, tuple(deciding), rest, controls, outside, underlying=v)
    return Judged(claim, v, tuple(deciding), rest, controls, outside)


def count_claims(judged) -> dict[str, dict[str, Any]]:
    """Per paper: how many claims, how many tested at the paper's setting, at a reduced one, not at all, and the
    verdicts per setting — `{paper: {"claims": n, "paper": n, "reduced": n, "untested": n,
    "verdicts": {setting: {verdict: n}}}}`. A claim counts once, whatever the number of its findings; a mixed
    claim counts as mixed, a class claim tested on one member as "on one model"."""
    out = {p: {"claims": 0, "paper": 0, "reduced": 0, "untested": 0,
               "verdicts": {s: {v: 0 for v in CLAIM_VERDICTS} for s in ("paper", "reduced", "untested")}}
           for p in PAPERS}
    for j in judged:
        c = out[j.claim.paper]
        c["claims"] += 1
        c[j.setting] += 1
        c["verdicts"][j.setting][j.verdict] += 1
    return out


def finding_key(keys: Mapping[Any, str], case: Any, table: str) -> str:
    """The finding key `keys` (a module-level mapping, named `table`) gives `case`. A finding key is written out
    whole, once, in `helpers/`, so `grep` finds where the finding is made: a case without one raises KeyError
    naming it, never a key built on the fly."""
    try:
        return keys[case]
    except KeyError:
        raise KeyError(f"{table} has no finding key for {case!r}: add one there (keys are literals, "
                       "never built)") from None


def count_verdicts(findings) -> dict[str, dict[str, int]]:
    """{paper: {verdict: count}} over `findings`, every paper and verdict present (zeros included)."""
    out = {p: {v: 0 for v in VERDICTS} for p in PAPERS}
    for f in findings:
        out[f.paper][f.verdict] += 1
    return out


__all__ = ["Interval", "Claim", "Finding", "Spec", "Partial", "Reader", "value_of", "Judged", "t_interval", "verdict",
           "size_side", "judge", "group_readings", "group_name",
           "count_claims",
           "count_verdicts", "finding_key", "zero_width", "test_p", "in_family", "holm_levels", "correct",
           "FAMILY_ALPHA", "VERDICTS", "CLAIM_VERDICTS", "KINDS", "PAPERS", "DIRECTIONS",
           "REPRODUCED", "DIRECTION_ONLY", "NOT_DETECTED", "CONTRADICTED", "INCONCLUSIVE", "NOT_TESTABLE",
           "NOT_TESTED", "MIXED", "ON_ONE_MODEL"]


def synthesis(parts: list[str], at_scale: bool = False) -> str:
    """The verdict of a headline claim that sums up others, from their verdicts (`parts`), read as a conjunction:
    with no part giving a verdict (each not tested here, not testable here, or with no trend to the paper's scale),
    "not tested here" ("no trend to the paper's scale" when `at_scale`); contradicted when a part is contradicted;
    reproduced when every part is, direction only when every part is on the paper's side (a part with no verdict
    leaves the conjunction open); mixed when a part is mixed; otherwise inconclusive ("inconclusive at the paper's
    scale" when `at_scale`)."""
    tested = [v for v in parts if v not in (NOT_TESTED, NOT_TESTABLE, NOT_JUDGED)]
    if not tested:
        return NOT_JUDGED if at_scale else NOT_TESTED
    if CONTRADICTED in tested:
        return CONTRADICTED
    if len(tested) == len(parts) and all(v == REPRODUCED for v in tested):
        return REPRODUCED
    if len(tested) == len(parts) and all(v in (REPRODUCED, DIRECTION_ONLY) for v in tested):
        return DIRECTION_ONLY
    if MIXED in tested:
        return MIXED
    return SCALE_INCONCLUSIVE if at_scale else INCONCLUSIVE


@dataclass(frozen=True)
class Headline:
    """A headline claim of a paper (`Claim.headline`) with its verdict at the book's setting and at the paper's:
    its own (`own`, `judge`'s) when it has no `judged_from`; else `synthesis` over the claims it rests on (`parts`),
    its own verdict among them where a test of its own gives one."""

    own: Judged
    parts: tuple[Judged, ...] = ()

    @property
    def claim(self) -> Claim:
        return self.own.claim

    def _own_counts(self) -> bool:
        return self.own.verdict not in (NOT_TESTED, NOT_TESTABLE)

    @property
    def verdict(self) -> str:
        if not self.parts:
            return self.own.verdict
        return synthesis([j.verdict for j in ((self.own,) if self._own_counts() else ()) + self.parts])

    @property
    def paper_scale_verdict(self) -> str:
        if not self.parts:
            return self.own.paper_scale_verdict
        return synthesis([j.paper_scale_verdict for j in ((self.own,) if self._own_counts() else ()) + self.parts],
                         at_scale=True)

    def basis(self) -> str:
        """How the verdicts were reached, in words: 'its own tests'; 'judged from 4 claims: yu-fig6-deesc-vs-post
        (inconclusive | inconclusive at the paper's scale), …'; 'not tested here'."""
        if not self.parts:
            return "its own tests" if self._own_counts() else "no test of its own"
        listed = "; ".join(f"{j.claim.id} ({j.verdict} | {j.paper_scale_verdict})" for j in self.parts)
        own = f"its own tests ({self.own.verdict} | {self.own.paper_scale_verdict}) and " if self._own_counts() else ""
        return f"judged from {own}{len(self.parts)} claims it sums up: {listed}"


def headlines(claims: list[Claim], findings: list[Finding], paper: str | None = None) -> list[Headline]:
    """The headline claims (of `paper`), in the papers' order, each judged (`Headline`)."""
    judged = {c.id: judge(c, findings) for c in claims}
    out = []
    for c in claims:
        if c.headline and paper in (None, c.paper):
            missing = [i for i in c.judged_from if i not in judged]
            if missing:
                raise ValueError(f"headline claim {c.id!r} is judged from claims not in the registry: {missing}")
            out.append(Headline(judged[c.id], tuple(judged[i] for i in c.judged_from)))
    return out
