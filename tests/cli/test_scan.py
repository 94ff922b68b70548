"""``torchscan-lsp scan``: tables, JSON, exit codes and one-line errors (never a traceback of ours)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workspace_files import line_of, run_scan as scan, write

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace root (it has a pyproject.toml) that is also the current directory."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


CONV = """
    import torch.nn as nn


    # torchscan: input_shape=(3, 32, 32)
    def build():
        return nn.Conv2d(3, 8, 3)
"""


def test_table_for_a_conv_factory(workspace, capsys):
    files = write(workspace, {"net.py": CONV})
    code, out, err = scan(capsys, "net.py")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"net.py:{line_of(files['net.py'], 'def build')}: build"
    assert "conv2d    Conv2d    (1, 8, 30, 30)    224        0          True     " in lines
    assert "Total params: 224" in lines
    assert "Module-formula forward FLOPs: 388.80 kFLOPs" in lines
    assert "Operator forward FLOPs: 388.80 kFLOPs" in lines
    assert err == ""


def test_json_output(workspace, capsys):
    write(workspace, {"net.py": CONV})
    code, out, _ = scan(capsys, "net.py", "--format", "json")
    assert code == 0
    (result,) = json.loads(out)
    assert (result["file"], result["target"], result["ok"]) == ("net.py", "build", True)
    assert result["report"]["totals"]["parameters"]["value"] == 224
    assert result["report"]["totals"]["module_flops"]["value"] == 388_800
    assert result["source_map"]["modules"][0]["defined_at"] == {"file": "net.py", "line": 6}
    assert result["imported_files"] == ["net.py"]


def test_target_option_selects_one(workspace, capsys):
    write(workspace, {"net.py": textwrap.dedent(CONV) + "\n\n# torchscan: input_shape=(4,)\ndef other():\n    return nn.Linear(4, 2)\n"})
    code, out, _ = scan(capsys, "net.py", "--target", "other")
    assert code == 0
    assert out.splitlines()[0].endswith(": other")
    assert "Total params: 10" in out and "Total params: 224" not in out

    code, out, err = scan(capsys, "net.py", "--target", "missing")
    assert code == 1 and out == ""
    assert err == "net.py:1: error: no target named 'missing' (targets here: build, other)\n"


def test_workspace_defaults_from_pyproject(workspace, capsys):
    (workspace / "pyproject.toml").write_text("[tool.torchscan-lsp]\ninput_shape = [3, 32, 32]\n", encoding="utf-8")
    write(workspace, {"net.py": "import torch.nn as nn\n\n\n# torchscan:\ndef build():\n    return nn.Conv2d(3, 8, 3)\n"})
    code, out, err = scan(capsys, "net.py")
    assert code == 0, err
    assert "Total params: 224" in out


def test_invalid_workspace_defaults(workspace, capsys):
    (workspace / "pyproject.toml").write_text('[tool.torchscan-lsp]\ndevice = "cpu"\nstrikt = true\n', encoding="utf-8")
    write(workspace, {"net.py": CONV})
    code, out, err = scan(capsys, "net.py")
    assert code == 1 and out == ""
    assert err.startswith("pyproject.toml:3: error: [tool.torchscan-lsp] unknown option 'strikt'")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("files", "argv", "expected"),
    [
        pytest.param(
            {"net.py": "# torchscan: input_shape=(3,)\ndef build(:\n    pass\n"},
            ["net.py"],
            "net.py:2: error: syntax error: invalid syntax",
            id="syntax-error",
        ),
        pytest.param(
            {"net.py": "# torchscan: input_shape=shape()\ndef build():\n    pass\n"},
            ["net.py"],
            "net.py:1: error: option 'input_shape' must be a Python literal (numbers, strings, tuples, "
            "lists, True/False), not the expression `shape()`; options are read, never run",
            id="non-literal-option",
        ),
        pytest.param(
            {"net.py": "# torchscan: input_shape=(3,), colour='red'\ndef build():\n    pass\n"},
            ["net.py"],
            "net.py:1: error: unknown option 'colour' (known options: input_shape, dtype, device, mode, "
            "strict, train, train_memory, plan, measure, timeout, budget, max_increase, compare_with, roofline)",
            id="unknown-option",
        ),
        pytest.param(
            {"net.py": "# torchscan: input_shape=(3,)\ndef build(width):\n    pass\n"},
            ["net.py"],
            "net.py:2: error: factory 'build' takes required argument(s) width; a target is called with "
            "no arguments: give them defaults or wrap the call in a zero-argument function",
            id="required-argument",
        ),
        pytest.param(
            {"net.py": "import torch.nn as nn\n\n\ndef build():\n    return nn.ReLU()\n"},
            ["net.py"],
            "net.py:1: error: no annotated model found; put '# torchscan: input_shape=(...)' on the line "
            "above a zero-argument model factory or nn.Module class",
            id="no-targets",
        ),
        pytest.param(
            {
                "helpers.py": "def width():\n    raise ValueError('width must be positive, got -1')\n",
                "net.py": "import torch.nn as nn\nfrom helpers import width\n\n\n"
                "# torchscan: input_shape=(3, 8, 8)\ndef build():\n    return nn.Conv2d(3, width(), 3)\n",
            },
            ["net.py"],
            "helpers.py:2: error: 'build' failed: ValueError: width must be positive, got -1",
            id="factory-raises",
        ),
        pytest.param(
            {
                "net.py": "import torch.nn as nn\n\n\n# torchscan: input_shape=(3,)\nclass Head(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(10, 5)\n\n"
                "    def forward(self, x):\n        return self.fc(x)\n",
            },
            ["net.py"],
            # the advice: input_shape=(3,) plus the batch dimension of 1 made the (1, 3) that fc refused
            "net.py:11: error: the forward pass of 'Head' failed: RuntimeError: mat1 and mat2 shapes "
            "cannot be multiplied (1x3 and 10x5); the inputs were generated from input_shape=(3,) with a "
            "batch dimension of 1 added, as (1, 3): input_shape excludes the batch dimension; fit "
            "input_shape to the model, or return (model, args) from the factory for inputs of your own",
            id="forward-fails-on-the-shape",
        ),
        pytest.param(
            {"net.py": "import torch.nn as nn\nimport no_such_module_xyz\n\n\n# torchscan: input_shape=(3,)\n"
             "def build():\n    return nn.ReLU()\n"},
            ["net.py"],
            "net.py:2: error: cannot import the module: ModuleNotFoundError: No module named 'no_such_module_xyz'",
            id="import-error",
        ),
        pytest.param(
            {"net.py": "import torch.nn as nn\n\n\n# torchscan: device='cpu'\ndef build():\n    return nn.ReLU()\n"},
            ["net.py"],
            "net.py:4: error: 'build' returns only a model and no input_shape is set; add input_shape=(...) "
            "(without the batch dimension) to its pragma, or return (model, args) or (model, args, kwargs)",
            id="no-inputs",
        ),
    ],
)
def test_errors_are_one_line_with_a_non_zero_exit(workspace, capsys, files, argv, expected):
    write(workspace, files)
    code, out, err = scan(capsys, *argv)
    assert code == 1
    assert out == ""
    assert err == expected + "\n"


def test_json_output_still_lists_failures(workspace, capsys):
    write(workspace, {"net.py": "import torch.nn as nn\n\n\n# torchscan: input_shape=(3,)\ndef build():\n    return nn.Linear(4, 2)\n"})
    code, out, err = scan(capsys, "net.py", "--format", "json")
    assert code == 1
    (result,) = json.loads(out)
    assert result["ok"] is False and result["error"]["kind"] == "forward"
    # no workspace line ran in the forward (nn.Linear is torch's): the error is on the target's line
    assert err.startswith("net.py:5: error: the forward pass of 'build' failed: RuntimeError:")


def test_one_failing_file_does_not_stop_the_others(workspace, capsys):
    write(workspace, {"bad.py": "x = (\n", "good.py": CONV})
    code, out, err = scan(capsys, "bad.py", "good.py")
    assert code == 1
    assert "Total params: 224" in out
    assert err.startswith("bad.py:1: error: syntax error:")


def test_warnings_do_not_fail_the_scan(workspace, capsys):
    write(workspace, {"net.py": "# torchscan: input_shape=(1,)\nX = 1\n" + textwrap.dedent(CONV)})
    code, out, err = scan(capsys, "net.py")
    assert code == 0
    assert err.startswith("net.py:1: warning: this '# torchscan:' pragma is not directly above a def or class")
    assert "Total params: 224" in out


def test_directories_are_searched_for_annotated_files(workspace, capsys):
    write(
        workspace,
        {
            "models/a.py": CONV,
            "models/plain.py": "def not_a_target(:\n",  # never mentions the pragma: not read as one
            "models/.hidden/b.py": CONV,
        },
    )
    code, out, err = scan(capsys, "models")
    assert code == 0, err
    assert [line for line in out.splitlines() if line.endswith(": build")] == ["models/a.py:5: build"]


def test_a_directory_without_targets(workspace, capsys):
    write(workspace, {"models/plain.py": "X = 1\n"})
    code, out, err = scan(capsys, "models")
    assert code == 1
    assert err == ("models: error: no annotated model found; put '# torchscan: input_shape=(...)' on the line "
                   "above a zero-argument model factory or nn.Module class\n")


def test_memory_measurement_flag(workspace, capsys):
    write(workspace, {"net.py": CONV})
    code, out, err = scan(capsys, "net.py", "--memory")
    assert code == 0, err
    assert "Peak memory (cpu): " in out


def test_the_readme_demo_prints_real_tables():
    """``make demo`` runs exactly this command from the repository root."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "-m", "torchscan_lsp", "scan", "examples/cnn.py", "examples/transformer_models.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr
    assert "Traceback" not in process.stderr
    titles = [line.split(": ", 1)[1] for line in process.stdout.splitlines() if line.startswith("examples/")]
    assert titles == ["small_resnet", "TinyConvNet", "gpt2_small", "bert_small", "llama_small", "mistral_small",
                      "t5_small"]
    assert process.stdout.count("Total params: ") == 7
    assert "Total params: 9,098" in process.stdout  # TinyConvNet: 80 + 1,168 + 7,850
    assert "Total params: 541,184" in process.stdout  # GPT-2 (tied embeddings counted once)
    # TinyConvNet's MACs: 8·28·28·9 + 16·14·14·72 + 784·10 = 56,448 + 225,792 + 7,840 = 290,080
    assert "Module-formula forward MACs: 290.08 kMACs" in process.stdout
    # and the README quotes the totals of that real run
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quoted = readme.split("examples/cnn.py:73: TinyConvNet", 1)[1].split("```", 1)[0]
    totals = [line for line in quoted.splitlines() if line.startswith(("Module-formula", "Operator"))]
    assert len(totals) == 5 and all(line in process.stdout for line in totals), totals


