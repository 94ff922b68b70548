"""``torchscan-lsp check`` on a model wrapped by a library after the user built it (peft's LoRA):
each line of the user's ``__init__`` shows the layer it built, never the wrapper's totals."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("peft")

SOURCE = """
    from torch import nn
    from peft import LoraConfig, get_peft_model


    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 128)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))


    # torchscan: input_shape=(64,)
    def lora_mlp():
        config = LoraConfig(r=4, lora_alpha=8, target_modules=["fc1", "fc2"], lora_dropout=0.0)
        return get_peft_model(MLP(), config)
"""


def test_the_lines_of_a_wrapped_model_show_their_own_layers(tmp_path):
    (tmp_path / "lora.py").write_text(textwrap.dedent(SOURCE).lstrip("\n"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "lora.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    hints = {int(line.split(":")[1]): line.split("hint: ", 1)[1] for line in done.stdout.splitlines() if ": hint: " in line}
    # line 8, fc1 = Linear(64, 128): 64·128 + 128 = 8,320 parameters (the base layer peft keeps);
    # on (1, 64): 2·64·128 = 16,384 FLOPs (addmm: a product and a sum per weight, the bias included)
    assert hints[8] == "8.32k params · 16.4 kFLOPs"
    # line 9, the ReLU between them: no parameters, one comparison per element of (1, 128)
    assert hints[9] == "0 params · 128 FLOPs"
    # line 10, fc2 = Linear(128, 10): 128·10 + 10 = 1,290 parameters, 2·128·10 = 2,560 FLOPs
    assert hints[10] == "1.29k params · 2.56 kFLOPs"
    # the line that returns the model holds the whole: 8,320 + 1,290 + the adapters 4·(64 + 128) + 4·(128 + 10) = 10,930
    assert hints[19].startswith("10.9k params")
