"""Module conversions inside a factory run on fake tensors: ``model.to(torch.bfloat16)``,
``.double()``, ``.half()``, ``.to("cpu")``.

PyTorch 2.13's ``Module._apply`` converts a fake parameter by swapping it with its converted copy
(``torch.utils.swap_tensors``, forced for every ``FakeTensor``), and ``swap_tensors`` refuses a
tensor that has a weak reference. The fake mode's converter memoises the fake tensors it makes in a
``WeakValueDictionary`` (``Parameter.__new__`` detaches through it), so the swap fails:
``RuntimeError: _apply(): Couldn't swap Linear.weight`` (pytorch/pytorch#148977, #185595). Every
factory that builds its model in another dtype than float32 would then have no estimate.

:func:`swappable_fake_tensors` lets those swaps through: while it is active, a swap of fake tensors
first drops them from the mode's memo. The memo is a cache of conversions (dropping an entry only
means a later conversion of the same tensor makes a new fake tensor), and a swap keeps each tensor's
identity, so a tied embedding and head stay one parameter, as in an eager ``Module.to``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

__all__ = ["swappable_fake_tensors"]


@contextlib.contextmanager
def swappable_fake_tensors(mode: FakeTensorMode) -> Iterator[None]:
    """Within the block, ``torch.utils.swap_tensors`` of ``mode``'s fake tensors succeeds (see the
    module docstring); the original function is back afterwards, also on error."""
    original = torch.utils.swap_tensors
    memo = mode.fake_tensor_converter.tensor_memo

    def swap_tensors(t1: torch.Tensor, t2: torch.Tensor) -> None:
        swapped = {id(t) for t in (t1, t2) if isinstance(t, FakeTensor)}
        if swapped:
            for key in [key for key, tensor in memo.items() if id(tensor) in swapped]:
                del memo[key]
        return original(t1, t2)

    torch.utils.swap_tensors = swap_tensors
    try:
        yield
    finally:
        torch.utils.swap_tensors = original