def test_json_on_stdout_stays_pure_when_libraries_print(workspace):
    # The CPU memory profiler and the model itself write to file descriptor 1 below Python;
    # `scan` sends that to stderr so that stdout holds nothing but the JSON.
    write(
        workspace,
        {
            "net.py": """
                import os

                import torch.nn as nn


                # torchscan: input_shape=(3, 32, 32)
                def build():
                    os.write(1, b"raw bytes from the model\\n")
                    print("a print from the model")
                    return nn.Conv2d(3, 8, 3)
            """
        },
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "-m", "torchscan_lsp", "scan", "net.py", "--memory", "--format", "json"],
        cwd=workspace, capture_output=True, text=True, env=env, timeout=300,
    )
    assert process.returncode == 0, process.stderr
    (result,) = json.loads(process.stdout)
    assert result["measurements"]["memory"]["device"] == "cpu"
    assert "raw bytes from the model" in process.stderr
    assert "a print from the model" in process.stderr


def test_none_in_a_pragma_unsets_a_workspace_default(workspace, capsys):
    (workspace / "pyproject.toml").write_text("[tool.torchscan-lsp]\ninput_shape = [3, 32, 32]\n", encoding="utf-8")
    write(
        workspace,
        {
            "net.py": """
                import torch
                import torch.nn as nn


                # torchscan: input_shape=None
                def with_inputs():
                    return nn.Linear(4, 2), (torch.ones(1, 4),)


                # torchscan:
                def without_none():
                    return nn.Linear(4, 2), (torch.ones(1, 4),)
            """
        },
    )
    code, out, err = scan(capsys, "net.py")
    assert code == 1
    assert "Total params: 10" in out  # with_inputs ran with its own inputs
    assert err == (
        "net.py:10: error: 'without_none' returns its own inputs, and input_shape=(3, 32, 32) is set "
        "too; remove input_shape or return only the model (input_shape=None in the pragma overrides a "
        "workspace default)\n"
    )


