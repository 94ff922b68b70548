"""One set of workspace rules for the editor, ``check`` and ``scan``: roots, skipped folders, the
``[tool.torchscan-lsp]`` table, and the one job builder."""

from pathlib import Path
from types import SimpleNamespace

from torchscan_lsp.session.jobs import build_job, build_render_job, timing_asked
from torchscan_lsp.session.settings import Settings
from torchscan_lsp.session.workspace import SKIPPED_DIRS, find_root, python_files, read_config, root_for


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_root_is_the_nearest_project_folder(tmp_path, monkeypatch):
    _tree(tmp_path, {"proj/pyproject.toml": "", "proj/models/net.py": ""})
    monkeypatch.chdir(tmp_path)
    assert find_root([tmp_path / "proj/models/net.py"]) == (tmp_path / "proj").resolve()
    # no marker above: the current folder, which holds the path
    _tree(tmp_path, {"loose/a.py": ""})
    assert find_root([tmp_path / "loose/a.py"]) == tmp_path.resolve()


def test_editor_root_is_the_innermost_folder(tmp_path):
    _tree(tmp_path, {"outer/inner/net.py": ""})
    folders = [str(tmp_path / "outer"), str(tmp_path / "outer/inner")]
    assert root_for(str(tmp_path / "outer/inner/net.py"), folders) == str((tmp_path / "outer/inner").resolve())
    assert root_for(str(tmp_path / "outer/inner/net.py"), []) == str((tmp_path / "outer/inner").resolve())


def test_every_front_end_skips_the_same_folders(tmp_path):
    # one file per kind of folder both commands used to disagree on: venv/ and site-packages/
    _tree(tmp_path, {"models/net.py": "", "venv/lib/x.py": "", "env/site-packages/y.py": "", ".venv/z.py": "",
                     "node_modules/w.py": "", "models/__pycache__/c.py": ""})
    found = python_files([tmp_path])
    assert [f.path.relative_to(tmp_path.resolve()).as_posix() for f in found] == ["models/net.py"]
    assert not found[0].explicit
    assert {"venv", "site-packages"} <= SKIPPED_DIRS
    named = python_files([tmp_path / "venv/lib/x.py"])  # a file named on the command line is always taken
    assert [f.explicit for f in named] == [True]


def test_the_table_gives_options_and_setting_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchscan-lsp]\ndevice = 'meta'\ntimeout = 12\ninput_shape = [3, 8, 8]\n", encoding="utf-8")
    config = read_config(tmp_path)
    assert config.error is None
    assert config.defaults == {"device": "meta", "timeout": 12, "input_shape": (3, 8, 8)}
    assert config.settings_defaults == {"device": "meta", "timeoutSeconds": 12}
    (tmp_path / "pyproject.toml").write_text("[tool.torchscan-lsp]\ncolour = 'red'\n", encoding="utf-8")
    broken = read_config(tmp_path)
    assert broken.defaults == {} and broken.settings_defaults == {} and "colour" in broken.error.message


def test_one_job_builder_layers_the_options():
    target = SimpleNamespace(name="build", options={"dtype": "float16", "measure": ["memory"], "timeout": 5})
    settings = Settings(device="meta", timeoutSeconds=30, memoryLimitMb=512, python="/py")
    job, limits = build_job("/ws", "/ws/net.py", target, {"input_shape": (3, 8, 8), "device": "cpu"}, settings,
                            measure=["latency"])
    # defaults, then the device setting over the table's device, then the target's own options;
    # measure and timeout lifted out into the job
    assert job == {"workspace_root": "/ws", "file": "/ws/net.py", "target": "build",
                   "options": {"input_shape": (3, 8, 8), "device": "meta", "dtype": "float16"},
                   "source_text": None, "measure": ["memory", "latency"]}
    assert (limits.python, limits.timeout_s, limits.memory_mb) == ("/py", 5.0, 512)  # the target's timeout wins
    _, plain = build_job("/ws", "/ws/net.py", SimpleNamespace(name="b", options={}), {}, settings)
    assert plain.timeout_s == 30.0
    assert timing_asked([], [target]) is False and timing_asked(["layer_latency"], []) is True


def test_render_job_attaches_only_measurements_that_worked():
    job = build_render_job("/ws", {"schema_version": 1}, {"memory": {"peak_bytes": 1}, "latency": {"error": {}},
                                                          "other": {"x": 1}})
    assert job["measurements"] == {"memory": {"peak_bytes": 1}}


def test_each_root_of_a_workspace_takes_its_own_table_under_the_same_overrides(tmp_path):
    from torchscan_lsp.session.controller import Session

    _tree(tmp_path, {
        "a/pyproject.toml": "[tool.torchscan-lsp]\ndevice = 'meta'\ntimeout = 12\n",
        "b/pyproject.toml": "[tool.torchscan-lsp]\ndevice = 'cpu'\ntimeout = 3\ncompare_with = 'HEAD~1'\n",
    })
    text = "import torch.nn as nn\n\n\n# torchscan: input_shape=(4,)\ndef small():\n    return nn.Linear(4, 2)\n"
    session = Session(trusted=True)
    session.configure(str(tmp_path / "a"), {})
    first = session.open(str(tmp_path / "a" / "net.py"), str(tmp_path / "a"), text)
    second = session.open(str(tmp_path / "b" / "net.py"), str(tmp_path / "b"), text)

    def job(document):
        state = session.store.states_in(document.root, document.rel)[0]
        found, limits = session.job_for(document, state)
        return found["options"]["device"], limits.timeout_s, session.settings_for(document.root).compareWith

    # the configured root (the editor's first folder, the command's root) and a second one: each
    # its own table's device, timeout and baseline (a has none: the default)
    assert job(first) == ("meta", 12.0, "HEAD")  # the setting's default, documented in docs/server.md
    assert job(second) == ("cpu", 3.0, "HEAD~1")
    # a setting the editor or a flag gives wins over every root's table
    session.configure(str(tmp_path / "a"), {"timeoutSeconds": 7})
    assert job(first)[1] == job(second)[1] == 7.0
