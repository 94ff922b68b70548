"""Results kept on disk between sessions (``torchscan.cacheResults``, docs/server.md): a new
cache on the same folder (a reopened editor) finds what an earlier one stored, and only while
everything the result depends on is unchanged."""

import copy
import json
import os

from kept_results import ok_result

from torchscan_lsp.contract.conformance import result_problem
from torchscan_lsp.session.cache import FORMAT, ResultCache, cache_folder, job_key
from torchscan_lsp.worker import result_text

JOB = {"workspace_root": "/ws", "file": "/ws/net.py", "target": "build", "options": {"input_shape": [3]}}


def _result(library: str) -> dict:
    return ok_result(["net.py", "blocks.py"], {library: os.stat(library).st_mtime_ns})


def test_a_reopened_cache_finds_the_result_until_a_dependency_changes(tmp_path):
    library = tmp_path / "site" / "lib.py"
    library.parent.mkdir()
    library.write_text("x = 1\n")
    hashes = {"net.py": "1", "blocks.py": "x"}
    key = job_key(JOB, "1", "/usr/bin/python3")
    ResultCache(folder=tmp_path / "results").put(key, _result(str(library)), hashes.get)

    reopened = ResultCache(folder=tmp_path / "results")
    assert reopened.get(key, hashes.get) == _result(str(library))     # read back from the file
    assert ResultCache().get(key, hashes.get) is None                 # memory only: nothing

    # an upgraded library: its file's modification time moves (1 s later, in nanoseconds)
    stamp = os.stat(library).st_mtime_ns
    os.utime(library, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))
    assert ResultCache(folder=tmp_path / "results").get(key, hashes.get) is None


def test_a_changed_import_or_a_failure_is_never_served_and_a_torn_file_is_a_miss(tmp_path):
    library = tmp_path / "lib.py"
    library.write_text("")
    hashes = {"net.py": "1", "blocks.py": "x"}
    key = job_key(JOB, "1", "/usr/bin/python3")
    ResultCache(folder=tmp_path).put(key, _result(str(library)), hashes.get)
    hashes["blocks.py"] = "y"                                         # an imported workspace file changed
    assert ResultCache(folder=tmp_path).get(key, hashes.get) is None

    ResultCache(folder=tmp_path).put(key, {"ok": False, "imported_files": []}, hashes.get)
    hashes["blocks.py"] = "x"                                         # failures are never kept: the
    assert ResultCache(folder=tmp_path).get(key, hashes.get) == _result(str(library))  # good one stays
    (tmp_path / f"{key}.json").write_text('{"result": {"ok": tr')     # a writer that died mid-file
    assert ResultCache(folder=tmp_path).get(key, hashes.get) is None


def test_an_import_edited_back_finds_its_result_again(tmp_path):
    # blocks.py at width 64 (hash "a"), then 16 ("b"), broken ("c": the analysis failed), then 64
    # again: each analysed state is found again, in this session and the next
    hashes = {"net.py": "1", "blocks.py": "a"}
    key = job_key(JOB, "1", "py")
    first = ResultCache(folder=tmp_path)
    wide = ok_result(["blocks.py"], width=64)
    first.put(key, wide, hashes.get)
    hashes["blocks.py"] = "b"
    assert first.get(key, hashes.get) is None
    narrow = ok_result(["blocks.py"], width=16)
    first.put(key, narrow, hashes.get)
    hashes["blocks.py"] = "c"
    assert first.get(key, hashes.get) is None
    first.put(key, {"ok": False, "imported_files": ["blocks.py"]}, hashes.get)
    hashes["blocks.py"] = "a"
    assert first.get(key, hashes.get) == wide
    reopened = ResultCache(folder=tmp_path)
    assert reopened.get(key, hashes.get) == wide
    hashes["blocks.py"] = "b"
    assert reopened.get(key, hashes.get) == narrow


