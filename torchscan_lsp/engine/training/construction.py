"""Building the model for the estimate when its construction reads tensor values.

Fake tensors hold no values, so a factory that reads one while it builds the model raises under
``FakeTensorMode``: timm's stochastic-depth rates (``[x.tolist() for x in torch.linspace(0, rate,
depth).split(depths)]``, its ConvNeXt, Swin and ViT models), ``nn.init.trunc_normal_`` (torchvision's
Swin and ViT), anything that does ``.item()``. :class:`FakeBuild` calls the factory under the fake
mode first (no memory, any size) and, when that reads a value, builds the model

1. **on the meta device** (``torch.device("meta")``: no memory either; an initialiser such as
   ``trunc_normal_`` runs there, a ``.tolist()`` does not), whose tensors the step then turns into
   fake CPU ones, as for a model the factory builds on the meta device itself;
2. else **for real, if it is small**: on the CPU, under :class:`_AllocationCap`, which stops the
   build once its new tensors exceed :data:`REAL_BUILD_LIMIT_BYTES`; every tensor it returns
   (parameters, buffers, inputs) is then converted to a fake tensor of the same shape, dtype and
   strides, and the real ones are freed.

Where neither works, :class:`ValueReadError` says so in one message naming the file and line that
read the value. A step that reads a value itself (a forward with ``.item()``) has no stand-in: the
same error, naming its line and phase (:func:`step_value_read`).
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map_only

from torchscan_lsp.contract.format import byte_size
from torchscan_lsp.engine.training.step import replace_tensors

__all__ = ["REAL_BUILD_LIMIT_BYTES", "VALUE_READS", "FakeBuild", "ValueReadError", "step_value_read"]

#: The most bytes of tensors a real build of the model may allocate (a quarter of a billion float32
#: parameters): the analysis built the model once already, and the measured step may build it again.
REAL_BUILD_LIMIT_BYTES = 1 << 30

#: What fake tensors raise when code reads a value (``.item()``, ``.tolist()``, ``if tensor:``) or
#: needs one for a shape (``nonzero``, boolean masks).
VALUE_READS = (DataDependentOutputException, DynamicOutputShapeException)

_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
_PACKAGE_DIR = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")) + os.sep
_STDLIB_DIR = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_INSTALLED = {"site-packages", "dist-packages"}


class ValueReadError(RuntimeError):
    """The estimate cannot run: model code reads a tensor's value, which fake tensors do not hold.

    Attributes:
        file, line: where the value was read (the innermost frame of model code: neither PyTorch's,
            this package's nor the standard library's), as the caller's ``name_file`` names it;
            ``None`` when no such frame was on the stack.
        phase: ``"construction"`` (building the model: no stand-in worked) or the step's phase.
    """

    def __init__(self, message: str, *, file: str | None, line: int | None, phase: str) -> None:
        super().__init__(message)
        self.file, self.line, self.phase = file, line, phase

    def __reduce__(self):  # keep the location when pickled
        return (_rebuild, (str(self), self.file, self.line, self.phase))


def _rebuild(message: str, file: str | None, line: int | None, phase: str) -> ValueReadError:
    return ValueReadError(message, file=file, line=line, phase=phase)


def _model_code(filename: str) -> bool:
    """Whether ``filename`` is model code: the workspace's or an installed library's (timm's), not
    PyTorch's, this package's or the standard library's (which may hold ``site-packages``)."""
    if filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    if real.startswith((_TORCH_DIR, _PACKAGE_DIR)):
        return False
    return not real.startswith(_STDLIB_DIR) or not _INSTALLED.isdisjoint(real.split(os.sep))


def _site(tb: TracebackType | None, name_file: Callable[[str], str]) -> tuple[str | None, int | None]:
    """The innermost frame of model code in ``tb``: where the value was read."""
    found: tuple[str | None, int | None] = (None, None)
    for frame, line in traceback.walk_tb(tb):
        if _model_code(frame.f_code.co_filename):
            found = (frame.f_code.co_filename, line)
    return (name_file(found[0]), found[1]) if found[0] is not None else found


def _message(what: str, file: str | None, line: int | None, why: str = "") -> str:
    where = f" at {file}:{line}" if file is not None else ""
    return (f"fake tensors hold no values, and {what} reads one{where}{why}: no estimate "
            "(the measured step runs the model for real)")


def step_value_read(error: BaseException, phase: str, name_file: Callable[[str], str] = str) -> ValueReadError:
    """The :class:`ValueReadError` of a step whose ``phase`` (``forward``, ``backward``,
    ``optimizer_step``) read a tensor's value (``error``: one of :data:`VALUE_READS`)."""
    file, line = _site(error.__traceback__, name_file)
    return ValueReadError(_message(f"the training step's {phase.replace('_', ' ')}", file, line),
                          file=file, line=line, phase=phase)


class _TooLarge(Exception):
    """A real build allocated more than its cap."""


class _AllocationCap(TorchDispatchMode):
    """Counts the bytes of every new tensor an operator returns (not its views or in-place results)
    and raises :class:`_TooLarge` past ``limit``; frees are not subtracted, so the count bounds
    what the build holds from above."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.allocated = limit, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else (out,)
        for returned, value in zip(func._schema.returns, results):
            if returned.alias_info is None and isinstance(value, torch.Tensor):
                self.allocated += value.untyped_storage().nbytes()
        if self.allocated > self.limit:
            raise _TooLarge()
        return out


class FakeBuild:
    """A factory wrapper for the estimate: calls ``build`` under ``mode``, and when that reads a
    tensor's value, on the meta device, else for real (at most ``real_limit`` bytes) with every
    tensor it returned converted to a fake one (see the module docstring).

    Args:
        build: the zero-argument factory.
        mode: the active ``FakeTensorMode`` of the estimate.
        real_limit: bytes a real build may allocate; 0 never builds for real.
        name_file: how a message names a source file (default: as Python names it).

    Attributes:
        stand_in: ``None`` (fake tensors sufficed), ``"meta"`` or ``"real"``: how the model was built.
    """

    def __init__(self, build: Callable[[], Any], mode: FakeTensorMode, *, real_limit: int = REAL_BUILD_LIMIT_BYTES,
                 name_file: Callable[[str], str] = str) -> None:
        self.build, self.mode, self.real_limit, self.name_file = build, mode, real_limit, name_file
        self.stand_in: str | None = None

    def __call__(self) -> Any:
        try:
            return self.build()
        except VALUE_READS as error:
            file, line = _site(error.__traceback__, self.name_file)
        with unset_fake_temporarily():
            try:
                with torch.device("meta"):
                    produced = self.build()
                self.stand_in = "meta"
                return self._faked(produced)  # what a factory made on another device explicitly
            except Exception as error:  # noqa: BLE001 - the meta device is only the first stand-in
                on_meta = f"{type(error).__name__}: {error}"
            why = f"; the meta device holds none either ({on_meta})"
            if self.real_limit <= 0:
                raise ValueReadError(_message("building the model", file, line, why + ", and no real build is allowed"),
                                     file=file, line=line, phase="construction") from None
            try:
                with _AllocationCap(self.real_limit):
                    produced = self.build()
            except _TooLarge:
                why += f", and building it for real allocates more than {byte_size(self.real_limit)}"
                raise ValueReadError(_message("building the model", file, line, why),
                                     file=file, line=line, phase="construction") from None
        self.stand_in = "real"
        return self._faked(produced)

    def _faked(self, produced: Any) -> Any:
        """``produced`` with every real tensor, inside it and in the modules it holds, a fake one."""
        convert = self._fake
        for leaf in tree_flatten(produced)[0]:
            if isinstance(leaf, nn.Module):
                _replace_module_tensors(leaf, convert)
        return tree_map_only(torch.Tensor, lambda t: t if _left(t) else convert(t), produced)

    def _fake(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.mode.from_tensor(tensor.detach()).requires_grad_(tensor.requires_grad)


def _left(tensor: torch.Tensor) -> bool:
    """Already fake, or on the meta device (which the step turns into fake CPU tensors itself)."""
    return isinstance(tensor, FakeTensor) or tensor.is_meta


def _replace_module_tensors(model: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Every real parameter and buffer of ``model`` replaced by ``convert``'s fake one, shared ones
    kept shared (a tied embedding and head stay one tensor)."""
    replace_tensors(model, lambda t: None if _left(t) else convert(t))
