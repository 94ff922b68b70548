"""The CUDA caching allocator's rules (``c10/cuda/CUDACachingAllocator.cpp``), applied by hand."""

from __future__ import annotations

from torchscan_lsp.engine.training.cuda import CudaLiveBlocks, cuda_block_bytes

MIB = 1 << 20


def test_block_rounding():
    # kMinBlockSize = 512: every request is rounded up to a multiple of 512 bytes
    assert [cuda_block_bytes(size) for size in (0, 1, 4, 512, 513, 1000, 1024)] == [0, 512, 512, 512, 1024, 1024, 1024]


def test_segments_and_peak():
    blocks = CudaLiveBlocks()
    blocks.add(100)  # 512 bytes in the small pool: one 2 MiB segment (kSmallBuffer)
    blocks.add(3 * MIB)  # between 1 and 10 MiB: a 20 MiB segment (kLargeBuffer)
    blocks.add(12 * MIB + 1)  # over 10 MiB: its own segment, 12 MiB + 512 rounded up to 2 MiB: 14 MiB
    blocks.update_peak()
    assert blocks.allocated == 512 + 3 * MIB + 12 * MIB + 512
    assert blocks.reserved_if_packed() == 2 * MIB + 20 * MIB + 14 * MIB
    blocks.remove(12 * MIB + 1)
    blocks.resize(100, 2000)  # 512 -> 2048 bytes
    blocks.update_peak()
    report = blocks.report()
    # the peak stays the first moment's: 3 blocks, 15 MiB + 1 KiB allocated, 36 MiB of segments
    assert (report["allocated_peak_bytes"], report["reserved_if_packed_bytes"], report["blocks_at_peak"]) == (
        15 * MIB + 1024, 36 * MIB, 3)
    assert blocks.allocated == 2048 + 3 * MIB and blocks.blocks == 2
    assert report["derived"] is True and "not measured on a GPU" in report["note"]
