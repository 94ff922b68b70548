"""What ``scan`` prints: one problem a line on stderr, and per target its summary table, its
diagnostics and its measurements on stdout (or everything as JSON), plus optional HTML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from torchscan_lsp.cli.places import Places
from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.messages import render_arguments
from torchscan_lsp.contract.tracebacks import traceback_text
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.session.jobs import page_job
from torchscan_lsp.session.measurements import measurement_failures
from torchscan_lsp.cli.scan_plan import plan_lines
from torchscan_lsp.session.training import training_summary

__all__ = ["Output", "display", "report_failure", "report_measurement_problems", "print_table", "write_html",
           "STOPPED_KINDS"]

_ERROR_KINDS = {
    "import": "cannot import the module",
    "factory": "{target} failed",
    "forward": "the forward pass of {target} failed",
    "options": "{target}",
    "timeout": "{target} timed out",
    "memory": "{target} ran out of memory",
    "crash": "{target} crashed",
    "cancelled": "{target} was cancelled",
    "strict": "{target} (strict)",
}
STOPPED_KINDS = {"timeout", "memory", "crash", "cancelled"}
"""Failures of a job that was stopped: its output ends with the stack dump that located it."""


def display(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class Output:
    """Collects problems (to stderr, one line each) and tracks whether any was an error.

    Attributes:
        places: how a line is named (``FILE:LINE``; ``FILE:cell N:LINE`` in a notebook once the
            session is known).
    """

    def __init__(self, err: TextIO):
        self.err = err
        self.failed = False
        self.places = Places()

    def problem(self, file: str, line: int | None, message: str, severity: str = "error") -> None:
        """Print ``file:line: severity: message`` on one line (``file`` as shown)."""
        if severity == "error":
            self.failed = True
        where = self.places.at(file, line)
        text = " ".join(str(message).split())
        print(f"{where}: {severity}: {text}", file=self.err, flush=True)


def report_failure(
    out: Output, root: Path, shown: str, target: Any, result: dict[str, Any]
) -> None:
    error = result.get("error") or {}
    file = error.get("file")
    line = error.get("line")
    if file:
        where = display(root / file)
    else:
        where, line = shown, line or target.line
    kind = error.get("kind", "crash")
    detail = error.get("message") or ""
    if kind in ("options", "result"):  # the message says it all, naming the target
        message = detail
    else:
        lead = _ERROR_KINDS.get(kind, "{target}").format(target=f"'{target.name}'")
        type_name = error.get("type") if kind != "strict" else None
        message = f"{lead}: {type_name}: {detail}" if type_name else f"{lead}: {detail}"
    below = traceback_text(error)  # where below the line blamed it failed (inside a library)
    out.problem(where, line, f"{message} ({below})" if below else message)


def report_measurement_problems(out: Output, root: Path, shown: str, target: Any, result: dict[str, Any]) -> None:
    """A successful result's measurement problems: each measurement that failed, at the line that
    raised (else the target's), an error when it was asked for and a warning for the training
    estimate that runs unasked (:func:`~torchscan_lsp.session.measurements.measurement_failures`);
    then the training step's warnings (over the memory budget, a failed method) at the target's
    line, which leave the exit status alone."""
    for failure in measurement_failures(result.get("measurements")):
        file, line = failure.error.get("file"), failure.error.get("line")
        where, line = (display(root / file), line) if file and line else (shown, target.line)
        out.problem(where, line, failure.message(f"'{target.name}'"), failure.severity)
    report = (result.get("measurements") or {}).get("train")
    for diagnostic in (report or {}).get("diagnostics") or []:
        if diagnostic.get("code", "").startswith("training_memory"):
            out.problem(shown, target.line, f"{target.name}: {diagnostic.get('message')}", "warning")


def write_html(path: Path, session: Any, shown: list[tuple[Any, dict[str, Any]]], out: Output, *,
               receptive_field_notes: bool = False) -> None:
    """Render each successful result (``shown``: its target state and its entry, the ``file`` as
    shown and the ``target``) as an offline HTML file, as the editor's "Show report" does
    (:func:`~torchscan_lsp.session.jobs.page_job`: its measurements attached, the
    headline method's numbers first, the editor's diagnostics; receptive-field notes with
    ``receptive_field_notes``, as in the table's list).

    One result goes to ``path`` itself; several go beside it, named by :func:`html_paths` so that
    no report overwrites another, and each ``wrote`` line says which target it holds. Write errors
    are reported like any other problem (exit status 1), and so is having no result to write
    (every target failed, or none was found): no file is written then.
    """
    if not shown:
        out.problem(str(path), None, "no HTML report written: no target was analysed successfully")
        return
    from torchscan_lsp.engine.reporting.html import render_report

    for (state, entry), target_path in zip(shown, html_paths(path, [entry for _, entry in shown])):
        job = page_job(state, session.settings_for(state.key.root), receptive_field_notes=receptive_field_notes)
        try:
            render_report(job["report"], target_path, title=f"{entry['file']}: {entry['target']}",
                          **render_arguments(job))
        except (OSError, ValueError) as error:
            out.problem(str(target_path), None, f"cannot write the HTML report: {error}")
            continue
        print(f"wrote {target_path} ({entry['file']}: {entry['target']})", file=out.err, flush=True)


def html_paths(path: Path, results: list[dict[str, Any]]) -> list[Path]:
    """Where each of ``results`` (``file``: its file as shown, ``target``: its name) is written for
    ``--html path``: ``path`` for one result; for several, ``<stem>.<target><suffix>`` beside it,
    the target's name prefixed with as many of its file's path parts as make every name distinct
    (``out.a.build.html`` and ``out.b.build.html`` for ``build`` in ``a.py`` and ``b.py``; the
    folder too where two files share a stem), and the result's position as a last resort; none
    for no results."""
    if len(results) <= 1:
        return [path] * len(results)
    # a shown path's ``..`` and root name no file: they are left out
    parts = [[*(part for part in Path(entry["file"]).with_suffix("").parts if part not in ("..", "/", "\\")),
              str(entry["target"])] for entry in results]
    for depth in range(1, max(len(p) for p in parts) + 1):
        names = [".".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            break
    else:
        names = [f"{name}.{index}" for index, name in enumerate(names, 1)]
    return [path.with_name(f"{path.stem}.{name}{path.suffix}") for name in names]


def print_table(stdout: TextIO, shown: str, state: Any, result: dict[str, Any], *, headline: str,
                receptive_field_notes: bool = False, places: Places | None = None) -> None:
    """``state``'s summary table (``Param #`` and ``Buffers`` apart, no cell cut), its diagnostics as the editor folds them (headline method first:
    :mod:`torchscan_lsp.cli.scan_findings`) and its measurements; ``places`` names the lines."""
    from torchscan_lsp.cli.scan_findings import diagnostic_lines
    from torchscan_lsp.engine.reporting.table import format_info

    places = places or Places()
    target = state.target
    print(f"{places.at(shown, target.line)}: {target.name}", file=stdout)
    report = result["report"]
    # parameters and buffers in columns of their own, so the rows add up to the totals; nothing cut
    print(format_info(report, diagnostics_footer=False, buffers=True, cut=False), file=stdout)
    for line in _never_called_lines(state):
        print(line, file=stdout)

    def place(path: Path, line: int) -> str:
        return places.at(display(path), line)

    for line in diagnostic_lines(state, headline, place, receptive_field_notes=receptive_field_notes):
        print(line, file=stdout)
    measurements = result.get("measurements") or {}
    for line in _measurement_lines(measurements):
        print(line, file=stdout)
    print(file=stdout)


def _never_called_lines(state: Any) -> list[str]:
    """The modules the forward pass never called that hold parameters or buffers of their own: no
    row stands for them, and ``Total params`` counts them (the source map's ``uncalled``)."""
    uncalled = state.view.uncalled if state.view is not None else {}
    idle = []
    for path, entry in uncalled.items():
        stats = entry.get("parameters") or {}
        params = stats.get("trainable", 0) + stats.get("frozen", 0)
        shared = stats.get("shared_elements", 0)
        buffers = (entry.get("buffers") or {}).get("elements", 0)
        if not entry.get("ran") and (params or shared or buffers):
            text = f"{params:,} params"
            if shared:  # an embedding tied to the head that ran: counted once, under that head
                owners = ", ".join(stats.get("shared_with") or [])
                text = (f"{text} + " if params else "") + f"{shared:,} params shared with {owners} (counted there)"
            idle.append(f"  {path} ({entry.get('type')}): {text}" + (f", {buffers:,} buffer elements" if buffers else ""))
    if not idle:
        return []
    more = [f"  … and {len(idle) - _NEVER_CALLED_ROWS} more"] if len(idle) > _NEVER_CALLED_ROWS else []
    return [f"Never called in the forward pass ({len(idle)}), so in no row; Total params counts their parameters:",
            *idle[:_NEVER_CALLED_ROWS], *more]


_NEVER_CALLED_ROWS = 12


def _measurement_lines(measurements: dict[str, Any]) -> list[str]:
    from torchscan_lsp.cli.scan_roofline import roofline_lines

    lines = []
    for name, report in measurements.items():
        if not isinstance(report, dict):
            continue
        if name == "roofline" and "error" not in report:
            lines += roofline_lines(measurements)
            continue
        if "error" in report and isinstance(report["error"], dict):
            err = report["error"]
            lines.append(f"{name}: unavailable ({err.get('type')}: {err.get('message')})")
            continue
        if name == "train":
            lines += training_lines(report)
            continue
        if name == "plan":
            lines += plan_lines(report)
            continue
        if name == "memory":
            peak = report.get("peak_bytes")
            delta = report.get("delta_bytes")
            if isinstance(peak, int):
                lines.append(
                    f"Peak memory ({report.get('device')}): {fmt.byte_size(peak)}"
                    + (f" (+{fmt.byte_size(delta)} over baseline)" if isinstance(delta, int) else "")
                )
            continue
        totals = report.get("totals") or {}
        for key, label in (
            ("latency", "Latency (median)"),
            ("latency_iqr", "Latency IQR"),
            ("first_call_latency", "First call"),
            ("model_latency", "Model latency"),
            ("layer_latency_sum", "Sum of layer latencies"),
        ):
            metric = totals.get(key)
            if isinstance(metric, dict) and metric_value(metric) is not None:
                lines.append(f"{label}: {fmt.metric_text(metric, 'seconds')}")
    return lines


def training_lines(report: dict[str, Any]) -> list[str]:
    """A training report as text: the FLOPs by phase, the memory at the peak by category from both
    methods side by side, the peaks and the notes (:func:`~torchscan_lsp.session.training.training_summary`)."""
    summary = training_summary(report)
    lines = [f"Training step ({summary.setup})" + (f": {summary.trainable}" if summary.trainable else "")]
    if summary.flops:
        lines.append("  FLOPs: " + ", ".join(f"{phase} {text}" for phase, text, _ in summary.flops))
    if summary.categories:
        heading = "memory at the peak"
        width = max(len(heading), *(len(name) + 2 for name, _, _ in summary.categories))
        lines.append(f"  {heading:<{width}}  {'estimated':>10}  {'measured':>10}")
        lines += [f"  {'  ' + name:<{width}}  {left:>10}  {right:>10}" for name, left, right in summary.categories]
    lines.append("  Peak: " + "; ".join(f"{method} {text}" for method, text in summary.peaks))
    lines += [f"  {note}" for note in summary.notes]
    return lines
