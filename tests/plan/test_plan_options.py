"""A plan's options and budgets: what plan=True gives, what each option accepts, and a budget that
is neither a size nor a known device is a problem at the option (no torch needed to say so)."""

from __future__ import annotations

import textwrap

import pytest
from torch import nn

from torchscan_lsp.contract.plan import PRECISIONS, PlanOptionError, parse_budget, parse_plan_options
from torchscan_lsp.engine.training import plan_training
from torchscan_lsp.session.measurements import MeasurementFailure
from torchscan_lsp.targets import find_targets
from torchscan_lsp.targets.config import WorkspaceConfigError, load_workspace_defaults
from torchscan_lsp.targets.options import merge_options
from torchscan_lsp.worker.runner import run_job

GiB = 1 << 30


def test_plan_true_compares_three_precisions_with_and_without_checkpointing_on_one_device():
    policies = parse_plan_options(True).policies("adamw")
    assert [(p.precision, p.checkpointing) for p in policies] == [
        (precision, checkpointing) for precision in PRECISIONS for checkpointing in ("none", "blocks")]
    assert {(p.optimizer, p.sharding, p.ranks) for p in policies} == {("adamw", "single", 1)}


def test_every_combination_of_the_lists_is_a_policy_and_sharded_ones_run_on_the_ranks():
    options = parse_plan_options({"precision": "bf16-mixed", "optimizer": ["adamw", "sgd"], "checkpointing": ["none"],
                                  "sharding": ["single", "fsdp"], "ranks": 8})
    names = [p.name for p in options.policies()]
    assert names == ["bfloat16-mixed · adamw · no checkpointing · one device",
                     "bfloat16-mixed · sgd · no checkpointing · one device",
                     "bfloat16-mixed · adamw · no checkpointing · fsdp×8",
                     "bfloat16-mixed · sgd · no checkpointing · fsdp×8"]


@pytest.mark.parametrize("value, size, device", [
    ("24 GiB", 24 * GiB, None), ("80 GB", 80 * 10**9, None), (3 * GiB, 3 * GiB, None),
    # the table's nominal capacities (docs/devices.md): 80 GiB, 40 GiB, 24 GiB, 24 GiB
    ("H100-80GB", 80 * GiB, "H100-SXM"), ("A100-40GB", 40 * GiB, "A100-40GB"), ("L4", 24 * GiB, "L4"),
    ("rtx 4090", 24 * GiB, "RTX-4090"),
])
def test_a_budget_is_a_size_or_an_accelerator_of_the_device_table(value, size, device):
    budget = parse_budget(value)
    assert (budget.bytes, budget.device) == (size, device)


@pytest.mark.parametrize("pragma, message", [
    ('train_memory="H10"', "train_memory: 'H10' is not a size nor a known device (did you mean 'H100'?)"),
    ('train_memory="H100-80"', "train_memory: 'H100-80' is not a size nor a known device (did you mean 'H100-80GB'?)"),
    ('train_memory=80', "train_memory: 80 has no unit, so it would be 80 bytes"),
    ('train_memory="lots"', "train_memory: 'lots' is not a size nor a known device"),
    ('train_memory="-3 GiB"', "train_memory: '-3 GiB' is not a size"),
    ('plan={"memory": "A100-4"}', "plan option 'memory': 'A100-4' is not a size nor a known device (did you mean"),
    ('plan={"precision": ["fp8"]}', "plan option 'precision': unknown 'fp8'"),
    ('plan={"sharding": ["zero3"]}', "plan option 'sharding': unknown 'zero3'"),
    ('plan={"ranks": 1}', "plan option 'ranks': got 1; expected an int >= 2"),
    ('plan={"sequence": "input_ids:0"}', "dimension 0 is the batch"),
    # NAME:DIM, NAME an identifier or a positional index, DIM an int: what the text alone can tell
    ('plan={"sequence": "input ids:1"}', "plan option 'sequence': got 'input ids:1'; expected None, or"),
    ('plan={"sequence": "-1:1"}', "plan option 'sequence': got '-1:1'; expected None, or"),
    ('plan={"sequence": "ids:-1"}', "plan option 'sequence': got 'ids:-1'; expected None, or"),
    ('plan={"sequence": "ids:1:2"}', "plan option 'sequence': got 'ids:1:2'; expected None, or"),
    ('plan={"sequence": "ids:²"}', "plan option 'sequence': got 'ids:²'; expected None, or"),
    ('plan={"sequence": -1}', "plan option 'sequence': got -1; expected None, or"),
    ('plan={"batchsize": 3}', "unknown plan option 'batchsize'"),
    ('plan="yes"', "plan must be True, or a dict of plan options"),
])
def test_a_bad_plan_option_is_a_problem_at_the_option(pragma, message):
    source = f"# torchscan: input_shape=(8,), {pragma}\ndef build():\n    pass\n"
    scan = find_targets(source, "model.py")
    problems = [p for p in scan.errors if p.line == 1]
    assert len(problems) == 1 and message in problems[0].message, scan.errors


