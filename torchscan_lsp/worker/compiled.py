"""Models compiled with ``torch.compile``: the analysis's own code stays out of what Dynamo traces.

The engine's global module hooks, its observers (the source attribution walks the stack with
``sys._getframe``) and the measurements run inside the model's forward. Dynamo would trace them as
part of the compiled region, and warn about code that is ours, not the user's: ``sys._getframe``,
an ``lru_cache`` in ``worker/sites.py``, ``os.lstat``. Listing this package's folder among the
folders Dynamo skips (``torch._dynamo.trace_rules.SKIP_DIRS``, as PyTorch lists its own tooling
there) makes Dynamo run our functions eagerly, as it runs any skipped function: the user's forward
is still compiled, and the hooks see the real frames and tensors. PyTorch's warning that global
hooks fire once more for the ``OptimizedModule`` wrapper concerns our hooks too, and is silenced:
the wrapper is a layer of its own in the report.

Nothing happens for a model that is not compiled: Dynamo is only touched when the user's code has
imported it already (importing it takes seconds).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator

from torchscan_lsp.worker.workspace import PACKAGE_DIR

__all__ = ["hidden_from_dynamo"]

_GLOBAL_HOOKS_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


def _skip_package() -> None:
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return
    try:
        from torch._dynamo import trace_rules
    except ImportError:  # a torch without the module: nothing to hide from
        return
    skipped = getattr(trace_rules, "SKIP_DIRS", None)
    recompile = getattr(trace_rules, "_recompile_re", None)
    if isinstance(skipped, list) and callable(recompile) and PACKAGE_DIR + "/" not in skipped:
        skipped.append(PACKAGE_DIR + "/")
        recompile()


@contextlib.contextmanager
def hidden_from_dynamo() -> Iterator[None]:
    """Around the analysis of a built model: when Dynamo is loaded, it skips this package's files
    from now on in this process, and its global-hooks warning is not shown while the block runs."""
    _skip_package()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_GLOBAL_HOOKS_WARNING, category=UserWarning)
        yield
