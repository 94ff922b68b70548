"""``train={...}`` options and byte sizes: defaults, validation, and errors that name the option."""

from __future__ import annotations

import pytest

from torchscan_lsp.engine.training import parse_bytes, parse_train_options


def test_defaults_are_adamw_with_pytorch_defaults():
    options = parse_train_options(None)
    assert (options.optimizer, options.optimizer_options, options.batch, options.dtype, options.autocast) == (
        "adamw", {}, None, None, None)
    assert options.foreach is None  # PyTorch's default for the device
    assert parse_train_options({}) == options


def test_optimizer_options_keep_their_torch_names():
    options = parse_train_options({"optimizer": "SGD", "lr": 0.1, "momentum": 0.9, "nesterov": True, "batch": 32,
                                   "dtype": "torch.bfloat16", "foreach": False})
    assert options.optimizer == "sgd"
    assert options.optimizer_options == {"lr": 0.1, "momentum": 0.9, "nesterov": True, "foreach": False}
    assert (options.batch, options.dtype) == (32, "bfloat16")
    assert parse_train_options({"betas": [0.9, 0.95], "autocast": "half"}).optimizer_options["betas"] == (0.9, 0.95)
    assert parse_train_options({"autocast": "half"}).autocast == "float16"
    assert parse_train_options({"optimizer": "adam"}).as_dict()["optimizer"] == "adam"


@pytest.mark.parametrize(
    ("train", "error", "named"),
    [
        ({"optimiser": "sgd"}, ValueError, "did you mean 'optimizer'"),
        ({"optimizer": "lamb"}, ValueError, "'optimizer'"),
        ({"optimizer": 3}, TypeError, "'optimizer'"),
        ({"momentum": 0.9}, ValueError, "'momentum' does not apply to optimizer 'adamw'"),
        ({"optimizer": "sgd", "betas": (0.9, 0.99)}, ValueError, "'betas' does not apply to optimizer 'sgd'"),
        ({"batch": 0}, ValueError, "'batch'"),
        ({"batch": 2.5}, TypeError, "'batch'"),
        ({"batch": True}, TypeError, "'batch'"),
        ({"dtype": "int64"}, ValueError, "'dtype'"),
        ({"autocast": "float32"}, ValueError, "'autocast'"),
        ({"lr": -1}, ValueError, "'lr'"),
        ({"lr": 0}, ValueError, "'lr'"),
        ({"lr": "1e-3"}, TypeError, "'lr'"),
        ({"betas": (0.9, 1.0)}, ValueError, "'betas'"),
        ({"betas": 0.9}, TypeError, "'betas'"),
        ({"foreach": "yes"}, TypeError, "'foreach'"),
        ({"optimizer": "sgd", "nesterov": True}, ValueError, "'nesterov'"),
    ],
)
def test_bad_options_name_the_option(train, error, named):
    with pytest.raises(error, match=named.replace("(", r"\(")):
        parse_train_options(train)


def test_train_must_be_a_mapping():
    with pytest.raises(TypeError, match="train must be a mapping"):
        parse_train_options(["adamw"])


def test_byte_sizes():
    # binary units are powers of 1024, decimal ones powers of 1000 (GPU vendors' "80 GB")
    assert parse_bytes("24 GiB") == 24 * 1024**3
    assert parse_bytes("80GB") == 80 * 10**9
    assert parse_bytes("512 MiB") == 512 * 1024**2
    assert parse_bytes("1.5 KiB") == 1536
    assert parse_bytes(3 * 2**30) == 3 * 2**30  # a byte count
    for small in (80, "80", 4096):  # a size without its unit: "80" is never 80 bytes
        with pytest.raises(ValueError) as raised:
            parse_bytes(small, name="train_memory")
        count = int(small)
        assert str(raised.value) == (f"train_memory: {count} has no unit, so it would be {count} bytes; write a size "
                                     f"such as \"{count} GB\" or \"{count} GiB\" (a byte count without a unit is "
                                     "at least 1 MiB).")
    for bad, error in (("lots", ValueError), ("-1 GiB", ValueError), (0, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="memory_budget"):
            parse_bytes(bad, name="memory_budget")
