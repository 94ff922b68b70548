"""The training step in the editor, end to end (pytest-lsp as a Neovim 0.11 client): the budget
warning from the workspace's ``train_memory``, the "Measure training step" lens and command, and the
target hover's training card.

The workspace's ``pyproject.toml`` sets ``train_memory = "100 B"``; the target is ``nn.Linear(4, 2)``
trained with SGD on a batch of 2 (``input_shape=(4,)``). By hand, in bytes (4 per element):

    parameters P = (4 * 2 + 2) * 4 = 40; input x = 2 * 4 * 4 = 32; output = 2 * 2 * 4 = 16; loss 4
    the peak, in the backward: P, x, the output, the loss and its 4-byte gradient (activations:
    16 + 4 + 4 = 24), while the weight gradient (2 x 4: 32) and the bias gradient (8) are computed
    (temporaries: 40): 40 + 32 + 24 + 40 = 136 > 100
    FLOPs: forward 2 * 2 * 4 * 2 = 32 for the product and 3 for the sum of the 4 outputs: 35;
    backward, the weight gradient (2 x 2)^T @ (2 x 4): 32, and the bias gradient's sum over the
    batch, 2 x (2 - 1) = 2: 34 (no input gradient: the input is data)

``frozen.py`` fine-tunes ``Linear(8, 16), ReLU, Linear(16, 4)`` with the last layer frozen (the
counts derived in tests/training/test_training_fine_tuning.py): the card says what trains.
"""

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from lsp_support import analysed, line_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

MODEL = '''
    import torch.nn as nn


    # torchscan: input_shape=(4,), train={"optimizer": "sgd", "batch": 2}
    def build_linear():
        return nn.Linear(4, 2)
'''
FROZEN = '''
    import torch.nn as nn


    # torchscan: input_shape=(8,), train={"optimizer": "adamw", "batch": 2}
    def build_frozen_head():
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        model[2].requires_grad_(False)
        return model
'''
BUDGET_WARNING = ("build_linear: the training step's estimated peak, 136 B (in the backward), exceeds the memory "
                  "budget of 100 B; largest: parameters 40 B, temporaries 40 B, inputs 32 B.")


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path_factory").mktemp("train_ws")
    (root / "pyproject.toml").write_text('[tool.torchscan-lsp]\ntrain_memory = "100 B"\n', encoding="utf-8")
    lsp.write(root, "linear.py", MODEL)
    lsp.write(root, "frozen.py", FROZEN)
    lsp_client.root = root
    lsp_client.status = lsp.attach(lsp_client)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


async def _hover(client, uri, line):
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line - 1, character=5)))
    return hover.contents.value


async def test_an_estimate_over_the_budget_is_a_warning_on_the_target(client):
    path = client.root / "linear.py"
    uri = await analysed(client, client.status, path)
    target = line_of(path, "def build_linear")
    warnings = [(d.range.start.line + 1, d.message) for d in client.diagnostics.get(uri, [])
                if d.severity == types.DiagnosticSeverity.Warning]
    assert warnings == [(target, BUDGET_WARNING)]
    # the estimate ran by itself (the budget asks for it); the real step only runs when asked
    card = await _hover(client, uri, target)
    # Linear(4, 2): 4 * 2 + 2 = 10 parameters, all trained
    assert "**Training step** (sgd, batch 2, for-loop on cpu): trainable 10 of 10 parameters" in card
    assert "| forward | 35 FLOPs | complete |" in card and "| backward | 34 FLOPs | complete |" in card
    assert "| training | 69 FLOPs | complete |" in card
    assert "| parameters | 40 B | — |" in card and "| temporaries | 40 B | — |" in card
    assert "estimated 136 B in the backward; measured unavailable: not requested" in card
    assert "Budget 100 B (estimated peak): over by 36 B." in card


async def test_measure_training_step_runs_both_methods(client):
    path = client.root / "linear.py"
    uri = await analysed(client, client.status, path)
    target = line_of(path, "def build_linear")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    (lens,) = [lens for lens in lenses if lens.command.title == "Measure training step"]
    assert lens.range.start.line == target - 1
    assert (lens.command.command, list(lens.command.arguments)) == ("torchscan.measureTraining", [uri, "build_linear"])
    measured = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=lens.command.command, arguments=list(lens.command.arguments)))
    report = measured["train"]
    assert report["kind"] == "training_step"
    assert report["memory"]["estimated"]["peak"]["value"] == 136
    assert report["memory"]["measured"]["peak"]["status"] == "complete"
    assert report["memory"]["comparison"]["agree"] is True
    # the hover now shows the measured column beside the estimate, and the two methods' agreement
    card = await _hover(client, uri, target)
    assert "| parameters | 40 B | 40 B |" in card
    assert "The two methods agree" in card


async def test_the_card_of_a_fine_tuned_model_says_what_trains(client):
    path = client.root / "frozen.py"
    uri = await analysed(client, client.status, path)
    card = await _hover(client, uri, line_of(path, "def build_frozen_head"))
    # trainable: layer 0, 8 * 16 + 16 = 144; frozen: layer 2, 16 * 4 + 4 = 68; of 212
    assert "**Training step** (adamw, batch 2, for-loop on cpu): trainable 144 of 212 parameters" in card
    # forward: the two products 2 * 2 * 8 * 16 + 2 * 2 * 16 * 4 = 768, the ReLU 2 * 16 = 32, the
    # loss's sum 2 * 4 - 1 = 7: 807. Backward: the frozen layer's input gradient only, 2 * 2 * 4 * 16
    # = 256, the ReLU's mask 2 * 32 = 64, layer 0's weight gradient only (its input is data),
    # 2 * 16 * 2 * 8 = 512, and its bias gradient 16 * (2 - 1) = 16: 848
    assert "| forward | 807 FLOPs | complete |" in card and "| backward | 848 FLOPs | complete |" in card
    # gradients exist for the 144 trainable elements only: 144 * 4 bytes = 576 B; AdamW's two
    # moments 2 * 576 = 1,152 B and a 4-byte step per trained tensor (2): 1,160 B
    assert "| gradients | 576 B | — |" in card
    assert "| optimizer state | 1.13 KiB | — |" in card
