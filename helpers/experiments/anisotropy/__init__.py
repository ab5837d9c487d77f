"""The anisotropy chapter (Godey et al. §3, Appendices A-B): layer-wise anisotropy, drift norm,
normalised drift and mean-removed cosine of real pretrained models across tokenisations and modalities —
subword text, bytes (a byte-level MLM trained here), antibody residues, reaction SMILES atoms, speech,
a vision Transformer and a CNN — and of the untrained twin of each Transformer; the drift–anisotropy
correlation tests and the isotropic-Gaussian baseline.

Read in this order: `params` (the models, `Params`, its presets and rules), `compute` (the runs and readings,
through the results cache, and `run`), `records` (the typed records a stored run is read into), `result` (`Result`
and its statistics across the records), `findings` (the claims, as a table of specs)."""

from ...core.stats import drift_layer_test
from .compute import (
                      CENTRED_MODELS,
                      CNN_DRAWS,
                      DECODER,
                      SHAPE_KEYS,
                      SPEECH_DRIFT_MODEL,
                      byte_mlm,
                      byte_mlm_folder,
                      centred_jackknife,
                      cnn_map_bootstrap,
                      gaussian_baseline,
                      layer_vectors,
                      measure,
                      measure_models,
                      measure_shapes,
                      measure_zeroed,
                      resampled_frame_stats,
                      resampled_gram_stats,
                      run,
                      shape_params,
                      speech_drift_bootstrap,
                      unigram_cross_entropy,
                      vision_special_tokens,
                      zero_token_type,
)
from .findings import BYTES_VS_KEYS, FINDINGS, SPEECH_KEYS, Spec
from .params import (
                      ALPHA,
                      BYTE_MLM,
                      BYTE_MLM_DESCRIPTION,
                      BYTE_MLM_NAME,
                      BYTE_MLM_TRAINING,
                      CHARACTER_LEVEL,
                      IDENTITY_TOL,
                      MODALITIES,
                      NO_TWIN,
                      OFFLINE_MODELS,
                      PAPER_ANISOTROPY_MODELS,
                      PAPER_NAMES,
                      PAPER_OFFLINE,
                      SENTENCE_ENCODERS,
                      SHAPE_MODELS,
                      TOKEN_TYPE,
                      Params,
)
from .result import Result

__all__ = [
    "ALPHA", "BYTES_VS_KEYS", "BYTE_MLM", "BYTE_MLM_DESCRIPTION", "BYTE_MLM_NAME", "BYTE_MLM_TRAINING",
    "CENTRED_MODELS", "CHARACTER_LEVEL", "CNN_DRAWS", "DECODER", "FINDINGS", "IDENTITY_TOL", "MODALITIES", "NO_TWIN",
    "OFFLINE_MODELS", "PAPER_ANISOTROPY_MODELS", "PAPER_NAMES", "PAPER_OFFLINE", "SENTENCE_ENCODERS", "SHAPE_KEYS",
    "SHAPE_MODELS", "SPEECH_DRIFT_MODEL", "SPEECH_KEYS", "TOKEN_TYPE", "Params", "Result", "Spec",
    "byte_mlm", "byte_mlm_folder", "centred_jackknife", "cnn_map_bootstrap", "drift_layer_test",
    "gaussian_baseline", "layer_vectors", "measure", "measure_models", "measure_shapes", "measure_zeroed",
    "resampled_frame_stats", "resampled_gram_stats", "run", "shape_params", "speech_drift_bootstrap",
    "unigram_cross_entropy", "vision_special_tokens", "zero_token_type",
]
