"""`tokuni diagnose MODEL`: the book's measures as a tool. One command measures a model layer by layer —
anisotropy and its centred counterpart, drift, the centred cloud's shape, EV₁ / TokenUni / RBF_dis, the
singular-value skew, t_sim and the mean query / mean key alignment — with intervals over the probe's inputs,
beside several untrained twins, flags the cells where the model is unlike a random draw of its architecture (with
the run's power), and writes one self-contained HTML report and the JSON of every number and of how to rerun it.
`tokuni compare` and `tokuni diagnose A B` put models side by side (`compare`), `tokuni rerun` runs a JSON again
(`rerun`). In Python: `d = diagnose("all-MiniLM-L6-v2")`, then `write_report(d, "out/minilm")`."""

from .checks import DiagnoseError
from .probe import Probe, ProbeError, default_probe, read_probe
from .report import write_report
from .run import OFFLINE_MODELS, Diagnosis, diagnose, modality_of

__all__ = ["Diagnosis", "diagnose", "write_report", "modality_of", "OFFLINE_MODELS", "Probe", "ProbeError",
           "DiagnoseError", "default_probe", "read_probe"]
