"""The training step's options in a pragma, a decorator and ``[tool.torchscan-lsp]``: read with
``ast``, validated without torch, errors naming the option."""

from __future__ import annotations

import textwrap

import pytest

from torchscan_lsp.targets import WorkspaceConfigError, find_targets, load_workspace_defaults


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_a_pragma_with_train_options_and_a_budget():
    source = _src(
        """
        # torchscan: input_shape=(3, 224, 224), train={"optimizer": "adamw", "batch": 32, "dtype": "bfloat16"}, train_memory="24 GiB", measure=["train"]
        def resnet():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.problems == []
    assert scan.targets[0].options == {
        "input_shape": (3, 224, 224), "train": {"optimizer": "adamw", "batch": 32, "dtype": "bfloat16"},
        "train_memory": "24 GiB", "measure": ["train"],
    }


@pytest.mark.parametrize(("pragma", "named"), [
    ('train={"optimizer": "adamw", "momentum": 0.9}', "train option 'momentum' does not apply to optimizer 'adamw'"),
    ('train={"batsh": 32}', "unknown train option 'batsh' (did you mean 'batch'?)"),
    ('train={"batch": 0}', "train option 'batch': got 0"),
    ('train="adamw"', "train must be a dict of training-step options"),
    ('train_memory="a lot"', "train_memory: 'a lot' is not a size"),
])
def test_bad_train_options_are_problems_naming_the_option(pragma, named):
    source = f"# torchscan: input_shape=(4,), {pragma}\ndef build():\n    pass\n"
    scan = find_targets(source)
    assert scan.targets == []
    (problem,) = scan.problems
    assert named in problem.message and problem.line == 1


def test_workspace_defaults_hold_a_budget_and_a_train_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(_src(
        """
        [tool.torchscan-lsp]
        train_memory = "24 GiB"

        [tool.torchscan-lsp.train]
        optimizer = "sgd"
        momentum = 0.9
        """
    ), encoding="utf-8")
    assert load_workspace_defaults(tmp_path) == {"train_memory": "24 GiB", "train": {"optimizer": "sgd", "momentum": 0.9}}


def test_a_bad_train_table_names_its_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text(_src(
        """
        [tool.torchscan-lsp]
        device = "cpu"
        train_memory = "24 GiB"
        train = {optimizer = "lamb"}
        """
    ), encoding="utf-8")
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    assert raised.value.line == 4
    assert "train option 'optimizer': got 'lamb'" in raised.value.message
