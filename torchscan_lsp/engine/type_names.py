"""The name a report gives a module class (``LayerReport.type``, formula warnings).

Its ``__name__``, except for classes of PyTorch's quantization namespaces, whose bare names would
read like their float namesakes (``Linear``): those are named by their public dotted path.
"""

import importlib

__all__ = ["QUANTIZED_PREFIXES", "type_name"]

#: Module prefixes of PyTorch's quantized, intrinsic and QAT namespaces.
QUANTIZED_PREFIXES = ("torch.ao.nn.", "torch.nn.quantized", "torch.nn.intrinsic", "torch.nn.qat")

_TYPE_NAMES: dict[type, str] = {}


def type_name(cls: type) -> str:
    """The name reports give ``cls``: its ``__name__``, or for a class of a quantization namespace
    the public dotted name (``torch.ao.nn.quantized.dynamic.Linear``, else its defining module's)."""
    name = _TYPE_NAMES.get(cls)
    if name is not None:
        return name
    name = cls.__name__
    module = getattr(cls, "__module__", "") or ""
    if module.startswith(QUANTIZED_PREFIXES):
        public = module.split(".modules.", 1)[0] if ".modules." in module else module
        try:
            found = getattr(importlib.import_module(public), cls.__name__, None) is cls
        except ImportError:  # pragma: no cover - a namespace that cannot be imported alone
            found = False
        name = f"{public if found else module}.{cls.__qualname__}"
    _TYPE_NAMES[cls] = name
    return name
