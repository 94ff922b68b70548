"""The editor's own compositions of formatted numbers: the totals line, the shape hint, a call's
inputs.

Every number goes through :mod:`torchscan_lsp.contract.format`, the formatter the summary table,
the HTML report and ``scan`` use too (``≥`` for a lower bound, ``?`` for a number not measured).
"""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.source_map import holds_tensor
from torchscan_lsp.session.deltas import Change, Comparison
from torchscan_lsp.session.headline import DEFAULT_HEADLINE, method

SHAPE_LIMIT = 40
"""Characters of a shape hint before it is cut with ``…``."""


def totals_label(totals: Mapping[str, Mapping[str, Any]], headline: str = DEFAULT_HEADLINE,
                 comparison: Comparison | None = None) -> str:
    """The one-line summary of a report's totals: ``"11.7M params · 1.82 GMACs · 3.64 GFLOPs"``.

    MACs and FLOPs are the ``headline`` method's (:mod:`torchscan_lsp.session.headline`: the
    dispatched operators' by default, else the module formulas'), both of one method; the other
    method stands beside them in hovers, never merged into this line. With a ``comparison`` whose
    numbers changed, the line is the parameters and FLOPs, each that changed with its change
    (:func:`with_change`): ``"336 params (+112) · 583 kFLOPs (+50 %)"``.
    """
    shown = method(headline)
    rows = [("parameters", "params", False), (shown.macs, "MACs", True), (shown.flops, "FLOPs", True)]
    if comparison is not None and comparison.ready and any(comparison.total(name).changed for name, _, _ in rows):
        # with its changes the line would pass the 43 characters VS Code shows of a hint: the MACs go
        # (the hover and the lens have them), as on a module line
        return fmt.SEPARATOR.join(with_change(fmt.metric_text(totals.get(name), unit), comparison.total(name), relative)
                                  for name, unit, relative in (rows[0], rows[2]))
    return fmt.SEPARATOR.join(fmt.metric_text(totals.get(name), unit) for name, unit, _ in rows)


def change_text(change: Change, relative: bool) -> str:
    """A change as a hint shows it, ``""`` when the number did not change or a side has none:
    ``"+112"``, ``"−12.3k"``; with ``relative`` a share of the baseline (``"+50 %"``; a change from 0
    as a count); ``"+576 known"`` when a side is a lower bound, for a difference of the counted
    parts only, never an exact change of the whole."""
    delta = change.delta
    if delta is None or delta == 0:
        return ""
    if change.known:
        return f"{fmt.change(delta, '', full=False)} known"
    if relative and change.before:
        return fmt.relative_change(change.before, change.after)
    return fmt.change(delta, "", full=False)


def with_change(text: str, change: Change, relative: bool) -> str:
    """``text`` followed by its change in parentheses (:func:`change_text`), when there is one."""
    shown = change_text(change, relative)
    return f"{text} ({shown})" if shown else text


def shape_label(meta: Mapping[str, Any] | None) -> str:
    """The inlay-hint text for a call's output: ``"→ (1, 64, 56, 56)"``."""
    return fmt.ARROW + fmt.shape_text(meta, keys=True, limit=SHAPE_LIMIT)


HOVER_SHAPE_LIMIT = 60
"""Characters of a shape in a hover or tooltip before it is cut with ``…``."""


def shape(meta: Mapping[str, Any] | None) -> str:
    """A value's shape as hovers and tooltips show it: ``(1, 64, 56, 56)``."""
    return fmt.shape_text(meta, keys=True, limit=HOVER_SHAPE_LIMIT)


def inputs_text(call_input: Mapping[str, Any] | None) -> str:
    """A call's inputs as hovers show them, keyword arguments by name:
    ``"(1, 3, 32, 32)"``, ``"input_ids=(1, 32), attention_mask=(1, 32), use_cache=bool"``; ``"none"``
    for a call without arguments."""
    call_input = call_input or {}
    parts = [shape(meta) for meta in call_input.get("args") or []]
    for name, meta in (call_input.get("kwargs") or {}).items():
        scalar = (meta or {}).get("kind") == "scalar"
        parts.append(f"{name}={fmt.shape_text(meta, detail=scalar, keys=True, limit=HOVER_SHAPE_LIMIT)}")
    return ", ".join(parts) or "none"


