"""The configuration classes speak the book's vocabulary (d_model, n_heads, d_ff, batch_size) while every key
stays what it was: `stored()` gives the names the runs were keyed with, so committed results, cache keys and
checkpoint folders made before the rename are still found. The hashes below were computed before it."""

from dataclasses import asdict, fields

import pytest

from helpers.core.vit import ViTConfig
from helpers.experiments import anisotropy, qk
from helpers.machinery.results import settings_hash
from helpers.train import glue as glue_train
from helpers.train import lm, mlm
from helpers.train import vit as vit_train

CONFIGS = (ViTConfig, vit_train.TrainConfig, mlm.PretrainConfig, lm.LMTrainConfig, glue_train.FinetuneConfig)


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_the_book_vocabulary(cls):
    names = {f.name for f in fields(cls)}
    assert not names & {"hidden", "heads", "ffn", "intermediate", "batch"}
    assert set(cls.STORED_AS) <= names


@pytest.mark.parametrize("scale, digest", [("ci", "77279e6e2b3e"), ("book", "3e678c430018")])
def test_qk_checkpoint_folders_unchanged(scale, digest):
    p = qk.Params.resolve(scale)
    pc = qk.pretrain_config(p, 0)
    assert settings_hash({**pc.stored(), "precision": p.precision}) == digest
    assert settings_hash({**asdict(pc), "precision": p.precision}) != digest     # the rename is real


def test_other_keys_unchanged():
    assert settings_hash({"byte_mlm": anisotropy.BYTE_MLM.stored()}) == "690aaa9783e6"
    assert settings_hash(anisotropy.BYTE_MLM.stored()) == "1a01b9c99e00"
    assert settings_hash(ViTConfig().stored()) == "fde87a6d78eb"
    assert list(ViTConfig().stored())[:5] == ["variant", "depth", "hidden", "ffn", "heads"]


@pytest.mark.parametrize("cls", (vit_train.TrainConfig, lm.LMTrainConfig, glue_train.FinetuneConfig),
                         ids=lambda c: c.__name__)
def test_training_configs_no_key_reads_are_stored_under_their_own_names(cls):
    """The training recipes' settings enter no cache key and no run hash (a run is keyed by its chapter's Params):
    only a checkpoint's resume check and a history's record of them. They are stored as they are named."""
    assert not cls.STORED_AS and "batch_size" in cls().stored() and "batch" not in cls().stored()


def test_the_renames_kept_are_those_in_committed_keys():
    """`PretrainConfig` keeps its stored names: the byte MLM's committed training run and the STS path runs are
    keyed by them."""
    import json

    from helpers.machinery.runtime import REPO_ROOT

    byte = REPO_ROOT / "results" / "anisotropy" / "book" / "byte-mlm-training.json"
    if byte.is_file():
        assert json.loads(byte.read_text())["key"]["config"] == json.loads(json.dumps(anisotropy.BYTE_MLM.stored()))
    assert {"hidden", "heads", "intermediate", "batch"} <= set(anisotropy.BYTE_MLM.stored())
