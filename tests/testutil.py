"""Small helpers shared by the tests."""

import torch


def seeded_randn(*shape, seed=0, dtype=None):
    """Gaussian tensor from its own seeded generator (independent of the global RNG)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


#: when this test session started: a chapter result written after it was computed by this session's code
#: (`make test` sets TOKUNI_RESULTS_SINCE for both of its rounds: the chapters, then the claims tests)
#: the smallest settings that still run every step of a chapter's path, for tests that check where a path runs
#: (a device, the hub stand-in) rather than its numbers: sts on two sets, few pairs and resamples; tse with the
#: CPU-only float64 checks (identities, Figure 8, bounds) cut to a few draws
SMALL = {
    "sts": dict(datasets=("STS12", "STS-B"), max_pairs=60, bootstrap=20, draws=1, plant_directions=2,
                lsds_points=40, tsne_pairs=10, alphas=(-0.6,), plant_sizes=(0.0, 1.0),
                poolings=("first_last_l1",)),
    "tse": dict(trials=2, depth=3, w_trials=4, lemma_trials=4, prenorm_depth=3, deesc_depth=3, deesc_runs=2,
                hf_depth=2, hf_batch=2, d_model=64, eta_draws=2, eta_draws_precise=2, eta_dims=(10,),
                eta_ts=(0.5,), bound_samples=2, taus=(0.5,)),
    # the training chapters: a few steps still build, train, evaluate, probe and checkpoint every variant
    "deeplm": dict(depth=2, seq_len=16, steps=4, eval_every=2, eval_sequences=4),
    "qk": dict(seq_len=16, steps=(0, 2, 4), resume_every=2, n_samples=8, max_length=16, n_display=8,
               end_state_samples=4, end_state_length=16),
    "vit": dict(train_images=32, test_images=16, batch_size=16),
    "anisotropy": dict(text_tokens=1000, chains=8, reactions=8, n_pairs=200, gaussian_samples=1000),
    "synthesis": dict(text_inputs=8, draws=20, twins=2),
}

SESSION_START = float(__import__("os").environ.get("TOKUNI_RESULTS_SINCE") or __import__("time").time())


def ci_result(module):
    """The chapter's `ci` Result, for the claims tests. pytest runs the chapters under nbval first
    (`testpaths`), and each chapter's last cell saves its Result with its parameters to
    `_build/results/<chapter>/ci/<chapter>.json`; a file written during this session with the `ci`
    parameters is read back instead of running the experiment twice. Otherwise (a claims file run on
    its own) the experiment runs here. Either way the claims see the Result as it comes back from JSON."""
    import json

    import torch

    from helpers.machinery.results import jsonable
    from helpers.machinery.runtime import REPO_ROOT

    p = module.Params.resolve("ci")
    path = REPO_ROOT / "_build" / "results" / p.CHAPTER / "ci" / f"{p.CHAPTER}.json"
    if path.is_file() and path.stat().st_mtime >= SESSION_START:
        rec = json.loads(path.read_text())
        if rec.get("params") == jsonable(p):
            return module.Result.from_json(rec["results"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # the ci runs are small: one thread avoids oversubscription on 2 cores
    try:
        res = module.run(p)
    finally:
        torch.set_num_threads(threads)
    return module.Result.from_json(json.loads(json.dumps(res.to_json())))


def myst_chapter(scale: str) -> str:
    """The opening of a planted MyST chapter: its front matter, a title and the parameters cell that sets `scale`
    (the nbval plugin injects the run's scale there)."""
    return (f"---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\nkernelspec:\n"
            f"  display_name: Python 3\n  language: python\n  name: python3\n---\n\n# A chapter\n\n"
            f"```{{code-cell}} ipython3\n:tags: [parameters]\n\nscale = \"{scale}\"\n```\n")


def load_script(name: str):
    """`scripts/<name>.py` imported as a module (the scripts folder is no package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
