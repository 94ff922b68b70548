"""The roofline arithmetic (engine/reporting/roofline) against numbers worked out by hand here:
each layer's FLOPs and bytes from its shapes, the device's figures from its datasheet (H100 SXM:
67 TFLOP/s float32, 3.35 TB/s), and the formulas of docs/measurement.md ("Roofline")."""

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.reporting.roofline import measured_ceilings, roofline_report, table_ceilings
from torchscan_lsp.engine.reporting.roofline.layers import tensor_bytes

PEAK, BANDWIDTH = 67e12, 3.35e12  # H100 SXM datasheet: FP32 67 TFLOPS, 3.35 TB/s


@pytest.fixture(scope="module")
def conv_net():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
    return crawl_module(model, (3, 32, 32))


def by_path(roofline):
    return {record["path"]: record for record in roofline["layers"]}


def test_each_layer_from_its_shapes(conv_net):
    roofline = roofline_report(conv_net, table_ceilings("H100-SXM", "float32"))
    layers = by_path(roofline)
    assert list(layers) == ["0", "1", "2", "3"]  # the leaves; the Sequential is a container

    conv = layers["0"]
    flops = 2 * (8 * 30 * 30) * (3 * 3 * 3)            # 2 · outputs · (Cin · K): 388,800
    io = (3 * 32 * 32 + 8 * 27 + 8 + 8 * 30 * 30) * 4  # input, weight + bias, output: 41,984 B
    dmas = (3 * 9 * 8 * 30 * 30 + 224 + 7200) * 4      # each output reads its 27-element window: 807,296 B
    assert (conv["flops"]["value"], conv["io_bytes"], conv["dma_bytes"], conv["bytes"]) == (flops, io, dmas, io)
    assert conv["intensity"] == pytest.approx(flops / io)            # 9.26 FLOPs/B
    assert conv["dma_intensity"] == pytest.approx(flops / dmas)      # 0.48 FLOPs/B
    assert conv["compute_time"] == pytest.approx(flops / PEAK)       # 5.80 ns
    assert conv["memory_time"] == pytest.approx(io / BANDWIDTH)      # 12.5 ns
    assert conv["roofline_time"]["value"] == pytest.approx(io / BANDWIDTH)
    assert (conv["bound"], conv["roofline_time"]["status"]) == ("memory", "complete")

    relu = layers["1"]
    assert relu["bytes"] == (7200 + 7200) * 4  # read and write each element: its DMAs are its I/O
    flatten = layers["2"]
    assert (flatten["bytes"], flatten["bound"], flatten["roofline_time"]["value"]) == (0, None, 0.0)  # a view
    linear = layers["3"]
    weights = (7200 * 10 + 10) * 4
    assert linear["bytes"] == 7200 * 4 + weights + 10 * 4
    assert linear["flops"]["value"] == 2 * 7200 * 10  # PyTorch's addmm formula: 2·M·N·K, the bias apart


def test_the_forward_sums_its_layers_and_bounds_one_pass(conv_net):
    roofline = roofline_report(conv_net, table_ceilings("H100-SXM", "float32"))
    forward = roofline["forward"]
    moved = 41984 + 57600 + 0 + (28800 + 288040 + 40)
    assert forward["roofline_time"]["value"] == pytest.approx(moved / BANDWIDTH)  # every layer memory-bound
    assert (forward["memory_bound_layers"], forward["compute_bound_layers"], forward["bound"]) == (3, 0, "memory")
    flops = 388800 + 7200 + 144000
    model_io = 3072 * 4 + (224 + 72010) * 4 + 10 * 4  # input, parameters, output
    assert forward["single_pass_time"] == pytest.approx(max(flops / PEAK, model_io / BANDWIDTH))
    assert [entry["path"] for entry in forward["top"][:2]] == ["3", "1"]
    assert roofline["diagnostics"] == []  # no container did work of its own


def test_a_container_s_own_work_makes_the_forward_a_lower_bound():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return x + self.fc(x)  # the addition runs in the container's own forward

    report = crawl_module(Residual(), (4, 16))
    roofline = roofline_report(report, table_ceilings("H100-SXM", "float32"))
    total = roofline["forward"]["roofline_time"]
    fc = (4 * 16 + 16 * 16 + 16 + 4 * 16) * 4 / BANDWIDTH
    added = (4 * 16) / PEAK  # one FLOP per output element, bytes unknown
    assert total["status"] == "partial"
    assert total["known_value"] == pytest.approx(fc + added)
    assert [d["code"] for d in roofline["diagnostics"]] == ["roofline_container_work"]