def test_a_key_keeps_its_most_recent_variants(tmp_path):
    cache = ResultCache(folder=tmp_path, variants=2)
    key = job_key(JOB, "1", "py")
    for width in (1, 2, 3):
        cache.put(key, ok_result(["blocks.py"], width=width), {"blocks.py": str(width)}.get)
    reopened = ResultCache(folder=tmp_path, variants=2)
    found = [reopened.get(key, {"blocks.py": str(width)}.get) for width in (1, 2, 3)]
    assert [None if r is None else r["width"] for r in found] == [None, 2, 3]


def test_the_folder_keeps_the_most_recent_files(tmp_path):
    cache = ResultCache(folder=tmp_path, max_files=3)
    keys = [job_key({**JOB, "target": f"t{i}"}, "1", "py") for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, ok_result([]), {}.get)
        os.utime(tmp_path / f"{key}.json", ns=(i * 10**9, i * 10**9))   # written in this order
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(keys[-3:])


def _kept_file(folder, key):
    return folder / f"{key}.json"


def test_a_file_that_is_json_but_not_a_result_is_dropped_once_and_rewritten(tmp_path, caplog):
    key = job_key(JOB, "1", "py")
    hashes = {"net.py": "1"}
    # valid JSON in a kept result's place that no analysis wrote (issue 20's file)
    _kept_file(tmp_path, key).write_text('{"variants": [{"result": {"ok": true}, "imported": {}}]}')
    cache = ResultCache(folder=tmp_path)
    assert cache.get(key, hashes.get) is None                         # not taken: the target runs
    assert cache.get(key, hashes.get) is None
    dropped = [r.getMessage() for r in caplog.records if "dropped the kept result" in r.getMessage()]
    assert len(dropped) == 1 and str(_kept_file(tmp_path, key)) in dropped[0], dropped  # said once

    good = ok_result(["net.py"])
    cache.put(key, good, hashes.get)                                  # the next good result rewrites it
    assert ResultCache(folder=tmp_path).get(key, hashes.get) == good


def test_what_the_contract_does_not_describe_is_dropped(tmp_path, caplog):
    key = job_key(JOB, "1", "py")
    hashes = {"net.py": "1"}
    ResultCache(folder=tmp_path).put(key, ok_result(["net.py"]), hashes.get)
    kept = json.loads(_kept_file(tmp_path, key).read_text())
    assert kept["format"] == FORMAT and ResultCache(folder=tmp_path).get(key, hashes.get) is not None

    def spoilt(change) -> str:
        entry = copy.deepcopy(kept)
        change(entry)
        _kept_file(tmp_path, key).write_text(json.dumps(entry))
        caplog.clear()
        assert ResultCache(folder=tmp_path).get(key, hashes.get) is None
        (message,) = [r.getMessage() for r in caplog.records]
        return message

    report = lambda entry: entry["variants"][0]["result"]["report"]  # noqa: E731
    assert "report.schema_version: expected 1, got int 2" in spoilt(lambda e: report(e).update(schema_version=2))
    assert "report.totals.parameters: expected MetricResult" in spoilt(
        lambda e: report(e)["totals"].update(parameters=12))
    assert "source_map" in spoilt(lambda e: e["variants"][0]["result"].pop("source_map"))
    assert "imported" in spoilt(lambda e: e["variants"][0].update(imported={"net.py": 1}))
    assert f"layout {FORMAT}" in spoilt(lambda e: e.update(format=FORMAT - 1))


def test_a_cache_folder_that_cannot_be_made_keeps_results_in_memory_and_says_why(tmp_path, monkeypatch):
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    cache = ResultCache()
    cache.persist(lambda: cache_folder("results"))
    # mkdir of <file>/torchscan-lsp/results: ENOTDIR
    assert cache.problem == ("results are not kept between sessions: the cache folder cannot be created "
                             f"(Not a directory: '{blocker / 'torchscan-lsp' / 'results'}')")
    key = job_key(JOB, "1", "py")
    cache.put(key, ok_result(["net.py"]), {"net.py": "1"}.get)      # memory still serves this session
    assert cache.get(key, {"net.py": "1"}.get) == ok_result(["net.py"])
    assert list(tmp_path.iterdir()) == [blocker]

    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache.persist(lambda: cache_folder("results"))                   # a usable folder: nothing to say
    assert cache.problem is None and cache.folder == tmp_path / "home" / ".cache" / "torchscan-lsp" / "results"


