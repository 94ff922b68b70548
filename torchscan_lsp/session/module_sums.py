"""What the modules at some paths hold, for a result's module summaries (:class:`~.results.
ResultView`): the parameters and buffers of their calls' layer records and of the modules below
them that never ran (the source map's ``uncalled``), and the elements they share with modules
outside them. Each tensor is counted once: a record counts the tensors its call owned first, an
``uncalled`` entry those no record counted (``worker/uncalled.py``)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from torchscan_lsp.contract.report import in_subtree

__all__ = ["held", "shared"]


def held(layers: list[dict], uncalled: Mapping[str, Mapping[str, Any]], paths: Iterable[str]) -> dict[str, int]:
    """``{"parameters", "trainable", "frozen", "parameter_bytes", "buffer_elements"}`` (elements
    and bytes) of ``layers`` (the records of the subtrees of ``paths``) and of the ``uncalled``
    entries (by path) in those subtrees."""
    roots = tuple(paths)
    owners = [*(layer.get("parameters") or {} for layer in layers),
              *(entry.get("parameters") or {} for path, entry in uncalled.items() if in_subtree(path, roots))]
    buffers = [*(layer.get("buffers") or {} for layer in layers),
               *(entry.get("buffers") or {} for path, entry in uncalled.items() if in_subtree(path, roots))]
    trainable = sum(stats.get("trainable", 0) for stats in owners)
    frozen = sum(stats.get("frozen", 0) for stats in owners)
    return {"parameters": trainable + frozen, "trainable": trainable, "frozen": frozen,
            "parameter_bytes": sum(stats.get("bytes", 0) for stats in owners),
            "buffer_elements": sum(stats.get("elements", 0) for stats in buffers)}


def shared(layers: list[dict], uncalled: Mapping[str, Mapping[str, Any]] | None = None,
           paths: Iterable[str] = ()) -> dict[str, Any]:
    """Parameters of ``layers`` and of the ``uncalled`` entries in the subtrees of ``paths``
    counted under modules outside them (each module's first call: a second call of a module shares
    its tensors with its own first one, which says nothing)."""
    roots = tuple(paths)
    entries = [{"path": path, "parameters": entry.get("parameters") or {}}
               for path, entry in (uncalled or {}).items() if in_subtree(path, roots)]
    inside = {layer["path"] for layer in [*layers, *entries]}
    elements, owners, seen = 0, [], set()
    for layer in [*layers, *entries]:
        stats = layer.get("parameters", {})
        others = [owner for owner in stats.get("shared_with") or [] if owner not in inside]
        if layer["path"] in seen or not others or len(others) != len(stats.get("shared_with") or []):
            continue
        seen.add(layer["path"])
        elements += stats.get("shared_elements", 0)
        owners += [owner for owner in others if owner not in owners]
    return {"shared_elements": elements, "shared_with": owners}
