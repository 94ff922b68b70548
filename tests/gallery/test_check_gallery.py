"""The example gallery through ``torchscan-lsp check`` (one run over ``examples/``) and the exact
MACs through ``torchscan-lsp scan --format json`` (one run): see ``checks.py`` for what is asserted."""

import subprocess
import sys

import pytest

from gallery.checks import REPO, Shown, check_files, check_lines, check_mixer, check_target, parse_check
from gallery.expected import GALLERY

pytest.importorskip("transformers", reason="the gallery's transformer models need the examples extra")
pytest.importorskip("einops", reason="the gallery's ViT needs the examples extra")


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


@pytest.fixture(scope="module")
def shown() -> Shown:
    return parse_check(_run("check", "examples/"))


@pytest.fixture(scope="module")
def totals(gallery_totals) -> dict[tuple[str, str], dict]:
    return gallery_totals   # one scan for this module and Neovim's gallery (tests/conftest.py)


@pytest.mark.parametrize("expected", GALLERY, ids=lambda e: e.target)
def test_each_gallery_target(shown, totals, expected):
    check_target(shown, expected, totals[(expected.file, expected.target)])


def test_the_operator_without_a_formula_is_one_warning_with_the_known_bound(shown, totals):
    check_mixer(shown, totals[("examples/layers.py", "MixerNet")])


def test_no_noise_across_the_gallery(shown):
    check_files(shown)


def test_lines_written_like_public_repositories(shown):
    check_lines(shown)

