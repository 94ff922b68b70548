"""A target's own line shows that target's totals alone: a class that is a target and is built by
another target too gets no second, unnamed sum of that other target's instances there. Counts by
hand: ``Conv2d(4, 4, 3)`` holds 4·4·9 + 4 = 148 parameters; two blocks 296, three 444."""


from torchscan_lsp.server.inlay_hints import build_inlay_hints
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.settings import InlayHintSettings
from analysed import analysed, state_of
from workspace_files import line_of, write

NET = """
    import torch.nn as nn
    import torchscan_lsp


    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return x + self.conv(x)


    # torchscan: input_shape=(4, 8, 8)
    class Net(nn.Module):
        def __init__(self, depth=2):
            super().__init__()
            self.blocks = nn.Sequential(*[Block(4) for _ in range(depth)])

        def forward(self, x):
            return self.blocks(x).mean((2, 3))


    @torchscan_lsp.target(input_shape=(4, 8, 8))
    def deeper():
        return Net(depth=3)
"""


def test_a_class_target_s_line_shows_its_own_totals_only(tmp_path):
    text = write(tmp_path, {"net.py": NET})["net.py"]
    states = []
    for name, line in (("Net", line_of(text, "class Net")), ("deeper", line_of(text, "def deeper"))):
        states.append(state_of(tmp_path, "net.py", name, line, analysed(tmp_path, "net.py", name, {"input_shape": [4, 8, 8]})))
    for ordered in (states, states[::-1]):  # whichever target comes first
        hints = [(h.position.line + 1, h.label) for h in build_inlay_hints("net.py", Lines(text, len), ordered,
                                                                            InlayHintSettings())]
        on_class = [label for line, label in hints if line == line_of(text, "class Net")]
        assert len(on_class) == 1 and on_class[0].startswith("296 params · "), on_class
        assert any(line == line_of(text, "def deeper") and label.startswith("444 params · ") for line, label in hints)
