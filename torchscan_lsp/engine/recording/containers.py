"""Work in a container's own ``forward`` is never silent (docs/metrics.md, "Module FLOPs and operator FLOPs").

Module formulas count metric-leaf calls. An operator that runs while a *container* is the innermost
active module — outside every child call — is work no formula sees: ``x + g·block(x)``, a residual
``out += identity``, functional ``F.scaled_dot_product_attention``, ``q @ k.transpose(-2, -1)``,
``torch.einsum``, the body of a scripted submodule (which global hooks do not enter). The crawler
records such operators per container call (``dataflow_tracker.DataFlowTracker``); this module turns them into
diagnostics and into the status of the module-formula totals:

* any *work* (an operator not on the ignore list of views, data movement, allocation and creation)
  makes ``module_flops`` and ``dmas`` partial, with a ``container_work`` diagnostic per container
  path that names the operators and their call counts;
* *matmul-class* work (``operator_formulas.MAC_CLASS``: ``mm``, ``addmm``, ``bmm``, ``baddbmm``,
  ``convolution``, attention and recurrent kernels — the operators with multiply-accumulates in the
  engine's MAC table) also makes ``macs`` partial: multiply-accumulates are the matrix, convolution
  and attention products (element-wise work is not one).

A container call whose children never ran (a fused fast path such as
``aten._transformer_encoder_layer_fwd``) is measured as one unit by its own formula: its operators
are covered, not escaped.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.format import layer_name
from torchscan_lsp.contract.metrics import aggregate, not_counted
from torchscan_lsp.engine.report import Diagnostic, make_diagnostic

__all__ = ["is_work", "is_matmul_class", "container_diagnostics", "mark_partial"]


def is_work(name: str) -> bool:
    """Whether operator ``name`` (``aten.add_``) does arithmetic (it is not on the ignore list)."""
    from torchscan_lsp.engine.recording.operator_table import IGNORED_OPERATORS

    return name not in IGNORED_OPERATORS


def is_matmul_class(name: str) -> bool:
    """Whether operator ``name`` is matrix, convolution, attention or recurrent work (counts as MACs):
    ``operator_formulas.MAC_CLASS``, the operators of the engine's MAC table."""
    from torchscan_lsp.engine.operator_formulas import MAC_CLASS

    return name in MAC_CLASS


def _listing(ops: dict[str, int]) -> str:
    return ", ".join(f"{op} x{count}" for op, count in sorted(ops.items()))


def container_diagnostics(escaped: dict[str, dict[str, int]]) -> tuple[list[Diagnostic], set[str]]:
    """Diagnostics for the work that escaped module formulas, and the totals it makes partial.

    Args:
        escaped: container path -> {operator name: calls} of work that ran outside every child call
            (summed over the container's calls), in first-seen order.

    Returns:
        ``(diagnostics, metrics)``: one ``container_work`` diagnostic per container path and
        affected metric, and the names of the totals to mark partial.
    """
    diagnostics: list[Diagnostic] = []
    metrics: set[str] = set()
    for path, ops in escaped.items():
        work = {op: n for op, n in ops.items() if is_work(op)}
        if not work:
            continue
        where = layer_name(path)
        message = (
            f"Operators ran in the own forward of {where}, outside every child module call, and no module "
            f"formula counts them: {_listing(work)}."
        )
        for metric in ("module_flops", "dmas"):
            diagnostics.append(make_diagnostic("container_work", metric, message, path=path))
        metrics.update(("module_flops", "dmas"))
        matmul = {op: n for op, n in work.items() if is_matmul_class(op)}
        if matmul:
            diagnostics.append(
                make_diagnostic(
                    "container_work",
                    "macs",
                    f"Matrix, convolution or attention work ran in the own forward of {where}, outside every "
                    f"child module call, and no module formula counts its multiply-accumulates: {_listing(matmul)}.",
                    path=path,
                )
            )
            metrics.add("macs")
    return diagnostics, metrics


def mark_partial(totals: dict[str, Any], names: set[str]) -> None:
    """Add a :func:`~torchscan_lsp.contract.metrics.not_counted` part to each total in ``names``:
    by the contract's one rule a complete total becomes partial (its value the known lower bound),
    a partial one stays partial and an unavailable one unavailable."""
    for name in names:
        total = totals.get(name)
        if total is not None:
            totals[name] = aggregate([total, not_counted(total["unit"], total["scope"], total["method"])])
