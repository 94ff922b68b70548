"""``device="meta"``: the factory builds the model on the meta device (docs/annotations.md), so a
model too big for this machine costs no memory to build."""

from torchscan_lsp.worker.runner import run_job
from workspace_files import write


def test_a_meta_target_is_built_on_the_meta_device(tmp_path):
    write(tmp_path, {"big.py": """
        import torch
        import torch.nn as nn


        def build():
            # 50,000 x 50,000 weights: 10 GB in float32 had it been built on the CPU first
            assert torch.empty(1).device.type == "meta", "the factory ran on the CPU"
            return nn.Sequential(nn.Linear(50_000, 50_000), nn.ReLU())
    """})
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "big.py"), "target": "build",
                      "options": {"input_shape": [50_000], "device": "meta"}})
    assert result["ok"] is True, result.get("error")
    # 50,000² weights + 50,000 biases; MACs 50,000² for the one input row
    assert result["report"]["totals"]["parameters"]["value"] == 50_000 * 50_000 + 50_000
    assert result["report"]["totals"]["macs"]["value"] == 50_000 * 50_000


def test_a_cpu_target_is_built_on_the_cpu(tmp_path):
    write(tmp_path, {"small.py": """
        import torch
        import torch.nn as nn


        def build():
            assert torch.empty(1).device.type == "cpu"
            return nn.Linear(4, 2)
    """})
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "small.py"), "target": "build",
                      "options": {"input_shape": [4]}})
    assert result["ok"] is True, result.get("error")
    assert result["report"]["totals"]["parameters"]["value"] == 4 * 2 + 2