def test_html_report_for_one_and_for_several_targets(workspace, capsys):
    two = CONV + """

    # torchscan: input_shape=(4,)
    def build_linear():
        return nn.Linear(4, 2)
    """
    write(workspace, {"net.py": CONV, "two.py": two})
    code, _, err = scan(capsys, "net.py", "--html", "report.html")
    assert code == 0 and "wrote report.html" in err
    page = (workspace / "report.html").read_text(encoding="utf-8")
    # Conv2d(3, 8, 3): 8·3·3·3 + 8 = 224 parameters, shown in the totals
    assert "224" in page and "Conv2d" in page
    code, _, err = scan(capsys, "two.py", "--html", "out.html")
    assert code == 0
    # each target gets its own file: the conv's 224 parameters in one, only the Linear in the other
    assert "224" in (workspace / "out.build.html").read_text(encoding="utf-8")
    linear_page = (workspace / "out.build_linear.html").read_text(encoding="utf-8")
    assert "Linear" in linear_page and "Conv2d" not in linear_page
    assert not (workspace / "out.html").exists()


def test_html_report_into_a_missing_folder_is_a_one_line_error(workspace, capsys):
    write(workspace, {"net.py": CONV})
    code, _, err = scan(capsys, "net.py", "--html", "no/such/dir/report.html")
    assert code == 1
    assert "no/such/dir/report.html: error: cannot write the HTML report" in err


