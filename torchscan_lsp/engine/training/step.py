"""One training step of a model, built from a factory: forward, loss, backward, optimizer step.

A factory (a zero-argument callable) returns one of

* ``model`` — the inputs are generated from ``input_shape`` (batch dimension excluded), with the
  batch size ``train={"batch": N}`` asks for (1 by default);
* ``(model, args)`` or ``(model, args, kwargs)`` — the factory's own inputs, as for an analysis;
* a mapping ``{"model": model, "args": (...), "kwargs": {...}, "loss": fn, "targets": (...)}``
  (every key but ``model`` optional), for a loss of its own: ``fn(output, *targets)`` must return
  a scalar tensor. ``targets`` (labels, masks) are passed to the loss, never to the model, e.g.
  ``{"model": net, "args": (images,), "loss": torch.nn.functional.cross_entropy, "targets": (labels,)}``.

Without a loss the step minimises the sum of every floating-point tensor of the output that requires
grad (``out.sum()`` for a single tensor): a loss with the output's whole graph and a gradient of
ones, which is what a training step costs whatever the real loss is, up to the loss itself.

The step (:class:`TrainingStep`) runs in three phases, in this order: ``forward`` (the model's
forward and the loss, under ``torch.autocast`` when asked), ``backward`` (``loss.backward()``) and
``optimizer_step`` (``optimizer.step()`` then ``optimizer.zero_grad(set_to_none=True)``). The output
and the loss stay referenced until the step ends, as in a plain loop (``out = model(x)``;
``loss = ...``; ``loss.backward()``; ``optimizer.step()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map_only

from torchscan_lsp.contract.training import TrainOptions

__all__ = ["PHASES", "TrainingStep", "build_training_step", "replace_tensors", "resolve_foreach", "sum_of_outputs"]

#: The phases of a step, in the order they run.
PHASES = ("forward", "backward", "optimizer_step")
_FACTORY_KEYS = ("model", "args", "kwargs", "loss", "targets")
_OPTIMIZER_CLASSES = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD", "adafactor": "Adafactor"}


def sum_of_outputs(output: Any) -> torch.Tensor:
    """The default loss: the sum of every floating-point tensor in ``output`` that requires grad.

    Raises:
        ValueError: the output holds no such tensor (nothing to differentiate).
    """
    leaves = [leaf for leaf in tree_flatten(output)[0] if _differentiable(leaf)]
    if not leaves and isinstance(output, Mapping):  # mappings that pytree does not know (ModelOutput)
        leaves = [value for value in output.values() if _differentiable(value)]
    if not leaves:
        raise ValueError(
            "the model's output holds no floating-point tensor that requires grad, so the default loss "
            "(the sum of the outputs) has nothing to differentiate; return a loss from the factory: "
            "{'model': model, 'args': args, 'loss': fn}."
        )
    total = leaves[0].sum()
    for leaf in leaves[1:]:
        total = total + leaf.sum()
    return total


def _differentiable(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.requires_grad


def resolve_foreach(foreach: bool | None, device_type: str) -> bool:
    """``foreach`` as PyTorch would pick it for tensors on ``device_type`` when given ``None``.

    PyTorch's default (``torch.optim.optimizer._default_to_fused_or_foreach``) is the multi-tensor
    implementation on the devices that have foreach kernels (CUDA and XPU) and the per-tensor loop
    elsewhere (CPU). It is resolved here, from the *target* device, because PyTorch's own check
    refuses fake tensors and would always choose the loop.
    """
    if foreach is not None:
        return foreach
    from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices

    return device_type in _get_foreach_kernels_supported_devices()


class TrainingStep:
    """A model, its inputs, its loss and its optimizer, ready to run one training step.

    Args:
        model: the model, already in the step's dtype and on its device (put in training mode).
        args, kwargs: the forward call's values.
        options: the validated :class:`TrainOptions`.
        foreach: the resolved ``foreach`` of the optimizer (see :func:`resolve_foreach`).
        loss: ``loss(output, *targets) -> scalar tensor``; ``None`` for :func:`sum_of_outputs`.
        targets: extra values for the loss.

    Raises:
        ValueError: the model has no parameter that requires grad.
    """

    def __init__(
        self, model: nn.Module, args: tuple, kwargs: dict[str, Any], *, options: TrainOptions, foreach: bool,
        loss: Callable[..., Any] | None = None, targets: tuple = (),
    ) -> None:
        self.model, self.args, self.kwargs = model, args, kwargs
        self.options, self.foreach = options, foreach
        self.loss_fn, self.targets = loss, targets
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError("the model has no parameter that requires grad: a training step would update nothing.")
        optimizer_class = getattr(torch.optim, _OPTIMIZER_CLASSES[options.optimizer], None)
        if optimizer_class is None:
            raise ValueError(f"this PyTorch ({torch.__version__}) has no torch.optim.{_OPTIMIZER_CLASSES[options.optimizer]}; "
                             "choose another optimizer.")
        self.optimizer = optimizer_class(self.parameters, **{**options.optimizer_options, "foreach": foreach})
        self.output: Any = None
        self.loss: torch.Tensor | None = None
        self.running: str | None = None

    @property
    def device_type(self) -> str:
        """The device type of the parameters (where autocast applies)."""
        return self.parameters[0].device.type

    def init_optimizer_state(self) -> None:
        """Create the optimizer's state with one step on zero gradients, so that a later step is a
        steady-state step (the state live from its start, as in every step after the first).

        The zero gradients leave the parameters unchanged except for weight decay's shrinking."""
        for parameter in self.parameters:
            parameter.grad = torch.zeros_like(parameter)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def forward(self) -> None:
        """The model's forward and the loss (under autocast when asked)."""
        autocast = self.options.autocast
        context = (
            torch.autocast(device_type=self.device_type, dtype=getattr(torch, autocast)) if autocast else nullcontext()
        )
        with context:
            self.output = self.model(*self.args, **self.kwargs)
            loss = sum_of_outputs(self.output) if self.loss_fn is None else self.loss_fn(self.output, *self.targets)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(f"the factory's loss must return a scalar tensor, got {shape}.")
        self.loss = loss

    def backward(self) -> None:
        """``loss.backward()``."""
        if self.loss is None:
            raise RuntimeError("backward before forward: call forward() first.")
        self.loss.backward()

    def optimizer_step(self) -> None:
        """``optimizer.step()``, then the gradients are freed (``zero_grad(set_to_none=True)``)."""
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def run(self, on_phase: Callable[[str], None] | None = None, phases: tuple[str, ...] = PHASES) -> None:
        """Run ``phases`` (of :data:`PHASES`, in that order; all three by default); ``on_phase(name)``
        is called before each, and ``running`` names it while it runs (after an error, the phase that
        raised). The output and the loss are released at the end."""
        try:
            for name in phases:
                if on_phase is not None:
                    on_phase(name)
                self.running = name
                getattr(self, name)()
            self.running = None
        finally:
            self.output = self.loss = None


