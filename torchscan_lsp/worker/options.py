"""A job's options, from the JSON the session wrote to the arguments of ``crawl_module``:
validated as pragma options are, dtype names turned into ``torch.dtype``s, the model and any
inputs the factory returned moved to the target's ``device``."""

from __future__ import annotations

from typing import Any

import torch

from torchscan_lsp.targets.options import OptionError, check_consistency, from_toml_value, validate_option
from torchscan_lsp.worker.errors import Blame, JobError

__all__ = ["job_options", "crawl_arguments", "known_device", "usable_device", "from_json", "torch_dtype", "to_device"]


def job_options(raw: dict[str, Any], blame: Blame) -> dict[str, Any]:
    """The job's options validated as pragma options are (``None`` values dropped: they unset a
    workspace default), with JSON lists read back as the shapes they stand for.

    Raises:
        JobError: of kind ``options``, at the target's annotation.
    """
    options: dict[str, Any] = {}
    for name, value in raw.items():
        if value is None:
            continue
        value = from_json(name, value)
        try:
            validate_option(name, value)
        except OptionError as error:
            raise blame.options_error(error.message)
        options[name] = value
    try:
        check_consistency(options)
    except OptionError as error:
        raise blame.options_error(error.message)
    return options


def crawl_arguments(
    model: torch.nn.Module,
    args: tuple | None,
    kwargs: dict | None,
    options: dict[str, Any],
    target_name: str,
    blame: Blame,
) -> tuple[dict[str, Any], tuple | None, dict | None]:
    """The ``crawl_module`` arguments for ``model``: the inputs the factory returned (``args``,
    ``kwargs``; ``None``: it returned only a model) or an ``input_shape`` to generate, with the
    options that apply; the model and any provided inputs moved to ``device``. Returns them and the
    inputs (moved).

    Raises:
        JobError: of kind ``options`` for inputs given twice or not at all, a ``dtype`` for provided
            inputs, a device that cannot be used (:func:`usable_device`), or a model built on the
            meta device for another device.
    """
    crawl: dict[str, Any] = {}
    provided = args is not None
    shape = options.get("input_shape")
    if provided and shape is not None:
        raise blame.options_error(
            f"'{target_name}' returns its own inputs, and input_shape={shape!r} is "
            "set too; remove input_shape or return only the model (input_shape=None in the "
            "pragma overrides a workspace default)"
        )
    if not provided and shape is None:
        raise blame.options_error(
            f"'{target_name}' returns only a model and no input_shape is set; add "
            "input_shape=(...) (without the batch dimension) to its pragma, or return "
            "(model, args) or (model, args, kwargs)"
        )
    if provided and options.get("dtype") is not None:
        raise blame.options_error(
            f"dtype={options['dtype']!r} applies only to inputs generated from "
            f"input_shape, but '{target_name}' returns its own inputs; remove dtype and "
            "cast the inputs in the factory (dtype=None in the pragma overrides a workspace "
            "default)"
        )
    device = options.get("device")
    if device is not None:
        torch_device = usable_device(device, blame)
        if torch_device.type != "meta" and _on_meta((model, args, kwargs)):
            raise blame.options_error(
                f"'{target_name}' builds its model (or its inputs) on the meta device, which holds no data to "
                f"move to '{device}'; set device=\"meta\" to analyse it there (shapes, parameters and FLOPs; "
                "nothing can be measured)"
            )
        try:
            model.to(torch_device)
            if provided:
                args = to_device(args, torch_device)
                kwargs = to_device(kwargs, torch_device)
        except Exception as error:  # noqa: BLE001
            raise blame.options_error(
                f"cannot use device '{device}': {error}", type(error).__name__
            ) from None
    if provided:
        crawl["args"] = args
        crawl["kwargs"] = kwargs
    else:
        crawl["input_shape"] = shape
        if device is not None:
            crawl["device"] = device
        dtype = options.get("dtype")
        if dtype is not None:
            crawl["dtype"] = torch_dtype(dtype)
    for name in ("mode", "strict"):
        if options.get(name) is not None:
            crawl[name] = options[name]
    return crawl, args, kwargs


def known_device(device: str, blame: Blame) -> torch.device:
    """The ``torch.device`` of the option ``device``.

    Raises:
        JobError: of kind ``options``, at the target's annotation, for a device type PyTorch does
            not know (``"tpu"``).
    """
    try:
        return torch.device(device)
    except RuntimeError:
        raise blame.options_error(
            f"unknown device '{device}'; write a device PyTorch knows, such as \"cpu\", \"cuda\", \"cuda:1\", "
            "\"mps\" or \"meta\""
        ) from None


def usable_device(device: str, blame: Blame) -> torch.device:
    """The ``torch.device`` of the option ``device``, when this process can use it.

    Raises:
        JobError: of kind ``options``, at the target's annotation: a device type PyTorch does not
            know (:func:`known_device`), or a CUDA or MPS device this machine does not have, each
            said in those words.
    """
    torch_device = known_device(device, blame)
    if torch_device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise blame.options_error(
                f"device '{device}' is not available: this machine has no CUDA GPU that this PyTorch "
                f"({torch.__version__}) can use; use device=\"cpu\", or device=\"meta\" for shapes and counts alone"
            )
        if torch_device.index is not None and torch_device.index >= count:
            raise blame.options_error(
                f"device '{device}' is not available: this machine has {count} CUDA device(s), "
                f"cuda:0 to cuda:{count - 1}"
            )
    if torch_device.type == "mps" and not torch.backends.mps.is_available():
        raise blame.options_error(
            f"device '{device}' is not available: this machine has no Apple GPU (MPS) that this PyTorch can use; "
            "use device=\"cpu\""
        )
    return torch_device


def _on_meta(values: Any) -> bool:
    """Whether a model or any tensor in ``values`` (any nesting) lives on the meta device."""
    from torch.utils._pytree import tree_flatten

    for value in tree_flatten(values)[0]:
        if isinstance(value, torch.nn.Module):
            if any(t.is_meta for t in (*value.parameters(), *value.buffers())):
                return True
        elif isinstance(value, torch.Tensor) and value.is_meta:
            return True
    return False


def from_json(name: str, value: Any) -> Any:
    """JSON has lists, not tuples: ``[3, 32, 32]`` is one shape, ``[[3, 32], [8]]`` two.

    A job built in memory may hold the pragma's own literal, such as ``[(8,), (3,)]``; it is read
    as its JSON form would be, so a job means the same whether or not it was serialised.
    """
    if name == "input_shape" and isinstance(value, (list, tuple)):
        return from_toml_value(name, _as_json(value))
    return value


def _as_json(value: Any) -> Any:
    """``value`` with every tuple turned into a list, as a JSON round trip would turn it."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    return value


def torch_dtype(value: Any) -> Any:
    """The ``torch.dtype`` of a dtype name (``"float16"``, ``"torch.bfloat16"``), or a list of them.

    Raises:
        JobError: of kind ``options`` for a name this PyTorch has no dtype for.
    """
    if isinstance(value, (list, tuple)):
        return [torch_dtype(v) for v in value]
    name = value[len("torch.") :] if value.startswith("torch.") else value
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise JobError("options", f"this PyTorch ({torch.__version__}) has no dtype '{value}'",
                       type_name="OptionError")
    return dtype


def to_device(value: Any, device: torch.device) -> Any:
    """``value`` (any nesting of containers) with every tensor moved to ``device``."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)
