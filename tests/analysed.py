"""One job run in this process, as the source-map and hint tests read it: the result (checked
``ok`` and JSON-clean), its ``outputs`` entries by line, and a target state over it for the hint and
hover builders."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.state import TargetKey, TargetState
from torchscan_lsp.worker.runner import run_job


def analysed(root: Path, rel: str, target: str, options: dict | None = None) -> dict:
    """The result of analysing ``target`` of ``root / rel`` (asserted ``ok``), as JSON gives it back."""
    result = run_job({"workspace_root": str(root), "file": str(root / rel), "target": target, "options": options or {}})
    assert result["ok"] is True, result
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    return json.loads(json.dumps(result))


def outputs(result: dict, file: str) -> dict[int, dict]:
    """The source map's ``outputs`` entries of ``file``, by line."""
    return {o["line"]: o for o in result["source_map"]["outputs"] if o["file"] == file}


def state_of(root: Path, rel: str, target: str, line: int, result: dict) -> TargetState:
    """A target state of ``target`` (on ``line`` of ``rel``) holding ``result``."""
    found = SimpleNamespace(name=target, line=line, column=0, annotation_line=0, options={})
    return TargetState(key=TargetKey(str(root), rel, target), target=found, view=ResultView(result))
