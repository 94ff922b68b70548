"""Results kept on disk between sessions (``torchscan.cacheResults``, docs/server.md): a new
cache on the same folder (a reopened editor) finds what an earlier one stored, and only while
everything the result depends on is unchanged."""

import os

from torchscan_lsp.session.cache import ResultCache, job_key

JOB = {"workspace_root": "/ws", "file": "/ws/net.py", "target": "build", "options": {"input_shape": [3]}}


def _result(library: str) -> dict:
    return {"ok": True, "imported_files": ["net.py", "blocks.py"], "report": {"layers": []},
            "library_stamps": {library: os.stat(library).st_mtime_ns}}


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
    wide = {"ok": True, "imported_files": ["blocks.py"], "width": 64}
    first.put(key, wide, hashes.get)
    hashes["blocks.py"] = "b"
    assert first.get(key, hashes.get) is None
    narrow = {"ok": True, "imported_files": ["blocks.py"], "width": 16}
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
        cache.put(key, {"ok": True, "imported_files": ["blocks.py"], "width": width}, {"blocks.py": str(width)}.get)
    reopened = ResultCache(folder=tmp_path, variants=2)
    found = [reopened.get(key, {"blocks.py": str(width)}.get) for width in (1, 2, 3)]
    assert [None if r is None else r["width"] for r in found] == [None, 2, 3]


def test_the_folder_keeps_the_most_recent_files(tmp_path):
    cache = ResultCache(folder=tmp_path, max_files=3)
    keys = [job_key({**JOB, "target": f"t{i}"}, "1", "py") for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, {"ok": True, "imported_files": []}, {}.get)
        os.utime(tmp_path / f"{key}.json", ns=(i * 10**9, i * 10**9))   # written in this order
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(keys[-3:])
