"""An import that fails inside an installed library says where: the innermost frames of its
traceback there (and the exception it was made from) reach the JSON result, ``scan``'s and
``check``'s one-line errors, the hover and the server's log, never the "look up to see its
traceback" with no traceback anywhere.

The libraries are fake installed packages (tests/fake_library.py), in a ``site-packages`` folder
outside the workspace put on the job's path through ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from fake_library import fakediff_frames, FAKEDIFF_MESSAGE, frame, install
from torchscan_lsp.worker.supervisor import outcome
from workspace_files import write

PLAIN_LIBRARY = {
    "fakeplain/__init__.py": """
        from fakeplain.core import kernel
    """,
    "fakeplain/core.py": """
        import os

        kernel = os.environ["FAKEPLAIN_KERNEL"]
    """,
}

MODEL = """
    from fakediff import UNet


    # torchscan: input_shape=(4,)
    def build():
        return UNet()
"""

PLAIN = """
    import fakeplain


    # torchscan: input_shape=(4,)
    def build():
        return fakeplain.kernel
"""

OWN = """
    import missing_module_of_the_workspace


    # torchscan: input_shape=(4,)
    def build():
        return None
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("library-errors")
    library = {**install(base / "lib" / "site-packages"), **install(base / "lib" / "site-packages", PLAIN_LIBRARY)}
    root = base / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    write(root, {"net.py": MODEL, "plain.py": PLAIN, "own.py": OWN})
    env = {**os.environ, "PYTHONPATH": str(base / "lib" / "site-packages")}
    env.pop("FAKEPLAIN_KERNEL", None)
    return root, library, env


def _run(setup, *argv):
    root, _, env = setup
    return subprocess.run([sys.executable, "-m", "torchscan_lsp", *argv], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_json_result_carries_the_innermost_frames_and_the_cause(setup):
    _, library, _ = setup
    done = _run(setup, "scan", "net.py", "--format", "json")
    assert done.returncode == 1
    (result,) = json.loads(done.stdout)
    error = result["error"]
    assert (error["kind"], error["type"], error["file"], error["line"]) == ("import", "RuntimeError", "net.py", 1)
    assert error["traceback"] == fakediff_frames(library)
    assert error["cause"] == "RuntimeError: operator fakevision::nms does not exist"


def _frames_text(library):
    return "innermost frames: " + " → ".join(f"{f['file']}:{f['line']} in {f['function']} (`{f['source']}`)"
                                             for f in fakediff_frames(library))


def test_scan_and_check_say_where_on_one_line(setup):
    _, library, _ = setup
    headline = f"RuntimeError: {FAKEDIFF_MESSAGE}"
    # the cause's text is in the message already: only the frames are added
    scan = _run(setup, "scan", "net.py")
    assert scan.stderr.splitlines() == [
        f"net.py:1: error: cannot import the module: {headline} ({_frames_text(library)})"]
    check = _run(setup, "check", "net.py", "--no-hints")
    advice = "build: importing the module failed; fix the import (the workspace root is on sys.path)"
    assert check.stdout.splitlines() == [
        # the line that raised fails the whole module, whichever target: it names none
        f"net.py:1:1: error: {advice.removeprefix('build: ')}: {headline} ({_frames_text(library)})",
        f"net.py:5:1: error: {advice}: {headline} ({_frames_text(library)}) (raised at net.py:1)",
    ]


def test_an_import_that_fails_in_a_librarys_own_modules_gives_the_frames_below_the_workspace_line(setup):
    _, library, _ = setup
    done = _run(setup, "scan", "plain.py", "--format", "json")
    error = json.loads(done.stdout)[0]["error"]
    assert (error["type"], error["message"], error["file"], error["line"]) == ("KeyError", "'FAKEPLAIN_KERNEL'",
                                                                                "plain.py", 1)
    # below `import fakeplain` (plain.py:1), the library's two lines; no cause: nothing was re-raised
    assert error["traceback"] == [
        frame(library, "fakeplain/__init__.py", "from fakeplain.core import kernel", "<module>"),
        frame(library, "fakeplain/core.py", "kernel = os.environ", "<module>"),
    ]
    assert "cause" not in error


def test_an_error_on_a_workspace_line_has_no_frames_to_add(setup):
    done = _run(setup, "scan", "own.py", "--format", "json")
    error = json.loads(done.stdout)[0]["error"]
    # a module that does not exist fails on the workspace line itself (only the standard library's
    # import machinery below it): the line says where, and nothing is added
    assert (error["type"], error["file"], error["line"]) == ("ModuleNotFoundError", "own.py", 1)
    assert "traceback" not in error and "cause" not in error
    assert done.stderr.splitlines() == ["own.py:1: error: cannot import the module: ModuleNotFoundError: No module "
                                        "named 'missing_module_of_the_workspace'"]


def test_the_server_log_says_where(tmp_path, caplog):
    frames = [{"file": "fakediff/ops.py", "line": 2, "function": "register", "source": "raise RuntimeError(name)"}]
    error = {"kind": "import", "type": "RuntimeError", "message": "Failed to import fakediff.unet", "file": "net.py",
             "line": 1, "traceback": frames, "cause": "RuntimeError: operator fakevision::nms does not exist"}
    (tmp_path / "result.json").write_text(json.dumps({"ok": False, "target": "build", "error": error}))
    (tmp_path / "log.txt").write_text("")
    with caplog.at_level(logging.INFO, logger="torchscan_lsp.worker.supervisor"):
        outcome({"target": "build", "workspace_root": str(tmp_path)}, 0, None, result_path=tmp_path / "result.json",
                log_path=tmp_path / "log.txt", timeout_s=60, memory_mb=None)
    assert [r.getMessage() for r in caplog.records] == [
        "analysis of build failed (import) at net.py:1: RuntimeError: Failed to import fakediff.unet (caused by "
        "RuntimeError: operator fakevision::nms does not exist; innermost frames: fakediff/ops.py:2 in register "
        "(`raise RuntimeError(name)`))"]
