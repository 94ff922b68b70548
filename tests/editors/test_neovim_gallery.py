"""The example gallery in headless Neovim 0.11: one session of the editors/nvim plugin against the
real server over a copy of ``examples/``; what Neovim received is checked by the same assertions as
``torchscan-lsp check``'s output (tests/gallery/checks.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import REPO, find_nvim, si
from gallery.checks import (FILES, Shown, check_files, check_hovers, check_lines, check_mixer, check_target,
                            hover_lines, target_line, texts)
from gallery.expected import GALLERY, MIXER, attention_flops
from html_tables import exact, page_tables
from workspace_files import line_of

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
def totals(gallery_totals) -> dict[tuple[str, str], dict]:
    return gallery_totals   # one scan for this module and check's gallery (tests/conftest.py)


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



@pytest.fixture(scope="module")
def llama2c_page(tmp_path_factory) -> dict[str, list[list[str]]]:
    out = tmp_path_factory.mktemp("page") / "llama2c.html"
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "examples/llama2c.py", "--html", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return page_tables(out.read_text(encoding="utf-8"))


def test_the_html_table_has_the_hovers_numbers_for_a_module_called_through_forward(shown, llama2c_page):
    # llama2.c's TransformerBlock calls self.attention.forward(...): no hook fires, and each call's
    # own work (its products, its rotary embedding) is still its own, in the page as in the hover.
    # One call on T=32 tokens, D=64 over 2 key-value heads 32 wide, 4 heads of 16:
    T, D, KV, H, hd = 32, 64, 32, 4, 16
    parameters = D * D + D * KV + D * KV + D * D               # wq, wk, wv, wo: 12,288
    macs = 2 * T * D * D + 2 * T * D * KV + 2 * H * T * T * hd  # 262,144 + 131,072 + 131,072 = 524,288
    flops = attention_flops()                                   # 1,074,048 (tests/gallery/expected.py)
    header, *rows = llama2c_page["modules"]
    column = {name: header.index(name) for name in header}
    by_path = {(row[column["path"]], row[column["call"]]): row for row in rows}
    calls = [by_path[(f"layers.{i}.attention", "0")] for i in (0, 1)]
    beside = {"FLOPs": [], "MACs": []}
    for row in calls:
        assert row[column["parameters"]] == f"{parameters:,}", row
        assert exact(row[column["FLOPs (dispatched operators)"]]) == (False, flops), row
        assert exact(row[column["MACs (dispatched operators)"]]) == (False, macs), row
        for unit in beside:
            beside[unit].append(exact(row[column[f"{unit} (module formulas)"]]))
    # the hover of the line that built both attentions: the two calls together
    hover = shown.hovers[("examples/llama2c.py", line_of(texts()["examples/llama2c.py"], "self.attention = Attention(args)"))]
    assert f"Parameters: {2 * parameters:,} (" in hover, hover
    assert f"| **dispatched operators** (shown) | {si(2 * flops, 'FLOPs')} | {si(2 * macs, 'MACs')} |" in hover, hover
    other = " | ".join(("≥ " if any(bound for bound, _ in cells) else "") + si(sum(value for _, value in cells), unit)
                       for unit, cells in beside.items())
    assert f"| module formulas | {other} |" in hover, (other, hover)
