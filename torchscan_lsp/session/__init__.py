"""The controller every front end shares, importing neither pygls nor torch: workspaces (roots,
files, ``[tool.torchscan-lsp]``), settings, scanning, job building, scheduling, the cache and the
store of target states and results (:class:`~.controller.Session`).

The language server (``server/``), ``check`` and ``scan`` all run their analyses through it, so
they cannot disagree about roots, skipped folders, options or limits. It is their only way to the
worker.
"""

from torchscan_lsp.session.controller import Session

__all__ = ["Session"]
