"""The example gallery in headless Neovim 0.11: one session of the editors/nvim plugin against the
real server over a copy of ``examples/``; what Neovim received is checked by the same assertions as
``torchscan-lsp check``'s output (tests/gallery/checks.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import REPO, find_nvim
from gallery.checks import (FILES, Shown, check_files, check_hovers, check_lines, check_mixer, check_target,
                            hover_lines, target_line, texts)
from gallery.expected import GALLERY, MIXER

pytest.importorskip("transformers", reason="the gallery's transformer models need the examples extra")
pytest.importorskip("einops", reason="the gallery's ViT needs the examples extra")

CLIENT = Path(__file__).with_name("nvim_gallery.lua")
SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}


@pytest.fixture(scope="module")
def shown(tmp_path_factory, client_env) -> Shown:
    root = tmp_path_factory.mktemp("gallery")
    (root / "pyproject.toml").write_text('[project]\nname = "gallery"\n')
    shutil.copytree(REPO / "examples", root / "examples")
    sources = texts()
    hovers = hover_lines()
    spec = [{"path": str(root / name), "name": name,
             "targets": [target_line(sources[name], e.target) - 1 for e in [*GALLERY, MIXER] if e.file == name],
             "hovers": [line - 1 for line in hovers.get(name, [])]}
            for name in FILES]
    (root / "spec.json").write_text(json.dumps(spec))
    out = root / "nvim.json"
    done = subprocess.run([find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(REPO / "editors" / "nvim"),
                           sys.executable, str(root / "spec.json"), str(out)],
                          cwd=root, env=client_env, capture_output=True, text=True, timeout=540)
    assert out.exists(), f"nvim wrote no result (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    received = json.loads(out.read_text())
    assert received["settled"] and received["messages"] == [], received["messages"]
    found = Shown()
    for name, file in received["files"].items():
        assert file["status"] == "done", (name, file["status"])
        for hint in file["hints"]:
            found.add_hint(name, hint["line"] + 1, hint["label"])
        found.diagnostics += [(name, d["line"] + 1, SEVERITIES[d["severity"]], d["message"]) for d in file["diagnostics"]]
        found.hovers.update({(name, int(line) + 1): text for line, text in (file.get("hovers") or {}).items()})
    return found


@pytest.fixture(scope="module")
def totals() -> dict[tuple[str, str], dict]:
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "examples/", "--format", "json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return {(entry["file"], entry["target"]): entry["report"]["totals"] for entry in json.loads(done.stdout)}


@pytest.mark.parametrize("expected", GALLERY, ids=lambda e: e.target)
def test_each_gallery_target_in_neovim(shown, totals, expected):
    check_target(shown, expected, totals[(expected.file, expected.target)])


def test_the_operator_without_a_formula_in_neovim(shown, totals):
    check_mixer(shown, totals[(MIXER.file, MIXER.target)])


def test_no_noise_across_the_gallery_in_neovim(shown):
    check_files(shown)


def test_lines_written_like_public_repositories_in_neovim(shown):
    check_lines(shown)


def test_hovers_of_lines_written_like_public_repositories_in_neovim(shown):
    check_hovers(shown)

