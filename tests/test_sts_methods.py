"""The STS methods are one registry (`core.sts.METHOD_SPECS`): every name the committed runs store is in it, what a
method does is read from its entry (never parsed from its name), and an unknown name is refused where it enters,
naming it and listing the known ones."""

from __future__ import annotations

import json
import typing
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.core import config
from helpers.core import softdecay as SD
from helpers.core import sts as C
from helpers.experiments import sts
from helpers.machinery.params import ParameterError

ROOT = Path(__file__).resolve().parents[1]
#: where a committed STS run keys its dicts by method (`*` one key, `[]` a list item)
METHOD_KEYED = ("results/spearman/*/*", "results/ci/*/*", "results/avg_ci/*", "results/planted/*/mean",
                "results/planted/*/spike", "results/planted/mean", "results/planted/spike", "results/tsne/*",
                "results/sets/*", "results/maps/*", "results/intervals/*", "results/refit/*", "results/crossfit",
                "results/fullfit", "results/halfsample", "results/draws/[]/scores/*/*", "results/draws/[]/flips/*/*")
#: keys those dicts hold beside the methods: the count of live directions beside each variant's sign flips
NOT_METHODS = {"directions"}


def at(path: str, pattern: str) -> bool:
    """`path` matches `pattern` key by key (a `*` stands for one key, never several)."""
    keys, pats = path.split("/"), pattern.split("/")
    return len(keys) == len(pats) and all(fnmatch(k, q) for k, q in zip(keys, pats, strict=True))


def stored_methods(obj, path: str = "") -> set[str]:
    """Every key of a dict at a `METHOD_KEYED` path of one stored run."""
    out: set[str] = set()
    if isinstance(obj, dict):
        if any(at(path, pat) for pat in METHOD_KEYED):
            out |= set(obj) - NOT_METHODS
        for k, v in obj.items():
            out |= stored_methods(v, f"{path}/{k}" if path else k)
    elif isinstance(obj, list):
        for v in obj:
            out |= stored_methods(v, f"{path}/[]")
    return out


def committed_runs() -> list[Path]:
    return sorted((ROOT / "results" / "sts").rglob("*.json"))


def test_every_stored_method_name_is_in_the_registry():
    runs = committed_runs()
    assert runs, "no committed STS runs found"
    names = set().union(*(stored_methods(json.loads(p.read_text(encoding="utf-8"))) for p in runs))
    # every committed name is a registry entry, and every entry is stored somewhere: the walk sees them all
    assert names == set(C.METHOD_SPECS), (names ^ set(C.METHOD_SPECS))
    C.check_methods(names)


def test_a_planted_unknown_stored_name_is_found_and_refused():
    run = json.loads(committed_runs()[0].read_text(encoding="utf-8"))
    prot = next(iter(run["results"]["avg_ci"]))
    run["results"]["avg_ci"][prot]["SoftDecay (planted)"] = [0.0, -1.0, 1.0]
    names = stored_methods(run)
    assert "SoftDecay (planted)" in names
    with pytest.raises(ValueError, match=r"unknown method 'SoftDecay \(planted\)'") as err:
        C.check_methods(names)
    for known in C.METHOD_SPECS:
        assert repr(known) in str(err.value)


def test_the_registry_and_the_method_type_list_the_same_names_in_the_stored_order():
    assert tuple(C.METHOD_SPECS) == typing.get_args(C.Method)
    # the order of the stored dicts: the paper's rows, then our flip-free variants
    assert C.METHODS == ("vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)",
                         "SoftDecay (token)", "SoftDecay (σ/√N)", "SoftDecay (σ/σ_max)")
    assert C.FLIP_FREE == ("SoftDecay (clamped)", "SoftDecay (rescaled)")
    families = {m: s.family for m, s in C.METHOD_SPECS.items()}
    assert families["vanilla"] == "raw" and families["de-escalation"] == "de-escalation"
    assert {m for m, f in families.items() if f == "whitening"} == {"whitening", "whitening-256"}
    assert C.METHOD_SPECS["whitening-256"].k == 256 and C.METHOD_SPECS["whitening"].k is None


@pytest.mark.parametrize("entry", ["apply_method", "apply_methods", "fitted_map", "fitted_maps", "refit_bootstrap",
                                   "halfsample_refit", "crossfit"])
def test_an_unknown_method_is_refused_where_it_enters(entry):
    e = torch.randn(12, 4, generator=torch.Generator().manual_seed(0))
    gold, subsets = list(range(12)), ["a"] * 12
    call = {"apply_method": lambda: C.apply_method("whitening-512", e, e),
            "apply_methods": lambda: C.apply_methods(("vanilla", "whitening-512"), e, e),
            "fitted_map": lambda: C.fitted_map("whitening-512", e, e),
            "fitted_maps": lambda: C.fitted_maps(("whitening-512",), e, e),
            "refit_bootstrap": lambda: C.refit_bootstrap(e, e, gold, subsets, ("whitening-512",), draws=2),
            "halfsample_refit": lambda: C.halfsample_refit(e, e, gold, subsets, ("whitening-512",), draws=2),
            "crossfit": lambda: C.crossfit(e, e, gold, subsets, ("whitening-512",), splits=1, boot=1)}[entry]
    with pytest.raises(ValueError, match=r"unknown method 'whitening-512'; known: \[") as err:
        call()
    assert "'SoftDecay (rescaled)'" in str(err.value) and "'whitening-256'" in str(err.value)


