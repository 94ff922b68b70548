"""What PyTorch's CUDA caching allocator adds to a step's tensor bytes, derived from its rules.

The estimate runs on CPU fake tensors (the CPU build of PyTorch cannot fake CUDA tensors), so the
CUDA side is *derived*, never measured: every figure below follows from the allocator's constants in
``c10/cuda/CUDACachingAllocator.cpp`` (default settings, no ``PYTORCH_CUDA_ALLOC_CONF``):

* **Block rounding** (``kMinBlockSize``): every allocation is rounded up to a multiple of 512 bytes
  (a 4-byte scalar holds 512). ``allocated`` -- what ``torch.cuda.max_memory_allocated`` reports --
  is the sum of the rounded blocks.
* **Segments**: blocks live in segments reserved from the driver (``memory_reserved``). Requests of
  at most 1 MiB (``kSmallSize``) share 2 MiB segments (``kSmallBuffer``); requests under 10 MiB
  (``kMinLargeAlloc``) share 20 MiB segments (``kLargeBuffer``); larger ones get a segment of their
  own, rounded up to 2 MiB (``kRoundLarge``).
* **Reserved vs allocated**: freed blocks stay cached in their segments, so reserved memory is at
  least the segments the live blocks fill. :class:`CudaLiveBlocks` reports that floor as
  ``reserved_if_packed_bytes``: the live blocks packed with no fragmentation. A real run usually
  reserves more (blocks freed earlier leave holes; segments are returned to the driver only by
  ``empty_cache``).
* **Not PyTorch's to count**: the CUDA context, cuBLAS/cuDNN workspaces and the driver's own memory
  (typically a few hundred MiB per process) are outside the allocator and outside every figure here.
"""

from __future__ import annotations

__all__ = ["BLOCK_BYTES", "CudaLiveBlocks", "cuda_block_bytes"]

BLOCK_BYTES = 512
SMALL_REQUEST = 1 << 20  # kSmallSize: 1 MiB
SMALL_SEGMENT = 2 << 20  # kSmallBuffer: 2 MiB
MEDIUM_REQUEST = 10 << 20  # kMinLargeAlloc: 10 MiB
MEDIUM_SEGMENT = 20 << 20  # kLargeBuffer: 20 MiB
LARGE_ROUNDING = 2 << 20  # kRoundLarge: 2 MiB


def cuda_block_bytes(size: int) -> int:
    """The block the CUDA caching allocator hands out for ``size`` bytes: ``512 * ceil(size / 512)``
    (0 for an empty storage, which allocates nothing)."""
    return -(-size // BLOCK_BYTES) * BLOCK_BYTES if size > 0 else 0


def _ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit


class CudaLiveBlocks:
    """Running totals of the live storages as CUDA blocks, and their peak.

    ``add``/``remove``/``resize`` follow every storage the tracker sees; ``update_peak`` records the
    peak of the allocated total, with the packed segments and the number of blocks at that moment.
    """

    def __init__(self) -> None:
        self.allocated = 0
        self.blocks = 0
        self._small = 0  # bytes of blocks in the small pool
        self._medium = 0  # bytes of blocks that share 20 MiB segments
        self._large = 0  # bytes of the own segments of large blocks
        self.peak_allocated = 0
        self.peak_reserved_if_packed = 0
        self.peak_blocks = 0

    def _account(self, size: int, sign: int) -> None:
        block = cuda_block_bytes(size)
        if block == 0:
            return
        self.allocated += sign * block
        self.blocks += sign
        # the allocator picks the pool and the segment from the rounded size (``get_allocation_size``)
        if block <= SMALL_REQUEST:
            self._small += sign * block
        elif block < MEDIUM_REQUEST:
            self._medium += sign * block
        else:
            self._large += sign * _ceil_to(block, LARGE_ROUNDING)

    def add(self, size: int) -> None:
        """A storage of ``size`` bytes became live."""
        self._account(size, 1)

    def remove(self, size: int) -> None:
        """A storage of ``size`` bytes was freed."""
        self._account(size, -1)

    def resize(self, old: int, new: int) -> None:
        """A storage changed size (``UntypedStorage.resize_``)."""
        self._account(old, -1)
        self._account(new, 1)

    def reserved_if_packed(self) -> int:
        """The segments the live blocks fill, packed with no fragmentation."""
        return _ceil_to(self._small, SMALL_SEGMENT) + _ceil_to(self._medium, MEDIUM_SEGMENT) + self._large

    def update_peak(self) -> None:
        """Record the current totals if the allocated total is a new peak."""
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
            self.peak_reserved_if_packed = self.reserved_if_packed()
            self.peak_blocks = self.blocks

    def report(self) -> dict[str, object]:
        """The derived CUDA figures at the allocated peak (JSON-safe)."""
        return {
            "derived": True,
            "allocated_peak_bytes": self.peak_allocated,
            "reserved_if_packed_bytes": self.peak_reserved_if_packed,
            "blocks_at_peak": self.peak_blocks,
            "block_bytes": BLOCK_BYTES,
            "note": (
                "derived from the CUDA caching allocator's rules on CPU fake tensors, not measured on a GPU: "
                "blocks rounded up to 512 bytes; blocks up to 1 MiB in 2 MiB segments, up to 10 MiB in 20 MiB "
                "segments, larger ones in their own segments rounded to 2 MiB; the CUDA context and library "
                "workspaces are not included"
            ),
        }
