"""The two counting methods a report carries, and which one the editor headlines.

Every report counts the forward twice (docs/metrics.md): the **dispatched operators**
(``operator_flops`` and ``operator_macs``: every operator that ran, inclusive per module call, a
container's own ``forward`` included) and the **module formulas** (``module_flops``, ``macs`` and
``dmas``: each metric-leaf module by its definition). Hints, code lenses and the first row of hovers
show one of them, the *headline* (the setting ``torchscan.headline``); the hover shows both.

The default is the operators: they see work no module formula sees (a residual ``x + y``,
``F.scaled_dot_product_attention``, ``q @ k.transpose(-2, -1)``, a user's norm over
``F.layer_norm``, a reshape-only module), so on real models they are complete where the module
formulas are lower bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchscan_lsp.session.settings import HEADLINES

__all__ = ["Method", "OPERATORS", "MODULES", "METHODS", "DEFAULT_HEADLINE", "method", "other"]


@dataclass(frozen=True)
class Method:
    """One counting method, by the report metrics it reads.

    Attributes:
        name: the setting's word (``"operators"`` or ``"modules"``).
        title: how hovers name it.
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
DEFAULT_HEADLINE = HEADLINES[0]


def method(name: str) -> Method:
    """The method a ``torchscan.headline`` word names (the default for anything else)."""
    return METHODS.get(name, OPERATORS)


def other(name: str) -> Method:
    """The method that is not the headline."""
    return MODULES if method(name) is OPERATORS else OPERATORS
