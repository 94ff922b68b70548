"""Texts and identifiers the LSP features share, so that no feature imports another: command
ids (docs/server.md), the stale-result note, why a target was not analysed or failed, and the
custom status notification's method."""

from __future__ import annotations

from torchscan_lsp.contract.tracebacks import traceback_text
from torchscan_lsp.session.state import TargetState

__all__ = [
    "REANALYSE",
    "SHOW_REPORT",
    "MEASURE_LATENCY",
    "MEASURE_MEMORY",
    "MEASURE_TRAINING",
    "PLAN_TRAINING",
    "COMPARE_REPORT",
    "COMMANDS",
    "STATUS_METHOD",
    "STALE_NOTE",
    "ESTIMATE_RUNNING_NOTE",
    "STALE_MARK",
    "allow_setting",
    "untrusted_message",
    "error_message",
    "traceback_block",
]

# The project writes "analyse"; the command id keeps the spelling editors' key bindings and the
# shipped clients already use (docs/server.md, "Commands").
REANALYSE = "torchscan.reanalyze"
SHOW_REPORT = "torchscan.showReport"
MEASURE_LATENCY = "torchscan.measureLatency"
MEASURE_MEMORY = "torchscan.measureMemory"
MEASURE_TRAINING = "torchscan.measureTraining"
PLAN_TRAINING = "torchscan.planTraining"
COMPARE_REPORT = "torchscan.compareReport"
COMMANDS = (REANALYSE, SHOW_REPORT, MEASURE_LATENCY, MEASURE_MEMORY, MEASURE_TRAINING, PLAN_TRAINING, COMPARE_REPORT)

STATUS_METHOD = "torchscan/status"
"""The custom notification the server sends after every state change (docs/server.md)."""

STALE_NOTE = "**Stale**: from the last successful analysis; the code changed since or the latest analysis failed."
ESTIMATE_RUNNING_NOTE = ("**Training step**: the estimate is running; it appears here, with its memory "
                         "budget check, when it is done (the numbers above are complete without it).")
"""A target's hover while its training estimate runs after the forward analysis."""
NEVER_CALLED = "never called"
"""In place of the FLOPs of modules the forward pass never called (their parameters still count)."""
NEVER_CALLED_NOTE = ("Never called in the forward pass: its parameters count in the model's total, "
                     "and it did no work.")
"""The hover and tooltip of modules the forward pass never called."""
STALE_MARK = " (stale)"
"""Appended to the label of every hint of a stale result: the editor shows labels, not tooltips."""

# How a user of each editor allows execution, by the client's name (``clientInfo.name``, or the
# ``editor`` the VS Code extension sends in ``initializationOptions``; lower case): the shipped
# Neovim and Emacs configurations take the setting under names of their own, and VS Code ignores
# the setting in an untrusted workspace, so there the one way is to trust it.
_HOW_TO_ALLOW = {
    "vscode": "Trust the workspace: click Restricted Mode in the status bar, or run Workspaces: Manage Workspace Trust "
              "(VS Code ignores torchscan.allowExecution in an untrusted workspace)",
    "neovim": "Neovim has no workspace trust: set allow_execution = true in require('torchscan').setup{...} "
              "(the server setting torchscan.allowExecution)",
    "emacs": "Emacs has no workspace trust: set the variable torchscan-allow-execution to t "
             "(the server setting torchscan.allowExecution)",
}
_HOW_TO_ALLOW["eglot"] = _HOW_TO_ALLOW["emacs"]
_SETTING_NAMES = {"vscode": "Manage Workspace Trust", "neovim": "allow_execution", "emacs": "torchscan-allow-execution", "eglot": "torchscan-allow-execution"}
_GENERIC_ALLOW = ("Trust the workspace in your editor, or set torchscan.allowExecution to true "
                  "(Neovim plugin: allow_execution = true; Emacs: torchscan-allow-execution)")


def allow_setting(client: str | None = None) -> str:
    """The name under which the user of ``client`` allows execution (short, for a status line)."""
    return _SETTING_NAMES.get((client or "").lower(), "torchscan.allowExecution")


def untrusted_message(client: str | None = None) -> str:
    """Why a target was not analysed, and how the user of ``client`` (the name the client gave
    in ``initialize``; ``None`` when unknown) allows it."""
    how = _HOW_TO_ALLOW.get((client or "").lower(), _GENERIC_ALLOW)
    return f"torchscan does not run code of an untrusted workspace, so this target was not analysed. {how}."


_ERROR_ADVICE = {
    "import": "importing the module failed; fix the import (the workspace root is on sys.path)",
    "options": "the target's options are not valid; fix the pragma or decorator",
    "factory": "the factory raised while building the model",
    "forward": "the forward pass failed on the given inputs",  # the worker's message advises what fits the case
    "result": "the factory did not return a model",
    "strict": "strict mode refused an incomplete analysis; count what is missing, or check less: strict=\"headline\" or fewer counts",
    "timeout": "the analysis did not finish in time",
    "memory": "the analysis ran out of its memory limit",  # the message names the setting (or flag) to raise
    "crash": "the worker process crashed",
    "cancelled": "the analysis was cancelled",
}


_DROPPED_DEFAULTS = ("the target's options are not valid without the workspace defaults, which pyproject.toml's "
                     "[tool.torchscan-lsp] table could not give (fix its errors), or fix the pragma or decorator")


def error_message(state: TargetState, *, frames: bool = True, defaults_dropped: bool = False) -> str:
    """The message of a failed analysis: target, what went wrong, the exception, what to change,
    and (with ``frames``) where below the line blamed it happened: the exception it was made from
    and the innermost frames of its traceback in an installed library (an import that fails in the
    library's own modules), when the worker found them. ``defaults_dropped``: the workspace's
    ``[tool.torchscan-lsp]`` table has errors, so the target ran without its defaults (an
    ``input_shape`` set there), which an options error then names as a cause."""
    error = (state.error or {}).get("error") or {}
    kind = error.get("kind") or "crash"
    exception = f"{error['type']}: {error.get('message', '')}" if error.get("type") else error.get("message", "")
    advice = _DROPPED_DEFAULTS if kind == "options" and defaults_dropped else _ERROR_ADVICE.get(kind, kind)
    message = f"{state.key.name}: {advice}: {exception}".rstrip(": ")
    below = traceback_text(error) if frames else ""
    if below:
        message += f" ({below})"
    if state.view is not None:
        message += " (the hints shown are from the last successful analysis, marked stale)"
    return message


def traceback_block(state: TargetState) -> str:
    """The innermost frames of a failed analysis's traceback as a hover shows them, one frame and
    its source line per line in a code block, after the exception it was made from; ``""`` when the
    worker found none."""
    error = (state.error or {}).get("error") or {}
    frames = error.get("traceback") or []
    if not frames and not error.get("cause"):
        return ""
    lines = [f'  File "{f.get("file")}", line {f.get("line")}, in {f.get("function")}'
             + (f"\n    {f['source']}" if f.get("source") else "") for f in frames]
    head = "Innermost frames of the traceback (PyTorch's own left out):" if frames else ""
    if error.get("cause"):
        lines.append(str(error["cause"]))
    return "\n\n".join(part for part in (head, "```text\n" + "\n".join(lines) + "\n```") if part)