def test_an_embedding_reads_its_rows_and_a_tied_head_its_weight():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 16)
            self.head = nn.Linear(16, 100, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            return self.head(self.emb(idx))

    report = crawl_module(Tied(), args=(torch.randint(0, 100, (1, 8)),))
    layers = by_path(roofline_report(report, table_ceilings("H100-SXM", "float32")))
    emb = layers["emb"]
    # its DMAs: 8 indices, 8 rows of 16 read, 8 × 16 written, at 4 bytes; its I/O would hold the whole table
    assert emb["dma_bytes"] == (8 + 8 * 16 + 8 * 16) * 4
    assert emb["io_bytes"] == 8 * 8 + 100 * 16 * 4 + 8 * 16 * 4
    assert emb["bytes"] == emb["dma_bytes"]
    # the head's weight is counted at the embedding, but the head reads it all the same
    assert layers["head"]["io_bytes"] == 8 * 16 * 4 + 1600 * 4 + 8 * 100 * 4


def test_inputs_of_one_shape_and_dtype_count_once():
    x = {"kind": "tensor", "shape": [2, 8, 16], "dtype": "torch.float32"}
    mask = {"kind": "tensor", "shape": [8, 8], "dtype": "torch.bool"}
    call = {"args": [x, x, x], "kwargs": {"attn_mask": mask}}
    assert tensor_bytes(call) == 3 * 256 * 4 + 64
    assert tensor_bytes(call, once_per_shape=True) == 256 * 4 + 64


def _timed(path, seconds):
    latency = {"status": "complete", "value": seconds, "known_value": seconds, "unit": "seconds",
               "scope": "module_call", "method": "torch.utils.benchmark.Timer"}
    return {"path": path, "call_index": 0, "metrics": {"latency": latency}, "stable": True}


MACHINE = {"schema_version": 1, "kind": "ceilings", "device": "cpu", "device_name": "a CPU", "dtype": "float32",
           "threads": 2, "last_level_cache": {"bytes": 32 << 20, "source": "test"},
           "peak_flops": {"status": "complete", "value": 1e11, "known_value": 1e11, "unit": "FLOP/s", "scope": "device",
                          "method": "m", "median": 8e10, "q1": 7e10, "q3": 9e10, "blocks": 20},
           "bandwidth": {"status": "complete", "value": 1e10, "known_value": 1e10, "unit": "bytes/s", "scope": "device",
                         "method": "m", "median": 9e9, "q1": 8e9, "q3": 9.5e9, "blocks": 20, "pattern": "copy"}}


def test_measured_layers_against_this_machine(conv_net):
    ceilings = measured_ceilings(MACHINE)
    assert ceilings["ridge_point"] == pytest.approx(1e11 / 1e10)
    layer_latency = {"device": "cpu", "layers": [
        _timed("0", 100e-6),   # roofline: max(388,800 / 1e11 = 3.89 µs, 41,984 / 1e10 = 4.20 µs) = 4.20 µs
        _timed("1", 2e-6),     # memory term 57,600 / 1e10 = 5.76 µs: faster, so from cache
        _timed("2", 1e-6),     # a view: roofline 0, no fraction
        _timed("3", 20e-6),    # memory term 31.7 µs, compute 1.44 µs: faster than memory, from cache
    ]}
    layers = by_path(roofline_report(conv_net, ceilings, layer_latency=layer_latency))
    conv = layers["0"]["measured"]
    assert conv["fraction_of_roofline"] == pytest.approx((41984 / 1e10) / 100e-6)  # 4.2 %
    assert conv["achieved_flops"] == pytest.approx(388800 / 100e-6)
    assert (conv["cache_resident"], conv["above_compute_peak"]) == (False, False)
    relu = layers["1"]["measured"]
    assert (relu["cache_resident"], relu["fraction_of_roofline"]) == (True, None)  # never above 100 %
    assert layers["2"]["measured"]["fraction_of_roofline"] is None
    assert layers["3"]["measured"]["cache_resident"] is True
    assert layers["3"]["exceeds_cache"] is False  # 316,880 B of 32 MiB


def test_a_call_faster_than_the_compute_peak_is_a_warning(conv_net):
    layer_latency = {"device": "cpu", "layers": [_timed("0", 1e-6)]}  # compute term alone is 3.89 µs
    roofline = roofline_report(conv_net, measured_ceilings(MACHINE), layer_latency=layer_latency)
    assert by_path(roofline)["0"]["measured"]["above_compute_peak"] is True
    assert [d["code"] for d in roofline["diagnostics"]] == ["roofline_above_compute_peak"]


def test_a_table_device_is_not_compared_with_a_latency_measured_here(conv_net):
    layer_latency = {"device": "cpu", "layers": [_timed("0", 100e-6)]}
    roofline = roofline_report(conv_net, table_ceilings("H100-SXM", "float32"), layer_latency=layer_latency)
    assert roofline["measured"]["layers"] is False
    assert "H100-SXM's roofline says how fast they could run on a H100-SXM" in roofline["measured"]["reason"]
    assert all(record["measured"] is None for record in roofline["layers"])


def test_a_dtype_the_table_has_no_rate_for_holds_the_bytes_alone(conv_net):
    ceilings = table_ceilings("T4", "bfloat16")  # Turing: no BF16 in its datasheet
    assert ceilings["peak_flops"]["status"] == "unavailable"
    roofline = roofline_report(conv_net, ceilings)
    conv = by_path(roofline)["0"]
    assert conv["compute_time"] is None
    assert conv["roofline_time"] == {**conv["roofline_time"], "status": "partial", "known_value": pytest.approx(41984 / 320e9)}
    assert "roofline_no_peak" in [d["code"] for d in roofline["diagnostics"]]


def test_an_unknown_device_names_the_option_and_the_closest():
    with pytest.raises(ValueError, match=r"^roofline: unknown device 'A100-8GB' \(did you mean 'A100-80GB'\?\)"):
        table_ceilings("A100-8GB", "float32")


def test_an_in_place_call_on_a_tensor_the_size_of_the_cache_fits_it():
    # (8, 4, 512, 512) float32 = 32 MiB, the last-level cache of MACHINE: an in-place ReLU reads and
    # writes it (64 MiB of I/O, the roofline's bytes) but touches 32 MiB, which fits; a BatchNorm on it
    # writes a new 32 MiB output: at least 32 MiB and its 2 × 4 × 4 B of weights, which does not
    x = torch.zeros(8, 4, 512, 512)
    model = nn.Sequential(nn.BatchNorm2d(4), nn.ReLU(inplace=True))
    layers = {r["path"]: r for r in roofline_report(crawl_module(model, args=(x,)), measured_ceilings(MACHINE))["layers"]}
    assert layers["1"]["io_bytes"] == 2 * (32 << 20) and layers["1"]["exceeds_cache"] is False
    assert layers["0"]["exceeds_cache"] is True