def test_a_plan_result_is_kept_on_disk_like_an_analysis(tmp_path):
    # a plan job's result has its plan where an analysis has its report and source map
    hashes = {"net.py": "1"}
    plan_job = {**JOB, "options": {**JOB["options"], "plan": True}, "kind": "plan"}
    plan = {"schema_version": 1, "kind": "training_plan", "policies": [], "estimates": 0}
    result = {"ok": True, "target": "build", "kind": "plan", "plan": plan, "imported_files": ["net.py"],
              "library_stamps": {}}
    key = job_key(plan_job, "1", "/usr/bin/python3")
    assert key != job_key({**plan_job, "kind": None}, "1", "/usr/bin/python3")  # never the analysis's entry
    ResultCache(folder=tmp_path / "results").put(key, result, hashes.get)
    reopened = ResultCache(folder=tmp_path / "results")
    assert reopened.get(key, hashes.get) == result and reopened.problem is None
    # one without its plan is no result of a plan job
    broken = {k: v for k, v in result.items() if k != "plan"}
    ResultCache(folder=tmp_path / "other").put(key, broken, hashes.get)
    assert ResultCache(folder=tmp_path / "other").get(key, hashes.get) is None


def test_a_result_read_from_its_text_is_kept_from_that_text_and_reads_back_equal(tmp_path):
    # the worker's text, indented so that a copied member shows in the entry's text (an encoded
    # one would be compact), read as the supervisor reads it, with the member the server adds
    library = tmp_path / "lib.py"
    library.write_text("")
    written = _result(str(library))
    tensor = {"kind": "tensor", "shape": [1, 8], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}
    written["report"]["layers"] = [{
        "path": "", "call_index": 0, "name": "net", "depth": 0, "parent": None, "type": "Net",
        "input": {"args": [tensor], "kwargs": {}}, "output": tensor,
        "parameters": {"trainable": 72, "frozen": 0, "bytes": 288, "shared": False, "shared_elements": 0,
                       "shared_with": []},
        "buffers": {"elements": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []},
        "metrics": {"calls": {"status": "complete", "value": 1, "known_value": 1, "unit": "calls",
                              "scope": "module_call", "method": "pytorch_hook"}}}]
    text = json.dumps(written, indent=1)
    result = result_text.loads(text, result_text.RESULT_LEVELS)
    result["log_tail"] = "printed by the model\n"
    hashes = {"net.py": "1", "blocks.py": "x"}
    key = job_key(JOB, "1", "py")
    ResultCache(folder=tmp_path).put(key, result, hashes.get)

    entry = _kept_file(tmp_path, key).read_text()
    report_text = text[text.index('"report": ') + len('"report": '):text.index(',\n "source_map"')]
    assert report_text.startswith("{\n  ") and report_text in entry  # copied, not encoded again
    back = ResultCache(folder=tmp_path).get(key, hashes.get)          # the conformance check passed
    assert back == {**written, "log_tail": "printed by the model\n"}
    assert result_problem(json.loads(entry)["variants"][0]["result"]) is None

    # read back from the entry, it is written from the entry's text again, with a second variant
    hashes["blocks.py"] = "y"
    reopened = ResultCache(folder=tmp_path)
    reopened.get(key, hashes.get)
    reopened.put(key, _result(str(library)), hashes.get)
    assert report_text in _kept_file(tmp_path, key).read_text()
    hashes["blocks.py"] = "x"
    assert ResultCache(folder=tmp_path).get(key, hashes.get) == {**written, "log_tail": "printed by the model\n"}
