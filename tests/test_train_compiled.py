"""Compiled, sync-free training steps (`fit(compile=..., sync_every=...)`): reading the step statistics back
in batches changes nothing (bit for bit); a non-finite loss still stops the run at its step with the
history an eager run has; a compiled run follows the eager one within bf16 round-off (the deep LM at the
deeplm chapter's `ci` size, a few steps); the CPU default is the eager path."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from helpers.core.causal_lm import LMConfig
from helpers.train import lm, loop

CI = dict(depth=6, d_model=32, n_heads=2, d_ff=64, seq_len=32)          # the deeplm chapter's `ci` model


def _lm(steps=12, eval_every=5, seed=0, **model):
    cfg = LMConfig(variant="pre-norm", vocab=256, **{**CI, **model})
    tc = lm.LMTrainConfig(steps=steps, batch_size=8, lr=1e-3, eval_every=eval_every, seed=seed, resume_every=steps)
    g = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, 256, (64, cfg.seq_len + 1), generator=g)
    return lm.LMTask(cfg, tc, seqs[:48], seqs[48:])


def _run(task, **kw):
    model, hist = loop.fit(task, device="cpu", **kw)
    return model.state_dict(), hist


def test_reading_statistics_back_in_batches_changes_nothing():
    w1, h1 = _run(_lm(), sync_every=1)
    w7, h7 = _run(_lm(), sync_every=7)
    assert h7["loss"] == h1["loss"] and h7["eval_loss"] == h1["eval_loss"] and h7["t_sim"] == h1["t_sim"]
    assert h7["eval_step"] == h1["eval_step"] == [0, 5, 10, 12]          # hooks that need the model ran in time
    for k in w1:
        assert torch.equal(w1[k], w7[k]), k


class _Blows(loop.Task):
    """A task whose loss turns NaN at step 6."""
    name, steps_per_epoch, epochs = "blows", 10, 1

    def settings(self):
        return {}

    def build(self, device):
        m = torch.nn.Linear(2, 1)
        return m, torch.optim.SGD(m.parameters(), lr=0.1), None

    def batch(self, epoch, index, device):
        return torch.full((1, 2), float("nan") if index == 5 else 1.0)

    def loss(self, model, batch):
        loss = model(batch).square().mean()
        return loss, {"loss": loss.detach()}, 1

    def new_history(self):
        return {"loss": []}

    def hook_needs_model(self, step):
        return False

    def after_step(self, model, step, stats, history):
        self.history = history
        history["loss"].append(stats["loss"])


@pytest.mark.parametrize("every", [1, 4])
def test_a_non_finite_loss_stops_at_its_step(every):
    task = _Blows()
    with pytest.raises(FloatingPointError, match="at step 6"):
        loop.fit(task, sync_every=every)
    assert len(task.history["loss"]) == 5 and task.history["step"] == 5


def test_the_cpu_default_is_the_eager_path(monkeypatch):
    calls = []
    monkeypatch.setattr(loop, "compile_blocks", lambda m, **kw: calls.append(m))
    _run(_lm(steps=2, eval_every=2))
    assert not calls
    assert loop._resolve_compile(None, torch.device("cuda")) and not loop._resolve_compile(None, torch.device("cpu"))
    from helpers.train.glue import GlueTask

    assert lm.LMTask.compilable and not GlueTask.compilable        # the SoftDecay layer keeps Python state


def test_compile_blocks_compiles_each_repeated_block():
    model = lm.CausalLM(LMConfig(variant="pre-norm", vocab=256, **CI))
    assert loop.compile_blocks(model) == CI["depth"]
    assert list(model.state_dict()) == list(lm.CausalLM(LMConfig(variant="pre-norm", vocab=256, **CI)).state_dict())


@pytest.mark.skipif(os.environ.get("TOKUNI_TEST_COMPILE") != "1",
                    reason="compiling takes minutes on a shared 2-core CPU: TOKUNI_TEST_COMPILE=1 runs it")
def test_compiled_steps_follow_the_eager_steps():
    """Compiled (per block) against eager, 4 steps of the `ci` deep LM: losses within bf16 round-off
    (2^-8 relative) and weights within 1e-3. Outside `make test` (about 2 minutes of compilation on a
    shared 2-core CPU): `TOKUNI_TEST_COMPILE=1 python -m pytest tests/test_train_compiled.py`."""
    try:
        w_c, h_c = _run(_lm(steps=4, eval_every=4), compile=True)
    except Exception as e:                                          # no working compiler toolchain here
        pytest.skip(f"torch.compile does not run on this machine: {type(e).__name__}: {e}"[:200])
    w_e, h_e = _run(_lm(steps=4, eval_every=4), compile=False)
    np.testing.assert_allclose(h_c["loss"], h_e["loss"], rtol=2 ** -8)
    for k in w_e:
        torch.testing.assert_close(w_c[k], w_e[k], rtol=1e-3, atol=1e-3)
