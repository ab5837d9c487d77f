"""The papers' own settings, each written once with where the paper states it (as nanoGPT's `GPTConfig` writes a
model's): a signature's default, a preset or a reading that uses one names it from here."""

#: SoftDecay's α, the hyper-parameter of eq. (3), in the unsupervised STS setting: "we set α to -0.6 for all the
#: datasets and PTLMs" (Yan et al., appendix, "Unsupervised Setting")
SOFTDECAY_ALPHA = -0.6
#: the α the paper searched over (Yan et al., footnote 5: "we empirically search for the best value of α in
#: [−0.2, −0.4, −0.6, −0.8, −1.0]")
SOFTDECAY_ALPHAS = (-0.2, -0.4, -0.6, -0.8, -1.0)

__all__ = ["SOFTDECAY_ALPHA", "SOFTDECAY_ALPHAS"]
