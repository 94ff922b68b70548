"""Which formulas counted a FLOP report, so that two reports that counted differently never look
alike: the method label and ``context["formulas"]`` of ``measure_flops`` and ``crawl_module``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchscan_lsp.engine.report import METHOD_FLOP_COUNTER, PACKAGE
from torchscan_lsp.version import package_version

__all__ = ["formula_context", "flop_method"]


def _describe_formula(formula: Any) -> str:
    """A caller formula in words: its qualified name and the first line of its docstring."""
    name = f"{getattr(formula, '__module__', None) or '?'}.{getattr(formula, '__qualname__', type(formula).__qualname__)}"
    doc = (getattr(formula, "__doc__", None) or "").strip().splitlines()
    return f"{name}: {doc[0].strip()}" if doc else name


def formula_context(custom_mapping: Mapping[Any, Any] | None = None) -> dict[str, Any]:
    """``context["formulas"]`` of a FLOP report: whose formulas counted (this package's, at its
    version, over PyTorch's), the PyTorch formulas they correct, and every caller formula
    (``{"operator", "description"}``, sorted by operator)."""
    from torchscan_lsp.engine import operator_formulas

    custom = sorted(
        ({"operator": str(packet), "description": _describe_formula(fn)} for packet, fn in (custom_mapping or {}).items()),
        key=lambda entry: entry["operator"],
    )
    return {
        "engine": f"{PACKAGE} operator formulas",
        "version": package_version(),
        "replaces_pytorch": sorted(str(packet) for packet in getattr(operator_formulas, "CORRECTIONS", ())),
        "custom": custom,
    }


def flop_method(custom_mapping: Mapping[Any, Any] | None = None) -> str:
    """The method label of operator FLOPs: ``METHOD_FLOP_COUNTER``, plus ``+custom(<operators>)``
    when caller formulas took part, so that reports counted differently never share a label."""
    if not custom_mapping:
        return METHOD_FLOP_COUNTER
    return f"{METHOD_FLOP_COUNTER}+custom({','.join(sorted(str(packet) for packet in custom_mapping))})"