def test_too_many_policies_is_a_problem_naming_the_lists():
    with pytest.raises(ValueError, match="at most 36: shorten a list"):
        parse_plan_options({"optimizer": ["adamw", "adam", "sgd", "adafactor"], "sharding": ["single", "ddp", "fsdp"]})


def test_a_bad_key_of_the_workspace_plan_table_is_a_problem_at_its_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchscan-lsp]\ntrain_memory = "H10"\n\n[tool.torchscan-lsp.plan]\nprecision = ["float32", "fp8"]\n'
        'ranks = 1\nsharding = ["single", "fsdp"]\n', encoding="utf-8")
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    found = [(p.line, p.message.split(":")[0]) for p in raised.value.problems]
    assert found == [(2, "[tool.torchscan-lsp] train_memory"), (5, "[tool.torchscan-lsp.plan] plan option 'precision'"),
                     (6, "[tool.torchscan-lsp.plan] plan option 'ranks'")]


def test_a_target_plan_true_takes_the_workspace_plan_table_and_its_own_dict_merges_key_by_key():
    table = {"plan": {"sharding": ["single", "fsdp"], "ranks": 4}}
    assert merge_options(table, {"plan": True})["plan"] == {"sharding": ["single", "fsdp"], "ranks": 4}
    assert merge_options(table, {"plan": {"ranks": 8}})["plan"] == {"sharding": ["single", "fsdp"], "ranks": 8}
    assert merge_options(table, {"plan": False})["plan"] is False


def test_a_bad_sequence_of_a_decorator_is_a_problem_at_its_line():
    source = ("import torchscan_lsp\n\n\n@torchscan_lsp.target(input_shape=(8,), plan={\"sequence\": \"ids:x\"})\n"
              "def build():\n    pass\n")
    (problem,) = [p for p in find_targets(source, "model.py").errors]
    assert problem.line == 4 and problem.message.startswith("plan option 'sequence': got 'ids:x'")


@pytest.mark.parametrize("sequence, message", [
    # generated inputs (input_shape=(8,)) are one positional tensor, (batch, 8)
    ("idx:1", "plan option 'sequence': 'idx:1' names no tensor input of the step; its inputs are positional 0, a "
              "tensor of shape (1, 8) (a positional input by its index"),
    ("0:5", "plan option 'sequence': '0:5' names dimension 5 of positional input 0, a tensor of shape (1, 8), which "
            "has dimensions 0 (the batch) to 1."),
])
def test_a_sequence_the_inputs_do_not_have_is_the_plan_jobs_option_error_at_the_annotation(tmp_path, sequence, message):
    # only the factory's inputs can tell: the plan fails as an option does, at its annotation (line 4),
    # saying which inputs there are, not as the model's error at the def line
    (tmp_path / "model.py").write_text(textwrap.dedent(f"""\
        from torch import nn


        # torchscan: input_shape=(8,), plan={{"precision": ["float32"], "checkpointing": ["none"], "sequence": "{sequence}"}}
        def build():
            return nn.Linear(8, 4)
        """), encoding="utf-8")
    options = {"input_shape": [8], "plan": {"precision": ["float32"], "checkpointing": ["none"], "sequence": sequence}}
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "model.py"), "target": "build",
                      "options": options, "source_text": None, "measure": [], "kind": "plan"})
    assert result["ok"] is False
    error = result["error"]
    assert (error["kind"], error["file"], error["line"]) == ("options", "model.py", 4)
    assert error["message"].startswith(message)
    shown = MeasurementFailure("plan", True, error).message("build")
    assert shown.startswith(f"build: the training plan failed: {message}")


def test_a_sequence_no_policy_can_scale_is_one_error_of_the_plan_not_a_row_per_policy():
    # every policy builds the same inputs: two policies (estimated side by side where it can fork)
    # end in the one error of the option, not in two rows of "unavailable"
    def build():
        return nn.Linear(8, 4)

    with pytest.raises(PlanOptionError, match="'ids:1' names no tensor input of the step"):
        plan_training(build, plan={"precision": ["float32", "bfloat16"], "checkpointing": ["none"], "sequence": "ids:1"},
                      memory_budget="1 MiB", input_shape=(8,))