def _unpack(produced: Any) -> dict[str, Any]:
    if isinstance(produced, nn.Module):
        return {"model": produced}
    if isinstance(produced, tuple) and 2 <= len(produced) <= 3 and isinstance(produced[0], nn.Module):
        return dict(zip(("model", "args", "kwargs"), produced))
    if isinstance(produced, Mapping) and isinstance(produced.get("model"), nn.Module):
        unknown = [key for key in produced if key not in _FACTORY_KEYS]
        if unknown:
            raise TypeError(f"the factory returned a mapping with unknown keys {unknown}; its keys are {', '.join(_FACTORY_KEYS)}.")
        if produced.get("loss") is not None and not callable(produced["loss"]):
            raise TypeError(f"the factory's 'loss' must be callable as loss(output, *targets), got {type(produced['loss']).__name__}.")
        return dict(produced)
    raise TypeError(
        "the factory must return a model, (model, args), (model, args, kwargs) or "
        f"{{'model': model, 'args': ..., 'kwargs': ..., 'loss': fn, 'targets': ...}}; got {type(produced).__name__}."
    )


def _on_meta(model: nn.Module) -> bool:
    return any(tensor.is_meta for tensor in (*model.parameters(), *model.buffers()))


def replace_tensors(model: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor | None]) -> None:
    """Replace each parameter and buffer for which ``convert`` returns a tensor, keeping shared ones
    shared (a tied embedding and head stay one tensor).

    ``Module.to`` and ``Module.to_empty`` cannot do it under ``FakeTensorMode``: they swap fake
    tensors in place, which PyTorch refuses for a tensor the fake mode holds a weak reference to."""
    replaced: dict[int, torch.Tensor | None] = {}

    def new(tensor: torch.Tensor, parameter: bool) -> torch.Tensor | None:
        if id(tensor) not in replaced:
            converted = convert(tensor)
            if converted is not None and parameter:
                converted = nn.Parameter(converted, requires_grad=tensor.requires_grad)
            replaced[id(tensor)] = converted
        return replaced[id(tensor)]

    for module in model.modules():
        for table, parameter in ((module._parameters, True), (module._buffers, False)):
            for name, tensor in table.items():
                if tensor is not None and (converted := new(tensor, parameter)) is not None:
                    table[name] = converted