def shown_targets(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The names a line assigned whose values hold tensors (``pad_hw`` of ``x, pad_hw =
    window_partition(x, 14)``, a tuple of ints, is not shown in a hint)."""
    return [target for target in entry.get("targets") or () if holds_tensor(target.get("output"))]


def range_text(found: Mapping[str, Any] | None) -> str:
    """The shapes a line's runs gave, dimension by dimension: ``(1, 16..64, 8..32, 8..32)``; ``""``
    when they are not tensors of one rank (or did not vary)."""
    low, high = (found or {}).get("min"), (found or {}).get("max")
    if not low or not high or len(low) != len(high):
        return ""
    dims = [str(a) if a == b else f"{a}..{b}" for a, b in zip(low, high)]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def runs_text(entry: Mapping[str, Any]) -> str:
    """``×3 runs, shapes vary (1, 16..64, 8..32)`` for a line (a loop's body, a block's line) whose
    runs gave different shapes, with the range of the value its hint shows; ``""`` otherwise."""
    targets = shown_targets(entry)
    ranges = [target.get("range") for target in targets] if targets else [entry.get("range")]
    if (entry.get("runs") or 1) < 2 or not any(ranges):
        return ""
    text = f"×{entry['runs']} runs, shapes vary"
    single = range_text(ranges[0]) if len(entry.get("targets") or ()) < 2 else ""
    return f"{text} {single}" if single else text


def line_label(entry: Mapping[str, Any]) -> str:
    """The inlay-hint text of a line's result in its first run (the source map's ``outputs``
    entry): ``"→ (1, 32, 64)"``; each name's shape for a line that assigned several
    (``"xq (1, 32, 64) · xk (1, 32, 32) · xv (1, 32, 32)"``); then :func:`runs_text`."""
    targets = shown_targets(entry)
    if targets and len(entry.get("targets") or ()) > 1:
        text = fmt.SEPARATOR.join(f"{t['name']} {fmt.shape_text(t.get('output'), keys=True, limit=SHAPE_LIMIT)}" for t in targets)
    else:
        text = shape_label(targets[0].get("output") if targets else entry.get("output"))
    runs = runs_text(entry)
    return text + (fmt.SEPARATOR + runs if runs else "")


def result_text(entry: Mapping[str, Any]) -> str:
    """Markdown of a line's result for hovers and tooltips: the names it assigned (every one, with
    its shape or kind) or its output and where that came from, then how many times it ran and how
    the shapes varied."""
    owner = entry.get("path")
    where = f" (in the call of {fmt.layer_name(owner, '`')})" if owner is not None else ""
    targets = entry.get("targets") or []
    if len(targets) > 1 or (targets and not holds_tensor(entry.get("output"))):
        rows = [f"Assigned in its first run{where}: " + ", ".join(
            f"`{t['name']}` {shape(t.get('output'))}" for t in targets)]
    else:
        rows = [f"Output: {shape(targets[0]['output'] if targets else entry.get('output'))}, from {output_source(entry)}{where}"]
    runs = entry.get("runs") or 1
    if runs > 1:
        varied = [(t["name"], t.get("range")) for t in targets if t.get("range")] if len(targets) > 1 else \
            [(None, (targets[0].get("range") if targets else None) or entry.get("range"))]
        changes = [("" if name is None else f"`{name}` ") + (range_text(found) or f"{found['distinct']} shapes")
                   for name, found in varied if found]
        rows.append(f"Ran {runs} times; the first run is shown" + ("; shapes vary: " + ", ".join(changes) if changes else ""))
    return "\n\n".join(rows)


def output_source(entry: Mapping[str, Any]) -> str:
    """What a line's result came from, for a tooltip or hover (the source map's ``outputs`` entry
    of the line): ``"`aten.add`, the last operator this line dispatched in its first run"`` or
    ``"the call of `proj`, the last thing this line did in its first run"``."""
    targets = entry.get("targets") or []
    if entry.get("returned"):
        return "the value this line returned in its first run"
    if len(targets) == 1 and holds_tensor(targets[0].get("output")):
        return f"the value assigned to `{targets[0]['name']}` in its first run"
    if entry.get("call") is not None:
        return f"the call of {fmt.layer_name(entry['call'], '`')}, the last thing this line did in its first run"
    return f"`{entry.get('operator')}`, the last operator this line dispatched in its first run"


def parameter_text(entry: Mapping[str, Any]) -> str:
    """One parameter assigned by model code, for a tooltip or hover:
    ``"`cls_token` of the root module: (1, 1, 64), 64 elements, trainable"``."""
    owner = f"`{entry['path']}`" if entry.get("path") else "the root module"
    shape = "(" + ", ".join(str(d) for d in entry.get("shape") or []) + ("," if len(entry.get("shape") or []) == 1 else "") + ")"
    return (f"`{entry.get('name')}` of {owner}: {shape}, {entry['numel']:,} elements, "
            + ("trainable" if entry.get("trainable") else "frozen"))


def params_text(summary: dict) -> str:
    """The parameters of a module summary, saying what is shared: ``"1.60k params shared with emb"``
    for a head tied to an embedding (instead of ``0 params``), ``"224 params + 400 shared with emb"``."""
    if not summary.get("shared_elements"):
        return fmt.params(summary["parameters"])
    owners = summary["shared_with"]
    names = ", ".join(owners[:2]) + (" …" if len(owners) > 2 else "")
    shared = fmt.number(summary["shared_elements"])
    if summary["parameters"]:
        return f"{fmt.params(summary['parameters'])} + {shared} shared with {names}"
    return f"{fmt.params(summary['shared_elements'])} shared with {names}"
