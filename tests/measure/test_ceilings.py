"""This machine's ceilings (engine/measuring/ceilings.py): the cache size they are sized from, the
rates of timed blocks, the kept file, and two real measurements that agree within their spread.
The CUDA path is checked with what runs without a GPU: the device check and the L2 size it reads."""

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import torch

from torchscan_lsp.engine.measuring import ceilings as module
from torchscan_lsp.engine.measuring.ceilings import (
    MIN_BUFFER_BYTES,
    block_rates,
    buffer_bytes,
    ceilings_agree,
    chunk_bytes,
    last_level_cache,
    measure_ceilings,
)

MiB = 1 << 20


def test_the_last_level_cache_is_what_lscpu_says():
    lscpu = shutil.which("lscpu")
    if lscpu is None:
        pytest.skip("lscpu is not installed")
    levels = {}
    for line in subprocess.run([lscpu, "-B"], capture_output=True, text=True, check=True).stdout.splitlines():
        name, _, value = line.partition(":")
        if name.strip().startswith("L") and name.strip().endswith("cache") and "i cache" not in name:
            levels[int(name.strip()[1])] = int(value.split()[0])
    size, source = last_level_cache("cpu")
    assert size == levels[max(levels)], source


def test_sysfs_cache_entries_pick_the_highest_data_level(tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "512K"),
                                                 (3, "Unified", "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    assert module._sysfs_cache(tmp_path) == (32768 * 1024, str(tmp_path / "index3" / "size"))


def test_buffers_are_far_larger_than_the_cache_and_stream_in_chunks():
    assert buffer_bytes(32 * MiB) == 8 * 32 * MiB == 256 * MiB
    assert buffer_bytes(96 * MiB) == 768 * MiB
    assert buffer_bytes(None) == buffer_bytes(1 * MiB) == MIN_BUFFER_BYTES == 256 * MiB
    assert chunk_bytes(32 * MiB, 256 * MiB) == 16 * MiB        # half the cache: 16 chunks in turn
    assert chunk_bytes(None, 256 * MiB) == 8 * MiB              # unknown cache: 8 MiB
    assert chunk_bytes(96 * MiB, 768 * MiB) == 48 * MiB         # at most 1/16 of the buffer
    assert chunk_bytes(512 * 1024, 256 * MiB) == 1 * MiB        # never below 1 MiB


def test_block_rates():
    # five blocks of two calls, each call doing 1e9 units: rates 2e9 / duration
    rates = block_rates([0.2, 0.1, 0.4, 0.25, 0.5], 2, 1e9)
    # sorted rates 4e9, 5e9, 8e9, 1e10, 2e10; inclusive quartiles of five values are the 2nd and 4th
    assert rates == {"value": 2e10, "low": 4e9, "median": 8e9, "q1": 5e9, "q3": 1e10, "blocks": 5}


def test_two_ceilings_agree_when_their_spreads_overlap():
    first = {"value": 10.0, "low": 6.0}
    assert ceilings_agree(first, {"value": 7.0, "low": 5.0})
    assert ceilings_agree(first, {"value": 12.0, "low": 9.0})
    assert not ceilings_agree(first, {"value": 5.5, "low": 4.0})   # its best below every block of the other
    assert not ceilings_agree(first, {"value": 20.0, "low": 11.0})


def test_refused_devices_and_dtypes():
    with pytest.raises(ValueError, match="meta device holds no data"):
        measure_ceilings("meta")
    with pytest.raises(ValueError, match="dtype must be a floating torch.dtype"):
        measure_ceilings("cpu", torch.int64)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA device 'cuda' is unavailable"):
            measure_ceilings("cuda")


def test_a_gpu_s_cache_is_its_l2(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(L2_cache_size=50 * MiB))
    assert last_level_cache("cuda:0") == (50 * MiB, "torch.cuda.get_device_properties().L2_cache_size")
    assert buffer_bytes(50 * MiB) == 400 * MiB
    assert module.MATMUL_SIDE["cuda"] == 8192


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ceilings")
    first = measure_ceilings("cpu", torch.float32, cache_dir=folder, min_run_time=0.3)
    kept = measure_ceilings("cpu", torch.float32, cache_dir=folder, min_run_time=0.3)
    second = measure_ceilings("cpu", torch.float32, cache_dir=None, min_run_time=0.3)
    return folder, first, kept, second


def test_a_measurement_is_kept_and_read_back(measured):
    folder, first, kept, _ = measured
    (path,) = folder.glob("*.json")
    assert json.loads(path.read_text())["peak_flops"] == first["peak_flops"]
    assert (first["cached"], kept["cached"]) == (False, True)
    assert kept["peak_flops"] == first["peak_flops"] and kept["bandwidth"] == first["bandwidth"]


def test_what_was_measured(measured):
    _, first, _, _ = measured
    assert (first["device"], first["dtype"], first["threads"]) == ("cpu", "float32", torch.get_num_threads())
    flops, bandwidth = first["peak_flops"], first["bandwidth"]
    assert flops["unit"] == "FLOP/s" and bandwidth["unit"] == "bytes/s"
    for ceiling in (flops, bandwidth):
        assert ceiling["blocks"] >= 5
        assert ceiling["low"] <= ceiling["q1"] <= ceiling["median"] <= ceiling["q3"] <= ceiling["value"]
    cache = first["last_level_cache"]["bytes"]
    assert bandwidth["buffer_bytes"] >= 8 * (cache or 0) and bandwidth["buffer_bytes"] >= 256 * MiB
    assert bandwidth["pattern"] in ("copy", "read")
    assert bandwidth["value"] == max(p["value"] for p in bandwidth["patterns"].values())


def test_the_ceilings_are_within_the_spread_of_a_second_measurement(measured):
    _, first, _, second = measured
    for name in ("peak_flops", "bandwidth"):
        assert ceilings_agree(first[name], second[name]), (name, first[name], second[name])


def test_measuring_again_keeps_the_higher_rate(tmp_path):
    kept = measure_ceilings("cpu", torch.float32, cache_dir=tmp_path, min_run_time=0.1)
    (path,) = tmp_path.glob("*.json")
    data = json.loads(path.read_text())
    data["peak_flops"]["value"] = data["peak_flops"]["known_value"] = 1e18  # a rate no CPU reaches
    path.write_text(json.dumps(data))
    again = measure_ceilings("cpu", torch.float32, cache_dir=tmp_path, refresh=True, min_run_time=0.1)
    assert again["cached"] is False
    assert again["peak_flops"]["value"] == 1e18                      # the kept one was higher
    assert again["bandwidth"]["value"] >= kept["bandwidth"]["value"]  # the higher of the two