def _generate(input_shape: Any, input_dtype: Any, batch: int, dtype: torch.dtype, device: torch.device) -> tuple:
    shapes = [input_shape] if isinstance(input_shape, tuple) else list(input_shape)
    dtypes = input_dtype if isinstance(input_dtype, (list, tuple)) else [input_dtype] * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"dtype names {len(dtypes)} dtypes for {len(shapes)} input shapes.")
    inputs = []
    for shape, kind in zip(shapes, dtypes):
        if not isinstance(shape, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise TypeError(f"input_shape must be a tuple of ints or a list of such tuples, got {shape!r}.")
        kind = kind or dtype
        full = (batch, *shape)
        if kind.is_floating_point:
            inputs.append(torch.rand(full, dtype=kind, device=device))
        else:  # integer ids and boolean masks: zeros are valid indices, ones an all-visible mask
            inputs.append((torch.ones if kind is torch.bool else torch.zeros)(full, dtype=kind, device=device))
    return tuple(inputs)


def build_training_step(
    build: Callable[[], Any], options: TrainOptions, *, input_shape: Any = None, input_dtype: Any = None,
    foreach_device: str = "cpu", materialise: bool = False, device: torch.device | None = None,
    prepare: Callable[[nn.Module], None] | None = None,
) -> TrainingStep:
    """Call ``build`` and make a :class:`TrainingStep` of what it returned.

    Args:
        build: the zero-argument factory (see the module docstring for what it may return).
        options: the step's options; ``options.dtype`` casts the model and every floating tensor
            among its inputs and targets (``None`` keeps the factory's dtypes).
        input_shape: a shape tuple (batch dimension excluded) or a list of them, for a factory that
            returns only a model; ``options.batch`` (default 1) is the batch dimension.
        input_dtype: a ``torch.dtype`` (or one per shape) of the generated inputs; floating inputs
            default to the model's dtype.
        foreach_device: the device type whose default ``foreach`` the optimizer takes.
        materialise: turn a model built on the meta device into empty tensors on the CPU (under a
            ``FakeTensorMode`` these are fake: nothing is allocated).
        device: move the model, its inputs and targets there (``None``: leave them where they are).
        prepare: called with the model once it is in the step's dtype and on its device, before the
            optimizer is made (a plan applies activation checkpointing and sharding there).

    Raises:
        TypeError: the factory returned something else, or an input is of the wrong type.
        ValueError: inputs are missing or given twice, ``batch`` is set for the factory's own inputs,
            or the model cannot be trained (no parameter requires grad).
        RuntimeError: the model is on the meta device and ``materialise`` is false.
    """
    parts = _unpack(build())
    model: nn.Module = parts["model"]
    if _on_meta(model):
        if not materialise:
            raise RuntimeError("the model is on the meta device: it holds no memory and runs no kernels to measure.")
        replace_tensors(model, lambda t: torch.empty_like(t, device="cpu") if t.is_meta else None)
    dtype = getattr(torch, options.dtype) if options.dtype else None
    if dtype is not None:  # as Module.to(dtype): floating-point tensors only
        replace_tensors(model, lambda t: t.to(dtype) if t.is_floating_point() and t.dtype != dtype else None)
    if device is not None:
        model.to(device)
    model.train()
    if prepare is not None:
        prepare(model)
    provided = "args" in parts or "kwargs" in parts
    if provided == (input_shape is not None):
        raise ValueError(
            "give the step's inputs once: input_shape for a factory that returns only a model, or the "
            "factory's own (model, args, kwargs) without input_shape."
        )
    reference = next(model.parameters(), None)
    model_dtype = reference.dtype if reference is not None else torch.get_default_dtype()
    if provided:
        if options.batch is not None:
            raise ValueError("train option 'batch' applies to inputs generated from input_shape; the factory returns its own inputs.")
        args, kwargs = tuple(parts.get("args") or ()), dict(parts.get("kwargs") or {})
    else:
        args, kwargs = _generate(input_shape, input_dtype, options.batch or 1, model_dtype, device or torch.device("cpu")), {}
    targets = tuple(parts.get("targets") or ())
    if materialise or dtype is not None or device is not None:
        args, kwargs, targets = tree_map_only(
            torch.Tensor, lambda t: _prepare(t, dtype, materialise, device), (args, kwargs, targets)
        )
    return TrainingStep(
        model, args, kwargs, options=options, foreach=resolve_foreach(options.foreach, foreach_device),
        loss=parts.get("loss"), targets=targets,
    )


def _prepare(tensor: torch.Tensor, dtype: torch.dtype | None, materialise: bool, device: torch.device | None) -> torch.Tensor:
    if materialise and tensor.is_meta:
        tensor = torch.empty_like(tensor, device="cpu")
    if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    if device is not None and tensor.device != device:
        tensor = tensor.to(device)
    return tensor
