"""The two methods every report counts the forward by, as the metrics they read.

A report counts the forward twice (docs/metrics.md): the **dispatched operators**
(``operator_flops`` and ``operator_macs``: every operator that ran, inclusive per module call, a
container's own ``forward`` included) and the **module formulas** (``module_flops``, ``macs`` and
``dmas``: each metric-leaf module by its definition). Every view that headlines one of them (the
editor's hints, ``torchscan.headline``; the HTML report's module table) names it by a
:class:`Method` from here, so they cannot disagree on which metric a method's FLOPs are.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Method", "OPERATORS", "MODULES", "METHODS", "method", "other"]


@dataclass(frozen=True)
class Method:
    """One counting method, by the report metrics it reads.

    Attributes:
        name: the setting's word (``"operators"`` or ``"modules"``).
        title: how hovers and reports name it.
        flops: the metric of its FLOPs (a layer record's and the totals').
        macs: the metric of its MACs.
        dmas: the metric of its DMAs, or ``None`` (operators have none).
    """

    name: str
    title: str
    flops: str
    macs: str
    dmas: str | None

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metric names it reads, FLOPs first."""
        return tuple(name for name in (self.flops, self.macs, self.dmas) if name)


OPERATORS = Method("operators", "dispatched operators", "operator_flops", "operator_macs", None)
MODULES = Method("modules", "module formulas", "module_flops", "macs", "dmas")
METHODS = {OPERATORS.name: OPERATORS, MODULES.name: MODULES}


def method(name: str) -> Method:
    """The method a ``torchscan.headline`` word names (the operators for anything else)."""
    return METHODS.get(name, OPERATORS)


def other(name: str) -> Method:
    """The method that is not the one ``name`` names."""
    return MODULES if method(name) is OPERATORS else OPERATORS
