"""What the worker returns is what the contract describes: the results the editor keeps on disk
are checked against the contract when read back (``contract/conformance.py``), so a worker result
the types do not describe would never be reused."""

from __future__ import annotations

import json

from torchscan_lsp.contract.conformance import result_problem
from torchscan_lsp.worker.runner import run_job
from workspace_files import write

MODEL = '''
    import torch.nn as nn
    import torch.nn.functional as F

    from blocks import Block


    # torchscan: input_shape=(3, 16, 16)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.norm = nn.BatchNorm2d(4)
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.head = nn.Linear(4, 10)

        def forward(self, x):
            x = F.relu(self.norm(self.conv(x)))
            for block in self.blocks:
                x = x + block(x)
            return self.head(x.mean((2, 3)))
'''

BLOCKS = '''
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 1)

        def forward(self, x):
            return self.conv(x).tanh()
'''


def test_a_worker_result_conforms_to_the_contract(tmp_path):
    write(tmp_path, {"blocks.py": BLOCKS, "net.py": MODEL})
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "net.py"), "target": "Net",
                      "options": {"input_shape": [3, 16, 16]}})
    result = json.loads(json.dumps(result))                          # as it is kept on disk
    assert result["ok"] and result["source_map"]["modules"] and result["report"]["layers"]
    assert sorted(result["imported_files"]) == ["blocks.py", "net.py"]
    assert result_problem(result) is None