# -- each target runs in a worker process of its own, under limits -----------------------------


def test_an_endless_forward_stops_at_the_targets_timeout(workspace, capsys):
    files = write(workspace, {"net.py": """
        import torch.nn as nn


        # torchscan: input_shape=(4,), timeout=3
        class Spin(nn.Module):
            def forward(self, x):
                while True: pass
    """, "good.py": CONV})
    code, out, err = scan(capsys, "net.py", "good.py")
    assert code == 1
    # one line, at the loop (where the stack dump says it was), or at the target when a loaded
    # machine let no dump arrive in time; the next file still ran
    (line,) = err.splitlines()
    where, message = line.split(": error: ")
    assert where in (f"net.py:{line_of(files['net.py'], 'while True')}", f"net.py:{line_of(files['net.py'], 'class')}")
    assert message.startswith("'Spin' timed out: analysis stopped after 3 s (raise --timeout, or the target's "
                              "timeout option")
    assert "Total params: 224" in out


def test_the_timeout_flag_and_a_workspace_default(workspace, capsys):
    write(workspace, {"net.py": """
        import time

        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build():
            time.sleep(60)
    """})
    code, _, err = scan(capsys, "net.py", "--timeout", "1")
    assert code == 1 and "analysis stopped after 1 s (raise --timeout" in err
    # the JSON report gives the same advice: a terminal user has no editor setting to raise
    code, out, _ = scan(capsys, "net.py", "--timeout", "1", "--format", "json")
    (entry,) = json.loads(out)
    assert "raise --timeout" in entry["error"]["message"] and "torchscan.timeoutSeconds" not in entry["error"]["message"]
    (workspace / "pyproject.toml").write_text("[tool.torchscan-lsp]\ntimeout = 2\n", encoding="utf-8")
    code, _, err = scan(capsys, "net.py")
    assert code == 1 and "analysis stopped after 2 s" in err
    code, _, err = scan(capsys, "net.py", "--timeout", "1")  # the flag wins over the workspace
    assert code == 1 and "analysis stopped after 1 s" in err


def test_a_factory_that_exits_the_process_is_an_error_and_later_files_still_run(workspace, capsys):
    files = write(workspace, {"exits.py": """
        import os


        # torchscan: input_shape=(4,)
        def build():
            os._exit(0)
    """, "good.py": CONV})
    code, out, err = scan(capsys, "exits.py", "good.py", "--format", "json")
    assert code == 1
    failed, passed = json.loads(out)
    assert (failed["ok"], failed["error"]["kind"], passed["ok"]) == (False, "crash", True)
    assert err.startswith(f"exits.py:{line_of(files['exits.py'], 'def build')}: error: 'build' crashed: "
                          "the worker process ended without a result (exit status 0)")


