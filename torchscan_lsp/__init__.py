"""torchscan-lsp: what a PyTorch model costs, shown in the code.

The analysis engine (``torchscan_lsp.engine``) is re-exported here, so that
``from torchscan_lsp import crawl_module`` works as ``from torchscan import crawl_module`` does.

The re-export is lazy (PEP 562): importing ``torchscan_lsp.server`` or ``torchscan_lsp.targets``
must never import torch, because the language server process stays torch-free by design.
"""

from importlib import import_module

from torchscan_lsp.contract.api import ENGINE_EXPORTS

__all__ = [*ENGINE_EXPORTS, "target", "__version__"]


def __getattr__(name: str):
    """Resolve engine names and ``__version__`` on first use (never cached: docs/report-schema.md, `context`)."""
    if name == "__version__":
        from torchscan_lsp.version import package_version

        return package_version()
    if name == "target":  # lazy too: the worker processes that never read it start 50 ms sooner
        from torchscan_lsp.targets.decorator import target

        return target
    if name in ENGINE_EXPORTS:
        return getattr(import_module("torchscan_lsp.engine"), name)
    raise AttributeError(f"module 'torchscan_lsp' has no attribute {name!r}")
