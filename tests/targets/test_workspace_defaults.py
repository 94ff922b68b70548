"""Workspace defaults from ``pyproject.toml`` ``[tool.torchscan-lsp]``, validated like pragmas."""

from __future__ import annotations

import textwrap

import pytest

from torchscan_lsp.targets import WorkspaceConfigError, load_workspace_defaults, merge_options
from torchscan_lsp.targets.options import OptionError, validate_options


def _write(tmp_path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def test_no_file_or_no_table_gives_no_defaults(tmp_path):
    assert load_workspace_defaults(tmp_path) == {}
    _write(tmp_path, '[project]\nname = "x"\n')
    assert load_workspace_defaults(tmp_path) == {}


def test_values_are_read_and_converted_to_pragma_literals(tmp_path):
    _write(
        tmp_path,
        """
        [project]
        name = "x"

        [tool.torchscan-lsp]
        input_shape = [3, 224, 224]
        dtype = "bfloat16"
        device = "cpu"
        mode = "structure"
        strict = true
        measure = ["latency"]
        timeout = 30
        """,
    )
    assert load_workspace_defaults(tmp_path) == {
        "input_shape": (3, 224, 224),
        "dtype": "bfloat16",
        "device": "cpu",
        "mode": "structure",
        "strict": True,
        "measure": ["latency"],
        "timeout": 30,
    }


def test_several_input_shapes(tmp_path):
    _write(tmp_path, "[tool.torchscan-lsp]\ninput_shape = [[3, 32, 32], [10]]\n")
    assert load_workspace_defaults(tmp_path) == {"input_shape": [(3, 32, 32), (10,)]}


def test_unknown_option_names_the_line(tmp_path):
    _write(
        tmp_path,
        """
        [tool.other]
        devise = 1

        [tool.torchscan-lsp]
        device = "cpu"
        devise = "cuda"
        """,
    )
    with pytest.raises(WorkspaceConfigError) as caught:
        load_workspace_defaults(tmp_path)
    assert caught.value.line == 6
    assert "unknown option 'devise'" in caught.value.message
    assert "did you mean 'device'" in caught.value.message
    assert str(caught.value).startswith(f"{tmp_path / 'pyproject.toml'}:6: ")


def test_wrong_value_names_the_line(tmp_path):
    _write(tmp_path, '[tool.torchscan-lsp]\nmode = "quick"\n')
    with pytest.raises(WorkspaceConfigError) as caught:
        load_workspace_defaults(tmp_path)
    assert caught.value.line == 2
    assert 'mode must be "full" or "structure"' in caught.value.message


def test_inconsistent_values(tmp_path):
    _write(tmp_path, '[tool.torchscan-lsp]\ninput_shape = [3, 8, 8]\ndtype = ["float32", "int64"]\n')
    with pytest.raises(WorkspaceConfigError) as caught:
        load_workspace_defaults(tmp_path)
    assert caught.value.line == 3
    assert "one dtype per input" in caught.value.message


def test_invalid_toml(tmp_path):
    _write(tmp_path, "[tool.torchscan-lsp\n")
    with pytest.raises(WorkspaceConfigError) as caught:
        load_workspace_defaults(tmp_path)
    assert "invalid TOML" in caught.value.message


def test_merge_lets_the_target_win():
    defaults = {"device": "cpu", "input_shape": (3, 8, 8)}
    assert merge_options(defaults, {"device": "cuda"}) == {"device": "cuda", "input_shape": (3, 8, 8)}
    assert merge_options(None, {}) == {}


def test_validate_options_rejects_unknown_names():
    with pytest.raises(OptionError, match="unknown option 'shape'"):
        validate_options({"shape": (3,)})
