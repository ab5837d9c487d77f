"""A placeholder accelerator for tests: torch's `meta` device, with CUDA's placement rules.

No GPU exists where the tests run. `on_placeholder()` lets a code path run with `device="meta"` end
to end:

* tensors on `meta` have shapes and dtypes but no data, and an op that mixes a `meta` tensor with a
  CPU tensor of one or more dimensions raises ("Tensor on device cpu is not on the expected device
  meta") — as CUDA raises for a CUDA tensor met by a CPU one. So a model, input, mask or index left
  on CPU by code that was handed a device fails here as it would fail on a GPU;
* a random draw from a generator on another device than its result raises (CUDA refuses a CPU
  generator for a CUDA draw; `meta` on its own does not check, so this mode does);
* reading a value back (`float(t)`, `.item()`, `.cpu()`, `.tolist()`, `.numpy()` after `.cpu()`) returns
  made-up data instead of failing, so the code after a readback runs too: a scalar reads as 0.5 (1
  for integers, False for booleans: guards like `if bool((x <= 0).any()): raise` let the run go on),
  a tensor copied to CPU is filled from a fixed CPU generator
  (floats in [0.25, 0.75), integers 1, booleans True), and a boolean mask used as an index selects
  everything. Numbers computed from these are meaningless; only placement is checked.

What this verifies: every tensor a code path combines sits on the device it was given (or is a 0-d
CPU scalar, which CUDA also accepts), and random draws respect generator placement. What it does not:
any CUDA kernel, numerics, speed, memory, autocast on CUDA (`meta` has no autocast), nondeterminism of
CUDA kernels, or code that only runs when `torch.cuda.is_available()` is true.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

META = torch.device("meta")
aten = torch.ops.aten


class PlacementError(RuntimeError):
    """What CUDA would raise."""


def _fake_scalar(dtype: torch.dtype):
    if dtype == torch.bool:
        return False
    if dtype.is_floating_point or dtype.is_complex:
        return 0.5
    return 1


class _Readback(TorchDispatchMode):
    """Made-up data where a `meta` tensor is read back, so the code after it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.gen = torch.Generator().manual_seed(0)
        self.readbacks = 0

    def _fill(self, shape, dtype: torch.dtype) -> torch.Tensor:
        if dtype == torch.bool:
            return torch.ones(shape, dtype=torch.bool)
        if dtype.is_floating_point:
            return (0.25 + 0.5 * torch.rand(shape, generator=self.gen)).to(dtype)
        return torch.ones(shape, dtype=dtype)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten._local_scalar_dense.default and args[0].device.type == "meta":
            self.readbacks += 1
            return _fake_scalar(args[0].dtype)
        if func is aten._to_copy.default and args[0].device.type == "meta":
            target = kwargs.get("device")
            if target is not None and torch.device(target).type == "cpu":
                self.readbacks += 1
                return self._fill(args[0].shape, kwargs.get("dtype") or args[0].dtype)
        if func is aten.copy_.default and args[1].device.type == "meta" and args[0].device.type == "cpu":
            self.readbacks += 1
            return args[0].copy_(self._fill(args[1].shape, args[1].dtype))
        return func(*args, **kwargs)


class _GeneratorGuard(TorchFunctionMode):
    """CUDA's generator rule: a draw must come from a generator on the draw's device."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        g = kwargs.get("generator")
        if isinstance(g, torch.Generator) and isinstance(out, torch.Tensor) and out.device.type != g.device.type:
            raise PlacementError(f"{getattr(func, '__name__', func)}: a {g.device.type} generator drew a "
                                 f"{out.device.type} tensor (CUDA raises here)")
        return out


@contextmanager
def on_placeholder():
    """Run the block with the placeholder rules above; yields the readback counter (`.readbacks`)."""
    from torch.fx.experimental import _config as fx_config

    rb = _Readback()
    with ExitStack() as stack:
        # boolean indexing (`h[mask]`) on meta: the mask reads as all True, as the readbacks do
        stack.enter_context(fx_config.patch(meta_nonzero_assume_all_nonzero=True))
        stack.enter_context(rb)
        stack.enter_context(_GeneratorGuard())
        yield rb


def meta_tensors(module: torch.nn.Module) -> bool:
    """Whether every parameter and buffer of `module` is on the placeholder device."""
    ts = [*module.parameters(), *module.buffers()]
    return bool(ts) and all(t.device.type == "meta" for t in ts)


__all__ = ["META", "PlacementError", "on_placeholder", "meta_tensors"]
