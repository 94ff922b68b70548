"""The advice of a failed forward fits its case: generated inputs or the factory's own, a shape or a
dtype that did not fit; never "return (model, args)" to a factory that already does."""

from __future__ import annotations

import pytest

from torchscan_lsp.worker.errors import forward_advice
from torchscan_lsp.worker.runner import run_job
from workspace_files import write


def _forward_error(root, source, target, options):
    write(root, {"net.py": source})
    result = run_job({"workspace_root": str(root), "file": str(root / "net.py"), "target": target,
                      "options": options, "source_text": None, "measure": []})
    assert result["error"]["kind"] == "forward", result["error"]
    return result["error"]["message"]


def test_the_batch_dimension_written_twice(tmp_path):
    message = _forward_error(tmp_path, "import torch.nn as nn\n\n\ndef batchdim():\n    return nn.Conv2d(3, 8, 3)\n",
                             "batchdim", {"input_shape": [1, 3, 32, 32]})
    # the engine adds a batch dimension of 1 to (1, 3, 32, 32): conv2d sees five dimensions
    assert "got input of size: [1, 1, 3, 32, 32]" in message
    assert message.endswith("; the inputs were generated from input_shape=(1, 3, 32, 32) with a batch dimension "
                            "of 1 added, as (1, 1, 3, 32, 32): input_shape excludes the batch dimension "
                            "(did you mean input_shape=(3, 32, 32)?)")


def test_inputs_of_the_factory_are_not_told_to_return_inputs(tmp_path):
    source = "import torch\nimport torch.nn as nn\n\n\ndef own():\n    return nn.Linear(8, 4), (torch.rand(2, 5),)\n"
    message = _forward_error(tmp_path, source, "own", {})
    # Linear(8, 4) multiplies the (2 x 5) input by its transposed (8 x 4) weight: 5 != 8
    assert message == "mat1 and mat2 shapes cannot be multiplied (2x5 and 8x4); check the shapes of the inputs the factory returns"
    assert "return (model, args)" not in message


@pytest.mark.parametrize(("input_shape", "advice"), [
    # a shape that does not begin with 1: no guess at what was meant
    ((5,), "; the inputs were generated from input_shape=(5,) with a batch dimension of 1 added, as (1, 5): "
           "input_shape excludes the batch dimension; fit input_shape to the model, or return (model, args) "
           "from the factory for inputs of your own"),
    ([(1, 3), (1, 4)], "; the inputs were generated from input_shape=[(1, 3), (1, 4)] with a batch dimension of 1 "
                       "added, as (1, 1, 3), (1, 1, 4): input_shape excludes the batch dimension (did you mean "
                       "input_shape=[(3,), (4,)]?)"),
])
def test_generated_shapes(input_shape, advice):
    assert forward_advice("size mismatch", input_shape) == "size mismatch" + advice


def test_dtypes_and_devices_name_where_they_come_from():
    message = "expected m1 and m2 to have the same dtype, but got: double != float"
    assert forward_advice(message, (4,)).endswith("(the target's dtype and device options)")
    assert forward_advice(message, None).endswith("(the inputs the factory returns)")
    # an error of another kind gets no advice
    assert forward_advice("division by zero", (4,)) == "division by zero"


def test_a_shape_the_layers_computed_names_the_call_and_both_causes(tmp_path):
    source = ("import torch.nn as nn\n\n\ndef disagree():\n"
              "    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(32, 4))\n")
    message = _forward_error(tmp_path, source, "disagree", {"input_shape": [1, 8]})
    # (1, 8) plus the batch dimension is (1, 1, 8); Linear(8, 16) makes (1, 1, 16), which the third
    # layer, Linear(32, 4), cannot take: the input was fine for the layer that got it
    assert message == ("mat1 and mat2 shapes cannot be multiplied (1x16 and 32x4); `2` (Linear) got (1, 1, 16), "
                       "computed by the model from the generated inputs (1, 1, 8): either the model's own layers or "
                       "code disagree about this shape, or the model expects inputs of another size than "
                       "input_shape=(1, 8)")
    # a flatten whose size follows the input's: Conv2d(3, 8, 3) makes (1, 8, 26, 26) of 28 × 28, 5408
    # features where Linear(8 * 30 * 30, 10) expects a 32 × 32 input's 7200; input_shape is the cause
    lenet = ("import torch.nn as nn\n\n\ndef lenet():\n"
             "    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))\n")
    message = _forward_error(tmp_path, lenet, "lenet", {"input_shape": [3, 28, 28]})
    assert message.startswith("mat1 and mat2 shapes cannot be multiplied (1x5408 and 7200x10); `2` (Linear) got (1, 5408)")
    assert message.endswith("or the model expects inputs of another size than input_shape=(3, 28, 28)")
