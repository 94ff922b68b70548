"""The Python warnings a job raises, kept out of the job's output and put in its report.

A warning the model, its libraries or the analysis trigger (``torch.utils.checkpoint``'s "None of
the inputs have requires_grad=True" on a frozen model that the analysis runs without gradients,
say) would be printed on the job's stderr, and from there on ``scan``'s and the editor's log, as a
stray line nobody asked for. :func:`recorded` catches them while the job runs, under the filters in
force (the process's own, and any the model sets: what would have been printed, and nothing more).
A result with a report gets each distinct one as a ``python_warning`` diagnostic
(docs/report-schema.md), naming no metric, since nothing is missing from any count; a failed
result has no report, so they are printed to the job's log after all, beside the error they may
explain.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from torchscan_lsp.contract.report import DIAGNOSTIC_PYTHON_WARNING, NO_METRIC, make_diagnostic
from torchscan_lsp.worker.workspace import Workspace

__all__ = ["recorded", "attach"]


@contextlib.contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    """Catch every warning shown while the block runs, into the list it yields, printing none."""
    with warnings.catch_warnings(record=True) as caught:
        yield caught


def _diagnostics(caught: list[warnings.WarningMessage], workspace: Workspace) -> list[dict[str, Any]]:
    """One diagnostic per distinct warning (category, text and place), with how often it came:
    ``UserWarning: None of the inputs have requires_grad=True. Gradients will be None (raised at
    torch/utils/checkpoint.py:238)``."""
    counts: dict[tuple[str, str, str, int], int] = {}
    for item in caught:
        key = (item.category.__name__, str(item.message), workspace.shown(item.filename), int(item.lineno or 0))
        counts[key] = counts.get(key, 0) + 1
    out = []
    for (category, text, file, line), count in counts.items():
        times = f", {count} times" if count > 1 else ""
        out.append(make_diagnostic(DIAGNOSTIC_PYTHON_WARNING, NO_METRIC, f"{category}: {text} (raised at {file}:{line}{times})"))
    return out


def attach(result: dict[str, Any], caught: list[warnings.WarningMessage], workspace: Workspace | None) -> None:
    """Put the warnings ``caught`` while ``result``'s job ran in its report's diagnostics, or, for a
    result without a report, print them to the job's log (``sys.stderr``) as Python would have."""
    if not caught:
        return
    report = result.get("report")
    if isinstance(report, dict) and workspace is not None:
        report.setdefault("diagnostics", []).extend(_diagnostics(caught, workspace))
        return
    for item in caught:
        print(warnings.formatwarning(item.message, item.category, item.filename, item.lineno, item.line),
              end="", file=sys.stderr)
