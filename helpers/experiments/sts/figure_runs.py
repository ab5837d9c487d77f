"""What the STS chapter's figures of the local structure (the paper's Fig. 6), the t-SNE maps (Figs. 4, 7) and the
planted anisotropy draw for an encoder other than the first model: `figure_run`, on the sentences of that encoder's
main run, through the results cache (`figure_run_cached`). The first model's come from its main run (`run_model`)
and its maps (`maps`)."""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from ...core.sts import apply_method, lsds_score, pool
from ...data import load_sts
from ...hf.models import ModelUnavailable
from ...hf.sts import encode
from ...machinery import results
from .compute import map_panels, planted_scores, subsample_pairs
from .params import READING_FIELDS, Params

#: the encoders whose figure runs the `book` preset reads: the anisotropic one of the claims' scope that loads here
#: (the book MLM BERT's weights are remade only by its pretraining)
FIGURE_EXTRAS = ("SmolLM2-135M-Instruct",)


def figure_params(p: Params) -> Params:
    """The settings an extra encoder's figure run is read under: its main run's (`extra_max_pairs` pairs per set,
    `extra_pooling`)."""
    return replace(p, max_pairs=p.extra_max_pairs, pooling=p.extra_pooling)


def figure_run(loaded, q: Params) -> dict:
    """Per set of `q.datasets`, on the sentences of the encoder's main run (`q.max_pairs` per set, `q.pooling`):

    * `lsds[set]`: LSDS (eq. 6, 12 neighbours, `q.lsds_points` points) of the identity, whitening and
      sentence-level SoftDecay, with eq. (6)'s raw RBF weights and with weights normalised to sum to one, as the
      first model's main run holds them;
    * `planted[set]`: each `PLANT_METHODS` score per planted size of a common vector and a common direction
      (`compute._planted`, one random direction);
    * `maps[set]`: the t-SNE maps of the set (`compute.map_panels`, `q.tsne_pairs` pairs);
    * `pairs[set]`, `cpu_s` (the process CPU seconds it took)."""
    t0 = time.process_time()
    out: dict = {"lsds": {}, "planted": {}, "maps": {}, "pairs": {}}
    for name in q.datasets:
        ds = subsample_pairs(load_sts(name, q.source), q.max_pairs, q.seed)
        e1 = encode(loaded, ds.sentence1, q.max_length, q.batch_size, None, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, q.max_length, q.batch_size, None, desc=f"{name} s2")
        p1, p2 = pool(e1, q.pooling), pool(e2, q.pooling)
        both = torch.cat([p1, p2])
        maps = {"identity": both, "whitening": torch.cat(apply_method("whitening", p1, p2)),
                "SoftDecay": torch.cat(apply_method("SoftDecay (sentence)", p1, p2, q.alpha))}
        out["lsds"][name] = {f"{m} ({w})": lsds_score(both, F, 12, q.lsds_points, q.seed, normalise=w == "normalised")
                             for w in ("normalised", "eq. 6") for m, F in maps.items()}
        out["planted"][name] = planted_scores(p1, p2, ds, q)
        out["maps"][name] = map_panels(p1, p2, q.tsne_pairs, q)
        out["pairs"][name] = len(ds)
    out["cpu_s"] = time.process_time() - t0
    return out


def figure_run_cached(p: Params, name: str, loaded) -> tuple[dict, bool]:
    """`figure_run` of encoder `name` (`loaded()` loads it, called only when the run is computed) through the
    results cache (`sts-figures-<name>`), keyed by the settings it reads (`figure_params`)."""
    q = figure_params(p)
    return results.cached(q, f"sts-figures-{name.replace('/', '_')}", lambda: figure_run(loaded(), q),
                          drop=("models", "extra_models", "alphas", "bootstrap", *READING_FIELDS), model=name)


def figure_runs_cached(p: Params, load, from_cache: dict, unavailable: dict) -> dict[str, dict]:
    """`figure_run_cached` of every extra encoder of `p` in `FIGURE_EXTRAS` (`load(name)` loads one), each noted in
    `from_cache`; one neither committed nor computable here is named in `unavailable`."""
    figs = {}
    for name in [m for m in p.extra_models if m in FIGURE_EXTRAS]:
        try:
            figs[name], from_cache[f"figures {name}"] = figure_run_cached(p, name, lambda n=name: load(n))
        except (ModelUnavailable, results.MissingRuns) as err:
            unavailable[f"{name} (figure runs)"] = str(err)
    return figs
