"""``budget``, ``max_increase`` and ``compare_with`` as options: in a pragma, in
``[tool.torchscan-lsp]`` and its ``budget`` sub-table (merged key by key, like ``train``), and in
the job (never the worker's, but for a budget's ``train_memory``)."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from torchscan_lsp.session.jobs import build_job, effective_options
from torchscan_lsp.session.settings import Settings, resolve
from torchscan_lsp.targets import WorkspaceConfigError, find_targets, load_workspace_defaults


def pragma(options: str) -> str:
    return f"# torchscan: input_shape=(3,), {options}\ndef build():\n    pass\n"


def test_budget_options_in_a_pragma():
    scan = find_targets(pragma('budget={"params": "25M", "flops": "4.1 GFLOPs"}, max_increase={"flops": "5 %"}, '
                               'compare_with="origin/main"'))
    assert scan.problems == []
    assert scan.targets[0].options == {"input_shape": (3,), "budget": {"params": "25M", "flops": "4.1 GFLOPs"},
                                       "max_increase": {"flops": "5 %"}, "compare_with": "origin/main"}


@pytest.mark.parametrize("options, message", [
    ('budget={"flops": "4.1 GMACs"}',
     "budget 'flops': '4.1 GMACs' is not an amount (that is MACs, not FLOPs); expected \"4.1 GFLOPs\", "
     "\"800 MFLOPs\" or 4100000000."),
    ('budget="25M"', "budget must be a dict such as {\"params\": \"25M\", \"flops\": \"4.1 GFLOPs\"}, got str."),
    ('max_increase={"peak_memory": "5 %"}',
     "max_increase 'peak_memory': only params, flops, macs are compared with the baseline (the baseline is "
     "analysed, never measured); put a limit on peak_memory in budget instead"),
    ('compare_with="--output=x"', "compare_with must be \"HEAD\" (default), another git ref such as \"main\", "
                                  "\"save\" (the previous analysis) or \"off\", got '--output=x'"),
    ('compare_with="HEAD..main"', "compare_with must be \"HEAD\" (default), another git ref such as \"main\", "
                                  "\"save\" (the previous analysis) or \"off\", got 'HEAD..main'"),
])
def test_a_bad_option_is_a_problem_at_the_option(options, message):
    scan = find_targets(pragma(options))
    (problem,) = scan.problems
    assert (problem.line, problem.message) == (1, message)
    # at the option's value, not the start of the line
    assert problem.column == len("# torchscan: input_shape=(3,), ") + options.index("=") + 1


def write(tmp_path, text: str):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def test_the_workspace_budget_merges_key_by_key(tmp_path):
    write(tmp_path, """
        [tool.torchscan-lsp]
        compare_with = "main"

        [tool.torchscan-lsp.budget]
        params = "25M"
        flops = "4.1 GFLOPs"
    """)
    defaults = load_workspace_defaults(tmp_path)
    target = SimpleNamespace(name="build", options={"budget": {"flops": "8 GFLOPs", "train_memory": "24 GiB"}})
    options = effective_options(target, defaults, Settings())
    # the target's flops over the workspace's; the workspace's params kept; its train_memory is the step's budget
    assert options["budget"] == {"params": "25M", "flops": "8 GFLOPs", "train_memory": "24 GiB"}
    assert options["train_memory"] == "24 GiB"
    job, _ = build_job(str(tmp_path), str(tmp_path / "m.py"), target, defaults, Settings())
    assert job["options"] == {"device": "cpu", "train_memory": "24 GiB"}   # budgets are the session's
    # the table's compare_with is the default of the setting torchscan.compareWith; the editor's wins
    assert resolve({"compareWith": "main"}, None)[0].compareWith == "main"
    assert resolve({"compareWith": "main"}, {"compareWith": "save"})[0].compareWith == "save"


def test_a_train_memory_option_wins_over_the_budgets(tmp_path):
    target = SimpleNamespace(name="b", options={"train_memory": "80 GB", "budget": {"train_memory": "24 GiB"}})
    assert effective_options(target, {}, Settings())["train_memory"] == "80 GB"


def test_every_bad_key_of_the_budget_table_at_its_line(tmp_path):
    write(tmp_path, """
        [tool.torchscan-lsp]
        device = "cpu"

        [tool.torchscan-lsp.budget]
        params = "25M"
        flops = "a lot"
        latency = 5

        [tool.torchscan-lsp.max_increase]
        latency = "5 %"
    """)
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    assert [(p.line, p.message) for p in raised.value.problems] == [
        (6, "[tool.torchscan-lsp.budget] budget 'flops': 'a lot' is not an amount; expected \"4.1 GFLOPs\", "
            "\"800 MFLOPs\" or 4100000000."),
        (7, "[tool.torchscan-lsp.budget] budget 'latency': 5 has no unit; expected \"5 ms\", \"250 µs\" or \"0.5 s\"."),
        (10, "[tool.torchscan-lsp.max_increase] max_increase 'latency': only params, flops, macs are compared with "
             "the baseline (the baseline is analysed, never measured); put a limit on latency in budget instead"),
    ]


def test_a_bad_compare_with_setting_is_named():
    settings, problems = resolve(None, {"compareWith": "-x"})
    assert settings.compareWith == "HEAD"
    assert problems == ["setting torchscan.compareWith must be \"HEAD\" (default), another git ref such as \"main\", "
                        "\"save\" (the previous analysis) or \"off\", got '-x'"]