def test_each_method_does_what_its_entry_says():
    g = torch.Generator().manual_seed(1)
    e1, e2 = torch.randn(30, 8, generator=g, dtype=torch.float64), torch.randn(30, 8, generator=g, dtype=torch.float64)
    out = C.apply_methods(C.METHODS + C.FLIP_FREE, e1, e2)
    for m, spec in C.METHOD_SPECS.items():
        y1, y2 = out[m]
        if spec.flipfree:
            want = SD.softdecay_flipfree(e1, -0.6, spec.flipfree), SD.softdecay_flipfree(e2, -0.6, spec.flipfree)
        elif spec.scaled_by:
            want = C.softdecay_scaled(e1, -0.6, spec.scaled_by), C.softdecay_scaled(e2, -0.6, spec.scaled_by)
        elif spec.family == "SoftDecay" and spec.level == "sentence":
            want = SD.softdecay_transform(e1, -0.6), SD.softdecay_transform(e2, -0.6)
        elif spec.family == "raw" or spec.level == "token":
            want = e1, e2
        else:
            continue
        assert torch.allclose(y1, want[0]) and torch.allclose(y2, want[1]), m
    # whitening-256 keeps min(256, d) directions: all 8 here, so it is whitening
    assert torch.allclose(out["whitening-256"][0], out["whitening"][0])
    # whitening makes the concatenation's covariance the identity
    both = torch.cat(out["whitening"])                                           # (2N, d)
    cov = (both - both.mean(0)).T @ (both - both.mean(0)) / both.shape[0]        # (d, d)
    assert torch.allclose(cov, torch.eye(8, dtype=cov.dtype), atol=1e-8)
    # de-escalation (τ = 1) centres the concatenation's columns
    assert torch.allclose(torch.cat(out["de-escalation"]).mean(0), torch.zeros(8, dtype=torch.float64), atol=1e-12)


def test_the_chapter_names_only_registered_methods_and_poolings():
    for table in (sts.REFIT_METHODS, sts.READING_METHODS, sts.PLANT_METHODS, tuple(sts.MAP_METHODS)):
        assert C.check_methods(table) == tuple(table)
    with pytest.raises(ValueError, match="unknown method 'SoftDecay'"):
        C.check_methods((*sts.READING_METHODS, "SoftDecay"))      # Table 4's label is not a method name
    with pytest.raises(ParameterError, match="extra_pooling"):
        sts.Params.resolve("ci", extra_pooling="mean")
    assert sts.Params.resolve("ci", paper_pooling="cls").paper_pooling == "cls"


def test_a_mode_outside_its_literal_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"protocol 'median': use one of \('subset-mean', 'pooled'\)"):
        C.score(np.array([0.1, 0.2, 0.3]), [1, 2, 3], ["a"] * 3, protocol="median")
    with pytest.raises(ValueError, match="pooling 'mean'"):
        C.pool(C.TokenStates(torch.zeros(2, 3, 4), torch.zeros(2, 4), None), "mean")
    with pytest.raises(ValueError, match=r"kind 'ring': use one of \('mean', 'spike'\)"):
        C.plant(torch.zeros(3, 4), "ring", 1.0)
    with pytest.raises(ValueError, match=r"how 'cap'"):
        SD.softdecay_flipfree(torch.eye(3), -0.6, "cap")
    assert config.choice("how", "max", typing.Literal["max", "sum"]) == "max"
    assert config.choice("how", "b", ("a", "b")) == "b"


def test_the_stochastic_families_are_read_from_their_registry_not_their_names():
    from helpers.core import escalation as E

    assert E.STOCHASTIC_FAMILIES == ("softmax, scale 0.1", "softmax, scale 1", "softmax, scale 10",
                                     "Dirichlet(0.1) rows", "Dirichlet(1) rows", "sparse rows (3 nonzeros)",
                                     "doubly stochastic (Sinkhorn)")
    g = torch.Generator().manual_seed(0)
    sparse = E.random_stochastic("sparse rows (3 nonzeros)", 9, g)
    assert ((sparse > 0).sum(-1) == 3).all()
    doubly = E.random_stochastic("doubly stochastic (Sinkhorn)", 9, g)
    assert torch.allclose(doubly.sum(-2), torch.ones(9, dtype=torch.float64), atol=1e-6)
    with pytest.raises(ValueError, match=r"family 'softmax, scale 2': use one of \('softmax, scale 0.1'"):
        E.random_stochastic("softmax, scale 2", 9, g)    # parsing the name would have made one
