"""The two counting methods a report carries (:mod:`torchscan_lsp.contract.methods`), and which
one the editor headlines.

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

from torchscan_lsp.contract.methods import METHODS, MODULES, OPERATORS, Method, method, other
from torchscan_lsp.session.settings import HEADLINES

__all__ = ["Method", "OPERATORS", "MODULES", "METHODS", "DEFAULT_HEADLINE", "method", "other"]

DEFAULT_HEADLINE = HEADLINES[0]
