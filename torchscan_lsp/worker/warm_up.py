"""What the warm parent does before it forks its first child: import torch and the engine
(:func:`import_base`), then run one small analysis (:func:`warm_up`).

Both run on a single thread on the CPU, so that first-call costs are paid once while no intra-op
thread pool and no CUDA state exist to be inherited by the children (neither survives a fork).
"""

from __future__ import annotations

import os
import sys


def import_base() -> None:
    """Import everything a job needs, so that children start warm.

    torch must import (else :class:`ImportError` and the like propagate); the project's own
    modules are imported best-effort: one that fails here fails again in the job, which reports it
    on the target like any other worker error. Runs no tensor operation: a parent that ran one
    would hand intra-op thread pools, which do not survive a fork, to its children.
    """
    import importlib

    import torch  # noqa: F401 - the point is the import

    # torch._dynamo (seconds) is not among them: no job needs it unless its model does (then the
    # warm parent learns it from that job) or a memory measurement runs; the warm parent preloads
    # it after its first job (see zygote.main).
    for name in ("torch.utils.flop_counter", "torchscan_lsp.engine", "torchscan_lsp.engine.recording.inputs",
                 "torchscan_lsp.engine.measuring.latency", "torchscan_lsp.engine.measuring.memory", "torchscan_lsp.worker.attribution",
                 "torchscan_lsp.worker.runner", "torchscan_lsp.worker.child", "torchscan_lsp.engine.formulas"):
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - see the docstring
            print(f"torchscan warm worker: could not preload {name}: {error}", file=sys.stderr)


_WARM_UP_MODEL = """
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)) + x)


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 8))

    def forward(self, x):
        y = self.norm(x)
        x = x + self.attention(y, y, y)[0]
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block = Block()
        self.mixer = Mixer()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.block(self.stem(x))
        x = self.mixer(x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(x.shape)
        return self.head(self.pool(x).flatten(1))


def build():
    return Net()
"""


def warm_up() -> None:
    """Run one small analysis on a single thread, so that first-call costs (dispatcher caches,
    lazily imported modules) are paid here once instead of in every child. Failures are ignored:
    the jobs will report them."""
    import tempfile

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no intra-op worker threads exist to be lost across a fork
    try:
        with tempfile.TemporaryDirectory(prefix="torchscan-warm-") as root:
            path = os.path.join(root, "torchscan_warm_up.py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(_WARM_UP_MODEL)
            from torchscan_lsp.worker.runner import run_job

            result = run_job({"workspace_root": root, "file": path, "target": "build",
                              "options": {"input_shape": [3, 32, 32]}, "measure": []})
        if not result.get("ok"):
            print(f"torchscan warm worker: warm-up failed: {result.get('error')}", file=sys.stderr)
    except Exception as error:  # noqa: BLE001 - see the docstring
        print(f"torchscan warm worker: warm-up failed: {error}", file=sys.stderr)
    finally:
        torch.set_num_threads(threads)
