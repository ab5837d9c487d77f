"""The synthesis chapter: the three papers' measures on the same models, through `tokuni diagnose`.

For every offline model and its untrained twins (the same architecture with random weights, several seeds):
every measure per layer with bootstrap draws over the probe's inputs (`helpers.diagnose`), and where the model is
unlike a new draw from its twins by `tokuni diagnose`'s own twin test (`diagnose.measures.TwinTest`: the twins'
spread beside the probe's sampling, Benjamini–Hochberg over the model's cells); from the same draws, how well the
measures agree on which layers are most collapsed (Spearman correlation across layers); at the layer the model's
EV₁ rates most collapsed, what three operations do to each input's EV₁ and t_sim — SoftDecay (Yan et al.
Algorithm 1), whitening, and removing the input's mean token (Π₁^⊥, de-escalation's operation, Yu & Zhang eq. 21)
— against an isotropic Gaussian matrix of each input's shape; and, for a text-like model, Yu & Zhang's t_cos with
the special tokens kept, beside Godey et al.'s average cosine across the probe without them.

A statement across models is a claim about models, so its interval is taken over the models: a mean over
models is read with the Student-t interval of the per-model values (a correlation on Fisher's z, so its interval
stays inside [−1, 1]); the models are the ones that load offline, and the interval says how far the mean would move
with other models like them. With one model (the `ci` preset) there are no models to resample, and the mean's
interval is that model's percentile interval over its probe's inputs (`unit` says which). Per model, a rank
correlation across layers has its layers as the unit (Fisher's z over the layers, with Bonett and Wright's
standard error), and a change under an operation the percentile interval of its draws over the inputs.

Read in this order: `params` (Params, presets, the chapter's names), `compute` (the runs, `model_study`, `run`),
`result` (`Result`), `findings` (the findings as a table)."""

from .compute import curves_record, model_study, run, t_cos_with_specials
from .findings import FINDINGS
from .params import HEADLINE, LEVEL, RANKED, TCOS_MODEL, Params
from .result import Result

__all__ = ["Params", "Result", "run", "model_study", "curves_record", "t_cos_with_specials", "RANKED", "HEADLINE",
           "TCOS_MODEL", "LEVEL", "FINDINGS"]
