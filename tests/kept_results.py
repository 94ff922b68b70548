"""Worker results written by hand for the tests of the plumbing around them (cache, watcher): the
smallest successful results the contract admits (``contract/conformance.py``)."""

from __future__ import annotations


def metric(value: int, unit: str, method: str) -> dict:
    """A complete forward-scope metric object of ``value``."""
    return {"status": "complete", "value": value, "known_value": value, "unit": unit, "scope": "forward",
            "method": method}


def totals(parameters: int, macs: int, flops: int) -> dict:
    """Report totals of ``parameters`` and the dispatcher's MACs and FLOPs (the counts hints show)."""
    return {"parameters": metric(parameters, "elements", "pytorch"),
            "operator_macs": metric(macs, "MACs", "torchscan_operator_macs"),
            "operator_flops": metric(flops, "FLOPs", "torch.utils.flop_counter.FlopCounterMode")}


def ok_result(imported: list[str], stamps: dict | None = None, *, target: str = "build",
              report_totals: dict | None = None, **extra) -> dict:
    """A successful result of ``target`` that imported the workspace files ``imported``: a report of
    no layers with ``report_totals``, an empty source map, ``stamps`` as its library stamps, and
    ``extra`` keys to tell results apart."""
    report = {"schema_version": 1, "context": {}, "inputs": {}, "layers": [], "operator_flops": {},
              "totals": report_totals or {}, "diagnostics": []}
    source_map = {"modules": [], "operators": [], "under": [], "outputs": [], "classes": [], "uncalled": [],
                  "parameters": []}
    return {"ok": True, "target": target, "report": report, "source_map": source_map,
            "imported_files": list(imported), "library_stamps": stamps or {}, **extra}
