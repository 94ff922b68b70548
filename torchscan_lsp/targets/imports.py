"""What a file's import statements name, read with ``ast`` (never imported here).

The warm worker imports, before its first job, what the annotated files of the workspace import
(docs/server.md, "Warm workers"), so that their first analysis and the saves after it find those
libraries loaded. :func:`imported_names` lists them as *preload entries*, in the order of the
statements: ``MODULE`` for ``import MODULE`` (``import torch.nn as nn``: ``torch.nn``) and
``MODULE:NAME`` for each name of ``from MODULE import NAME``, since that statement also takes the
name from the module, which a lazily importing package (``transformers``) answers by importing the
code that defines it. Relative imports (``from .blocks import Block``) and ``__future__`` are the
file's own business and left out; whether an absolute name is the workspace's or a library's is
the warm worker's to decide, by where it resolves (the one rule of
:func:`torchscan_lsp.worker.preload.is_library_file`).
"""

from __future__ import annotations

import ast

__all__ = ["imported_names"]


def imported_names(tree: ast.AST) -> list[str]:
    """The preload entries of every import statement in ``tree`` (top level, functions and
    branches alike: a factory that imports inside its body imports when it runs), each once, in
    source order; ``from M import *`` counts as ``M``."""
    entries: list[str] = []
    statements = sorted((node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))),
                        key=lambda node: (node.lineno, node.col_offset))
    for node in statements:
        if isinstance(node, ast.Import):
            entries += [alias.name for alias in node.names]
        elif not node.level and node.module and node.module != "__future__":
            names = [alias.name for alias in node.names if alias.name != "*"]
            entries += [f"{node.module}:{name}" for name in names] if names else [node.module]
    return list(dict.fromkeys(entries))