def test_a_default_dtype_set_by_one_target_does_not_reach_the_next(workspace, capsys):
    write(workspace, {"a.py": """
        import torch
        import torch.nn as nn

        torch.set_default_dtype(torch.float64)


        # torchscan: input_shape=(4,)
        def build():
            return nn.Linear(4, 2)
    """, "b.py": """
        import torch
        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build():
            assert torch.get_default_dtype() == torch.float32, torch.get_default_dtype()
            return nn.Linear(4, 2)
    """})
    code, out, err = scan(capsys, "a.py", "b.py", "--format", "json")
    assert code == 0, err
    assert [r["ok"] for r in json.loads(out)] == [True, True]


def test_a_memory_limit_stops_an_allocation(workspace, capsys):
    write(workspace, {"net.py": """
        import torch
        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build():
            hog = [torch.ones(64, 1024, 1024) for _ in range(40)]  # 40 × 256 MiB
            return nn.Linear(4, 2)
    """})
    code, out, err = scan(capsys, "net.py", "--memory-limit-mb", "1024")
    assert code == 1 and out == ""
    assert "error: 'build' ran out of memory" in err
    assert "(raise --memory-limit-mb" in err


def test_two_input_shapes_from_a_pragma_and_from_pyproject(workspace, capsys):
    # Linear(8, 2) on x and Linear(3, 2) on y: 8·2 + 3·2 = 22 multiply-accumulates.
    two = """
        import torch.nn as nn


        # torchscan: {pragma}
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(8, 2)
                self.b = nn.Linear(3, 2)

            def forward(self, x, y):
                return self.a(x).sum() + self.b(y).sum()
    """
    write(workspace, {"net.py": two.format(pragma="input_shape=[(8,), (3,)]")})
    code, out, err = scan(capsys, "net.py", "--format", "json")
    assert code == 0, err
    assert json.loads(out)[0]["report"]["totals"]["macs"]["value"] == 22

    (workspace / "pyproject.toml").write_text("[tool.torchscan-lsp]\ninput_shape = [[8], [3]]\n", encoding="utf-8")
    write(workspace, {"net.py": two.format(pragma="")})
    code, out, err = scan(capsys, "net.py", "--format", "json")
    assert code == 0, err
    assert json.loads(out)[0]["report"]["totals"]["macs"]["value"] == 22


RELU_NET = """
        import torch
        import torch.nn as nn


        # torchscan: input_shape=(4,), strict={strict}
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))
    """
"""A Linear, then a relu in the root's own forward; ``{strict}``: the strict option."""


def test_strict_incomplete_is_not_a_shape_error(workspace, capsys):
    files = write(workspace, {"net.py": RELU_NET.format(strict='["dmas"]')})
    code, _, err = scan(capsys, "net.py")
    assert code == 1
    # the relu in Net's own forward: no module formula reads or writes its elements, so the DMAs
    # (one method) are partial; strict=["dmas"] asks for them
    assert err.startswith(f"net.py:{line_of(files['net.py'], 'class Net')}: error: 'Net' (strict): analysis is "
                          "incomplete for dmas (dmas partial): container_work in the root module (aten.relu ×1)")


def test_strict_headline_passes_when_the_operators_count_everything(workspace, capsys):
    write(workspace, {"net.py": RELU_NET.format(strict='"headline"')})
    code, out, err = scan(capsys, "net.py")
    # the relu escaped the module formulas, but the dispatched operators counted it (and the
    # Linear's 16 MACs): FLOPs and MACs are complete by one method, which is all "headline" asks
    assert (code, err) == (0, "")
    assert "Operator forward MACs: 16.00 MACs" in out


def test_strict_true_is_the_reference_rule(workspace, capsys):
    files = write(workspace, {"net.py": RELU_NET.format(strict="True")})
    code, _, err = scan(capsys, "net.py")
    # the same relu: every method must be complete, and the module FLOPs and DMAs missed it (the
    # MACs did not: a relu has none)
    assert code == 1
    assert err.startswith(f"net.py:{line_of(files['net.py'], 'class Net')}: error: 'Net' (strict): analysis is "
                          "incomplete for flops (module_flops partial); dmas (dmas partial): container_work in the "
                          "root module (aten.relu ×1)")


