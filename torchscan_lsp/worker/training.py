"""The training-step measurement of a job: ``analyse_training_step`` on the target's factory.

It runs when the job asks for ``train`` (the "Measure training step" code lens, ``scan --train``,
``measure=["train"]``): both memory methods, the estimate on fake tensors and a real step; and, by
itself, whenever the target's options hold ``train`` or ``train_memory`` (a pragma's, or the
workspace's ``[tool.torchscan-lsp]``): the estimate alone, which allocates nothing, so that a step
over its budget is a warning as soon as the file is saved. The editor runs that estimate as a job
of its own (phase ``training``) after the forward analysis (phase ``forward``), whose result then
carries the model's :func:`structure_digest`, so that the session runs the estimate again only when
the structure changed. The factory is called again for each method (the analysis's model is left as
it is); a failure is the measurement's record, located as a forward error (marked ``requested``
when the job asked for it), and never fails the job; options that do not fit the target (a
``batch`` for the factory's own inputs) are an options error, as for the analysis.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from torchscan_lsp.contract.training import estimate_unasked
from torchscan_lsp.worker.errors import Blame
from torchscan_lsp.worker.limits import format_mebibytes
from torchscan_lsp.worker.measurements import failed
from torchscan_lsp.worker.options import known_device, torch_dtype

__all__ = ["estimate_unasked", "check_options", "measure_training", "structure_digest"]


def structure_digest(model: torch.nn.Module) -> str:
    """SHA-256 hex digest of what a training step of ``model`` depends on besides the inputs and
    the options: every submodule's path, class (module and qualified name) and ``extra_repr()``
    (a convolution's stride, an activation's ``inplace``), and every parameter's and buffer's
    name, shape, dtype, device and ``requires_grad``. Two builds of the same code give the same
    digest (it holds no values and no addresses); a comment edited gives the same digest."""
    entries = []
    for path, module in model.named_modules():
        kind = type(module)
        tensors = [(name, list(t.shape), str(t.dtype), str(t.device), bool(t.requires_grad))
                   for name, t in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
                   if t is not None]
        try:
            extra = module.extra_repr()
        except Exception:  # noqa: BLE001 - a broken repr leaves the class and the tensors to tell
            extra = "?"
        entries.append([path, f"{kind.__module__}.{kind.__qualname__}", extra, tensors])
    return hashlib.sha256(json.dumps(entries, default=str).encode("utf-8")).hexdigest()


def check_options(options: dict[str, Any], *, own_inputs: bool, name: str, blame: Blame) -> None:
    """Check, before anything runs, that the training options fit the target named ``name``
    (``own_inputs``: its factory returned its inputs).

    Raises:
        JobError: of kind ``options``, at the target's annotation: a ``batch`` for the factory's own
            inputs, a ``device`` PyTorch does not know (a CUDA device this machine lacks is fine:
            the step is estimated for it, derived).
    """
    train = _set(options)
    if own_inputs and "batch" in train:
        raise blame.options_error(
            f"train option 'batch' applies to inputs generated from input_shape, but '{name}' returns its own "
            "inputs; remove batch and make the batch in the factory (train={\"batch\": None} in the pragma "
            "overrides a workspace default)"
        )
    device = train.get("device") or options.get("device")
    if device is not None:
        known_device(device, blame)


def measure_training(factory: Any, options: dict[str, Any], *, measured: bool, blame: Blame,
                     memory_mb: float | None = None) -> dict[str, Any]:
    """The training report of the target ``factory`` under the job's ``options`` (its ``train``
    options, checked by :func:`check_options`, ``train_memory`` budget, ``input_shape``, ``dtype``
    and ``device``); with ``measured`` false the estimate alone. A line the estimate names (where
    model code read a tensor's value) is named as every location of a result: workspace-relative,
    or the absolute path of an installed library's file. ``memory_mb``: the job's memory limit; a
    real step on the CPU that the estimate puts above it is not run (it would stop the whole job,
    the estimate and the analysis with it), and the measured column says why."""
    from torchscan_lsp.engine.training import analyse_training_step

    train = _set(options)
    shape = options.get("input_shape")
    dtype = options.get("dtype")
    try:
        return analyse_training_step(
            factory, train=train, input_shape=shape,
            input_dtype=torch_dtype(dtype) if dtype is not None and shape is not None else None,
            device=train.get("device") or options.get("device"), memory_budget=options.get("train_memory"),
            measure=measured, name_file=lambda file: blame.workspace.relative(file) or file,
            measure_limit=(int(memory_mb * 1024 * 1024), f"the {format_mebibytes(memory_mb)} memory limit of the "
                           "analysis (torchscan.memoryLimitMb)") if memory_mb else None,
        )
    except Exception as error:  # noqa: BLE001 - the analysis stands; this measurement failed alone
        return failed(error, blame, requested=measured)


def _set(options: dict[str, Any]) -> dict[str, Any]:
    """The ``train`` options that are set (``None`` unsets a workspace default)."""
    return {key: value for key, value in (options.get("train") or {}).items() if value is not None}
