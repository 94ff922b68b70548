"""Input validation and preparation (docs/report-schema.md) and value metadata (docs/report-schema.md)."""

import json
from collections import OrderedDict, namedtuple

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.recording.inputs import call_meta, first_tensor, prepare_inputs, value_meta


class Probe(nn.Module):
    """Remembers what its forward received."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.seen: list = []

    def forward(self, *args, **kwargs):
        self.seen.append((args, kwargs))
        return self.linear(torch.ones(1, 2))


# --------------------------------------------------------------------------------------------------
# bad inputs: exception type and message, in the contract's order


BAD_CALLS = [
    (dict(input_shape=(3,), mode="fast"), ValueError, "mode must be 'full' or 'structure'."),
    (dict(args=(1,), input_shape=(3,), mode="bad"), ValueError, "mode must be 'full' or 'structure'."),
    (dict(), ValueError, "Exactly one of input_shape or args/kwargs must be provided."),
    (dict(input_shape=(3,), args=(1,)), ValueError, "Exactly one of input_shape or args/kwargs must be provided."),
    (dict(input_shape=(3,), kwargs={}), ValueError, "Exactly one of input_shape or args/kwargs must be provided."),
    (dict(args=(1,), dtype=torch.float32), ValueError, "dtype and device apply only to tensors generated from input_shape"),
    (dict(kwargs={"x": 1}, device="cpu"), ValueError, "dtype and device apply only to tensors generated from input_shape"),
    (dict(args=[1]), TypeError, "args must be a tuple, got list."),
    (dict(args=torch.ones(1)), TypeError, "args must be a tuple, got Tensor."),
    (dict(kwargs=[("x", 1)]), TypeError, "kwargs must be a mapping, got list."),
    (dict(kwargs={1: 2}), TypeError, "kwargs keys must be strings."),
    (dict(input_shape=[]), TypeError, "input_shape must be a tuple or a non-empty list of tuples."),
    (dict(input_shape=[(3,), [3]]), TypeError, "input_shape must be a tuple or a non-empty list of tuples."),
    (dict(input_shape=3), TypeError, "input_shape must be a tuple or a non-empty list of tuples."),
    (dict(input_shape=(3, 2.0)), TypeError, "Every input_shape dimension must be an integer."),
    (dict(input_shape=[(3,), ("4",)]), TypeError, "Every input_shape dimension must be an integer."),
    (dict(input_shape=(3, True)), TypeError, "Every input_shape dimension must be an integer."),
    (dict(input_shape=(3, -1)), ValueError, "Every input_shape dimension must be non-negative"),
    (dict(input_shape=[(3,), (4,)], dtype=[torch.float32]), ValueError, "dtype length must match the number of input shapes."),
    # the length is checked before the element types
    (dict(input_shape=(3,), dtype=[torch.float32, "x"]), ValueError, "dtype length must match the number of input shapes."),
    (dict(input_shape=[(3,), (4,)], dtype=[torch.float32, "float32"]), TypeError, "Every dtype value must be a torch.dtype."),
    (dict(input_shape=(3,), dtype="float32"), TypeError, "dtype must be a torch.dtype or an iterable of torch.dtype"),
    (dict(input_shape=(3,), device="nowhere"), ValueError, "device 'nowhere' is not a valid torch device"),
    (dict(input_shape=(3,), device=0.5), TypeError, "device must be a str or a torch.device"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_inputs_raise_the_contract_error(call, error, message):
    model = Probe()
    before = model.training
    with pytest.raises(error) as info:
        crawl_module(model, **call)
    assert str(info.value).startswith(message)
    assert model.seen == []  # nothing ran
    assert model.training is before


def test_messages_name_the_fix():
    with pytest.raises(ValueError, match="Pass input_shape=\\(C, H, W\\)"):
        crawl_module(Probe())
    with pytest.raises(TypeError, match=r"args=\(value,\)"):
        crawl_module(Probe(), args=[1])


def test_non_module_is_rejected():
    with pytest.raises(TypeError, match="module must be a torch.nn.Module, got function"):
        crawl_module(lambda x: x, (3,))


# --------------------------------------------------------------------------------------------------
# provided values


def test_provided_values_are_forwarded_by_identity():
    model = Probe()
    tensor = torch.rand(2, 3, requires_grad=True)
    marker = object()
    report = crawl_module(model, args=(tensor, None), kwargs={"flag": marker})
    (args, kwargs), = model.seen
    assert args[0] is tensor and args[1] is None and kwargs["flag"] is marker
    assert report["inputs"] == {
        "source": "provided",
        "args": [
            {"kind": "tensor", "shape": [2, 3], "dtype": "torch.float32", "device": "cpu", "requires_grad": True},
            {"kind": "none"},
        ],
        "kwargs": {"flag": {"kind": "object", "type": "object"}},
    }


def test_kwargs_only_call_and_mapping_copy():
    model = Probe()
    source = OrderedDict(x=torch.zeros(1))
    report = crawl_module(model, kwargs=source)
    (args, kwargs), = model.seen
    assert args == () and kwargs["x"] is source["x"] and kwargs is not source
    assert report["inputs"]["args"] == [] and list(report["inputs"]["kwargs"]) == ["x"]


def test_args_only_call_defaults_kwargs():
    prepared = prepare_inputs(Probe(), args=(1,))
    assert prepared.args == (1,) and prepared.kwargs == {}


# --------------------------------------------------------------------------------------------------
# generated values


def test_generated_tensor_shape_dtype_and_values():
    prepared = prepare_inputs(nn.Linear(3, 2), (3,))
    (x,) = prepared.args
    assert x.shape == (1, 3) and x.dtype == torch.float32 and not x.requires_grad
    assert bool(((x >= 0) & (x < 1)).all())
    assert prepared.meta == {
        "source": "generated",
        "args": [{"kind": "tensor", "shape": [1, 3], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}],
        "kwargs": {},
    }


def test_several_shapes_and_dtypes():
    prepared = prepare_inputs(nn.Identity(), [(2,), (3, 4), (1,)], [torch.int64, torch.bool, torch.complex64])
    ints, flags, complex_values = prepared.args
    assert ints.dtype == torch.int64 and ints.shape == (1, 2) and int(ints.abs().sum()) == 0
    assert flags.dtype == torch.bool and flags.shape == (1, 3, 4) and bool(flags.all())
    assert complex_values.dtype == torch.complex64


def test_dtype_applies_to_every_shape():
    prepared = prepare_inputs(nn.Identity(), [(2,), (3,)], torch.float64)
    assert [t.dtype for t in prepared.args] == [torch.float64, torch.float64]


def test_default_dtype_and_device_come_from_the_first_parameter():
    model = nn.Linear(3, 2).to(torch.float64)
    (x,) = prepare_inputs(model, (3,)).args
    assert x.dtype == torch.float64


def test_default_dtype_from_the_first_buffer_then_float32():
    class Buffered(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.ones(1, dtype=torch.bfloat16))

    (x,) = prepare_inputs(Buffered(), (2,)).args
    assert x.dtype == torch.bfloat16
    (y,) = prepare_inputs(nn.ReLU(), (2,)).args
    assert y.dtype == torch.float32 and y.device.type == "cpu"


def test_explicit_device_and_meta_device():
    (x,) = prepare_inputs(nn.ReLU(), (2, 2), device=torch.device("cpu")).args
    assert x.device.type == "cpu"
    (m,) = prepare_inputs(nn.ReLU(), (2, 2), device="meta").args
    assert m.device.type == "meta" and m.shape == (1, 2, 2)


def test_never_synthesises_another_dtype_than_asked():
    for dtype in (torch.bfloat16, torch.float16, torch.int32, torch.uint8):
        (x,) = prepare_inputs(nn.Identity(), (4,), dtype).args
        assert x.dtype == dtype


# --------------------------------------------------------------------------------------------------
# value metadata


def test_scalar_and_none_metadata_never_store_values():
    secret = "/private/home/me/weights.pt"
    metas = [value_meta(v) for v in (True, 3, 2.5, 1j, secret, b"bytes", None)]
    assert metas == [
        {"kind": "scalar", "type": "bool"},
        {"kind": "scalar", "type": "int"},
        {"kind": "scalar", "type": "float"},
        {"kind": "scalar", "type": "complex"},
        {"kind": "scalar", "type": "str"},
        {"kind": "scalar", "type": "bytes"},
        {"kind": "none"},
    ]
    assert "private" not in json.dumps(metas)


def test_containers_named_tuples_and_objects():
    Pair = namedtuple("Pair", "a b")

    class Thing:
        pass

    meta = value_meta([Pair(torch.zeros(2), None), (1,), Thing()])
    assert meta == {
        "kind": "list",
        "items": [
            {
                "kind": "tuple",
                "items": [
                    {"kind": "tensor", "shape": [2], "dtype": "torch.float32", "device": "cpu", "requires_grad": False},
                    {"kind": "none"},
                ],
            },
            {"kind": "tuple", "items": [{"kind": "scalar", "type": "int"}]},
            {"kind": "object", "type": "test_containers_named_tuples_and_objects.<locals>.Thing"},
        ],
    }


def test_mapping_keys_that_could_leak_are_omitted():
    meta = value_meta(OrderedDict([("mask", None), ("/private/model.pt", 1), (3, 2.0), (True, "x"), ("not valid", 0)]))
    assert meta == {
        "kind": "mapping",
        "type": "OrderedDict",
        "items": [
            {"key": "mask", "key_type": "str", "value": {"kind": "none"}},
            {"key_type": "str", "value": {"kind": "scalar", "type": "int"}},
            {"key": 3, "key_type": "int", "value": {"kind": "scalar", "type": "float"}},
            {"key": True, "key_type": "bool", "value": {"kind": "scalar", "type": "str"}},
            {"key_type": "str", "value": {"kind": "scalar", "type": "int"}},
        ],
    }
    assert "private" not in json.dumps(meta)


def test_meta_tensor_and_bfloat16_metadata():
    assert value_meta(torch.empty(2, 3, device="meta", dtype=torch.bfloat16)) == {
        "kind": "tensor",
        "shape": [2, 3],
        "dtype": "torch.bfloat16",
        "device": "meta",
        "requires_grad": False,
    }


def test_cycles_do_not_recurse_forever():
    items: list = [1]
    items.append(items)
    meta = value_meta(items)
    assert meta["items"][1] == {"kind": "object", "type": "list"}


def test_call_meta_and_first_tensor():
    x, y = torch.zeros(1), torch.ones(2)
    assert call_meta((x,), {"mask": None})["kwargs"] == {"mask": {"kind": "none"}}
    assert first_tensor((None, [{"a": None, "b": y}], x)) is y
    assert first_tensor({"z": (None,)}) is None
    assert first_tensor(x) is x
