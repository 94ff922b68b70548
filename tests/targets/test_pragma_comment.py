"""A comment after a pragma's options is a comment (``# torchscan: input_shape=(16,)  # the
mlp``), not part of the options: the parenthesis it would otherwise swallow is not "never
closed"; a ``#`` inside a string option stays in the string."""

from __future__ import annotations

from torchscan_lsp.targets import find_targets


def _scan(pragma: str):
    return find_targets(f"import torch.nn as nn\n\n\n{pragma}\ndef build():\n    return nn.ReLU()\n")


def test_a_comment_after_the_options_is_left_out():
    scan = _scan("# torchscan: input_shape=(16,)  # the mlp")
    assert scan.problems == []
    (target,) = scan.targets
    assert target.options == {"input_shape": (16,)}


def test_a_hash_inside_a_string_is_the_string_s():
    # the device is refused, whole: the option read was 'cpu#1', not 'cpu
    (problem,) = _scan("# torchscan: input_shape=(3,), device='cpu#1'  # on the laptop").problems
    assert "'cpu#1'" in problem.message


def test_options_that_do_not_parse_still_say_so():
    (problem,) = _scan("# torchscan: input_shape=(16,").problems
    assert "cannot read the pragma's options" in problem.message
