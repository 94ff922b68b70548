"""The ``roofline`` option: ``True``/``"local"`` (this machine), a device of the table, ``False``;
anything else is a problem at the option, naming the closest device, whether it came from a pragma
(``tests/cli/test_scan_roofline.py``) or from ``[tool.torchscan-lsp]`` in ``pyproject.toml``."""

from __future__ import annotations

import textwrap

import pytest

from torchscan_lsp.targets import WorkspaceConfigError, load_workspace_defaults
from torchscan_lsp.targets.options import THIS_MACHINE, OptionError, roofline_device, validate_options


@pytest.mark.parametrize("value, wanted", [(True, THIS_MACHINE), ("local", THIS_MACHINE), ("H100-SXM", "H100-SXM"),
                                           (False, None), (None, None)])
def test_what_a_valid_value_asks_for(value, wanted):
    if value is not None:
        validate_options({"roofline": value})
    assert roofline_device(value) == wanted


def test_a_misspelt_device_names_the_closest():
    with pytest.raises(OptionError, match=r"roofline: unknown device 'H100-SMX' \(did you mean 'H100-SXM'\?\)"):
        validate_options({"roofline": "H100-SMX"})


def test_a_value_of_the_wrong_kind_says_what_is_expected():
    with pytest.raises(OptionError, match=r"roofline must be True or \"local\" .*, got 3"):
        validate_options({"roofline": 3})


def test_an_unknown_device_in_the_workspace_table_is_a_problem_at_its_line(tmp_path):
    # line 1 [project], 2 name, 3 blank, 4 the table's header, 5 roofline
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "demo"

        [tool.torchscan-lsp]
        roofline = "A100-8GB"
    """), encoding="utf-8")
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    [problem] = raised.value.problems
    assert problem.line == 5
    assert "unknown device 'A100-8GB' (did you mean 'A100-80GB'?)" in str(problem)


def test_a_device_in_the_workspace_table_is_a_default(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchscan-lsp]\nroofline = "H200"\n', encoding="utf-8")
    assert load_workspace_defaults(tmp_path)["roofline"] == "H200"