def test_a_wrong_return_value_says_what_was_returned(workspace, capsys):
    files = write(workspace, {"net.py": "# torchscan: input_shape=(4,)\ndef notamodel():\n    return 3\n"})
    code, _, err = scan(capsys, "net.py")
    assert code == 1
    assert err == (f"net.py:{line_of(files['net.py'], 'return 3')}: error: 'notamodel' returned an int (3), not an "
                   "nn.Module; return the model, (model, args) or (model, args, kwargs)\n")


def test_the_table_lists_the_diagnostics_after_it(workspace, capsys):
    files = write(workspace, {"net.py": """
        import torch
        import torch.nn as nn


        # torchscan: input_shape=(4,)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))
    """})
    code, out, err = scan(capsys, "net.py")
    assert code == 0, err
    lines = out.splitlines()
    assert "Diagnostics: 2 (inspect report['diagnostics'])" not in out  # the library's footer
    # the relu in the root's own forward: the dispatched operators (the headline) counted it, so
    # nothing makes a headline number partial; the module formulas missed it: one line, on the
    # line that ran it (16 MACs: Linear(4, 4); 32 FLOPs: its 2 x 16, the relu's 4 not counted)
    start = lines.index("Also missed by the module formulas (1):")
    assert lines[start - 1].startswith("____")  # after the table
    assert lines[start + 1] == (
        f"  net.py:{line_of(files['net.py'], 'return torch.relu')}: note: aten.relu in the own forward of the root "
        "module: no module formula counts it, so the module FLOPs shown are lower bounds (Net: 16 MACs · ≥ 32 FLOPs known)"
    )
    assert lines[start + 2] == "  (--format json lists each report diagnostic in full)"
    assert not any(line.startswith("Diagnostics of the") for line in lines)  # the headline misses nothing


def test_repeated_diagnostics_are_folded_with_a_count(workspace, capsys):
    files = write(workspace, {"net.py": """
        import torch
        import torch.nn as nn


        class Relu(nn.Module):
            def forward(self, x):
                return torch.relu(x)


        # torchscan: input_shape=(4,)
        def build():
            return nn.Sequential(*[Relu() for _ in range(12)])
    """})
    code, out, err = scan(capsys, "net.py")
    assert code == 0, err
    # 12 Relu modules without a module formula, built on one line: one line for all twelve
    lines = out.splitlines()
    start = lines.index("Also missed by the module formulas (1):")
    assert lines[start + 1].startswith(
        f"  net.py:{line_of(files['net.py'], 'return nn.Sequential')}: note: Module type not supported: net.Relu "
        "(×12 layers: `0`, `1`, `2` and 9 more)")


TWO_PATHS = """
    import torch
    import torch.nn as nn


    class Odd(nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x)


    # torchscan: input_shape=(3, 16, 16)
    class TwoPaths(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.odd = Odd()

        def forward(self, x):
            return self.odd(self.conv(x))
"""


def test_the_headline_gaps_come_first_and_receptive_field_notes_only_when_asked(workspace, capsys):
    files = write(workspace, {"net.py": TWO_PATHS})
    code, out, err = scan(capsys, "net.py")
    assert code == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Diagnostics of the"))
    # bessel_j0 has no FLOP formula: it makes the headline (dispatched operators) partial, so it is
    # the first line; Odd has no module formula either: the module formulas' gap comes after
    assert lines[start] == "Diagnostics of the dispatched operators (the headline) and the parameters (2):"
    assert lines[start + 1].startswith(
        f"  net.py:{line_of(files['net.py'], 'bessel_j0')}: warning: aten.special_bessel_j0 has no FLOP formula")
    assert lines[start + 2].startswith(f"  net.py:{line_of(files['net.py'], 'class TwoPaths')}: information: "
                                       "TwoPaths: the totals shown are lower bounds")
    assert lines[start + 3] == "Also missed by the module formulas (1):"
    assert "receptive field not derived" not in out
    # Odd stops the receptive field of a convolutional model: a note, with the flag only
    code, out, _ = scan(capsys, "net.py", "--receptive-field-notes")
    assert code == 0
    assert (f"  net.py:{line_of(files['net.py'], 'self.odd = Odd()')}: information: Module type not supported: "
            "net.Odd (`odd`): receptive field not derived") in out.splitlines()
