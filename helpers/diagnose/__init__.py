"""`tokuni diagnose MODEL`: the book's measures as a tool. One command measures a model layer by layer —
anisotropy and its centred counterpart, drift, the centred cloud's shape, EV₁ / TokenUni / RBF_dis, the
singular-value skew, t_sim and the mean query / mean key alignment — with intervals over the probe's inputs,
beside its untrained twin, and writes one self-contained HTML report and the JSON of every number."""

from .probe import Probe, ProbeError, default_probe, read_probe
from .run import OFFLINE_MODELS, Diagnosis, diagnose, modality_of

__all__ = ["Diagnosis", "diagnose", "modality_of", "OFFLINE_MODELS", "Probe", "ProbeError", "default_probe",
           "read_probe"]
