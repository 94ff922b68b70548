"""Jobs and failures: built once, in the shape docs/architecture.md gives them."""

import json

from torchscan_lsp.contract.messages import ERROR_KINDS, analysis_job, failure, render_job


def test_failure_is_built_once_in_the_documented_shape():
    result = failure("build_net", "timeout", "the analysis did not finish in 60 s", file="models/net.py", line=12,
                     log_tail="last words")
    assert result == {
        "ok": False,
        "target": "build_net",
        "error": {"kind": "timeout", "type": None, "message": "the analysis did not finish in 60 s",
                  "file": "models/net.py", "line": 12},
        "imported_files": [],
        "log_tail": "last words",
    }
    assert json.loads(json.dumps(result)) == result
    quiet = failure(None, "crash", "boom", type_name="RuntimeError", imported_files=("a.py",))
    assert "log_tail" not in quiet and quiet["error"]["type"] == "RuntimeError" and quiet["imported_files"] == ["a.py"]
    assert {"import", "options", "factory", "result", "forward", "strict", "timeout", "memory", "crash",
            "cancelled"} == set(ERROR_KINDS)


def test_jobs():
    job = analysis_job("/ws", "/ws/net.py", "build", {"input_shape": [3, 8, 8]},
                       measure=["latency", "memory", "latency"])
    assert job == {"workspace_root": "/ws", "file": "/ws/net.py", "target": "build",
                   "options": {"input_shape": [3, 8, 8]}, "source_text": None, "measure": ["latency", "memory"]}
    rendering = render_job("/ws", {"schema_version": 1}, {"memory": {"peak_bytes": 1}})
    assert rendering == {"workspace_root": "/ws", "target": None, "report": {"schema_version": 1},
                         "measurements": {"memory": {"peak_bytes": 1}}, "title": None, "headline": "operators",
                         "findings": None}
    assert render_job("/ws", {"schema_version": 1}, title="build: now against HEAD")["title"] == "build: now against HEAD"
