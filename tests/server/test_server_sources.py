"""Hints on every line that builds or computes, and in a library's own modeling file, through the
real server (pytest-lsp as a Neovim 0.11 client, trusted workspace). Expected labels are derived by
hand below from the models' code."""

import asyncio
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from lsp_support import analysed, hints, labels_by_line, line_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

CACHE = Path(tempfile.gettempdir()) / "torchscan-lsp-test-cache"
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"],
                            server_env={**os.environ, "XDG_CACHE_HOME": str(CACHE)})

MODELS = {
    "layers.py": '''
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def forward(self, x):
                B, T, C = x.shape
                q = x.view(B, T, 4, C // 4).transpose(1, 2)
                att = q @ q.transpose(-2, -1)
                return (att.softmax(dim=-1) @ q).transpose(1, 2).reshape(B, T, C)


        # torchscan: input_shape=(5, 32)
        def build_stack():
            return nn.Sequential(
                nn.Linear(32, 32),
                nn.ReLU(),
                Attention(),
                nn.Linear(32, 8,
                          bias=False),
            )
    ''',
    "tied.py": '''
        import torch
        import torch.nn as nn


        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(50, 8)
                self.head = nn.Linear(8, 50, bias=False)
                self.head.weight = self.emb.weight

            def forward(self, ids):
                return self.head(self.emb(ids))


        # torchscan: device="cpu"
        def build_tied():
            return Tied(), (torch.zeros(1, 4, dtype=torch.long),)
    ''',
    "vit.py": '''
        import torch
        import torch.nn as nn


        class TinyViT(nn.Module):
            def __init__(self, d=8):
                super().__init__()
                self.patch = nn.Conv2d(3, d, 4, stride=4)
                self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
                self.pos_embed = nn.Parameter(torch.zeros(1, 5, d))
                self.head = nn.Linear(d, 2)

            def forward(self, x):
                x = self.patch(x).flatten(2).transpose(1, 2)
                x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
                return self.head(x[:, 0])


        # torchscan: input_shape=(3, 8, 8)
        def build_vit():
            return TinyViT()
    ''',
    "mistral.py": '''
        import torch
        from transformers import MistralConfig, MistralForCausalLM


        # torchscan: device="cpu"
        def build_mistral():
            config = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
            torch.manual_seed(0)
            model = MistralForCausalLM(config)
            return model, (), {"input_ids": torch.zeros(1, 8, dtype=torch.long)}
    ''',
}


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path_factory").mktemp("ws")
    for name, source in MODELS.items():
        lsp.write(root, name, source)
    lsp_client.root = root
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration({"maxWorkers": 2}, section="torchscan")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"),
        root_uri=root.as_uri(), workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


async def _hover(client, uri: str, line: int) -> types.Hover | None:
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line - 1, character=8)))


async def test_each_child_of_a_multi_line_sequential_and_the_attention_line(client):
    path = client.root / "layers.py"
    uri = await analysed(client, client.status, path)
    by_line = labels_by_line(await hints(client, uri))
    # The labels show the dispatched operators (PyTorch's convention: a product of K terms is 2·K).
    # input (1, 5, 32). Linear(32, 32): 32·32 + 32 = 1,056 params; its addmm 2·5·32·32 = 10,240
    #   → "10.2 kFLOPs". ReLU: 0 params, 5·32 = 160 FLOPs.
    # Linear(32, 8, bias=False): 256 params; its mm 2·5·32·8 = 2,560 → "2.56 kFLOPs".
    assert by_line[line_of(path, "nn.Linear(32, 32)")] == ["1.06k params · 10.2 kFLOPs"]
    assert by_line[line_of(path, "nn.ReLU()")] == ["0 params · 160 FLOPs"]
    assert by_line[line_of(path, "nn.Linear(32, 8,")] == ["256 params · 2.56 kFLOPs"]
    # no module formula sees the work in Attention's own forward, the dispatcher does: with H = 4
    # heads of D = 8 over T = 5 tokens, q @ qᵀ is 2·4·5·5·8 = 1,600 FLOPs, the softmax over 4·5 rows of
    # 5 is 3·100 − 20 = 280, and att @ q another 1,600: 3,480 → "3.48 kFLOPs", complete
    assert by_line[line_of(path, "Attention(),")] == ["0 params · 3.48 kFLOPs"]
    # B = 1, T = 5, H = 4, D = 32 / 4 = 8: q (1, 4, 5, 8) @ qᵀ (1, 4, 8, 5) = (B, H, T, T) = (1, 4, 5, 5)
    assert by_line[line_of(path, "att = q @ q")] == ["→ (1, 4, 5, 5)"]
    assert by_line[line_of(path, "q = x.view")] == ["→ (1, 4, 5, 8)"]
    # back to (B, T, C) = (1, 5, 32)
    assert by_line[line_of(path, "return (att.softmax")] == ["→ (1, 5, 32)"]
    # the class line: its one instance, "2" in the Sequential, by the same rule
    assert by_line[line_of(path, "class Attention")] == ["0 params · 3.48 kFLOPs"]

    hover = await _hover(client, uri, line_of(path, "nn.ReLU()"))
    assert "### ReLU" in hover.contents.value and "Paths: `1`" in hover.contents.value
    hover = await _hover(client, uri, line_of(path, "att = q @ q"))
    assert "Output: (1, 4, 5, 5), from the value assigned to `att` in its first run" in hover.contents.value


async def test_a_head_tied_to_the_embedding_says_it_shares(client):
    path = client.root / "tied.py"
    uri = await analysed(client, client.status, path)
    by_line = labels_by_line(await hints(client, uri))
    # Embedding(50, 8): 50·8 = 400 parameters. The head's weight is the embedding's (one tensor,
    # counted once, under emb): the head owns nothing and shares those 400. Its matmul still runs:
    # ids (1, 4) → (1, 4, 8) → mm 2·4·8·50 = 3,200 FLOPs.
    assert by_line[line_of(path, "self.emb =")] == ["400 params · 0 FLOPs"]
    assert by_line[line_of(path, "self.head =")] == ["400 params shared with emb · 3.20 kFLOPs"]
    hover = await _hover(client, uri, line_of(path, "self.head ="))
    assert "400 parameters shared with `emb` (counted there)" in hover.contents.value


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed "
                    "(the examples extra)")
async def test_parameters_assigned_in_forward_code_and_a_line_s_result(client):
    path = client.root / "vit.py"
    uri = await analysed(client, client.status, path)
    by_line = labels_by_line(await hints(client, uri))
    # the parameters the model assigns itself: 1·1·8 = 8 and 1·5·8 = 40 elements, on their own lines
    assert by_line[line_of(path, "self.cls_token =")] == ["8 params"]
    assert by_line[line_of(path, "self.pos_embed =")] == ["40 params"]
    # (1, 3, 8, 8) → patch conv (1, 8, 2, 2) → flatten (1, 8, 4) → transpose: the line's result (1, 4, 8),
    # not the convolution's output; the CLS token joins: (1, 5, 8), then the position embedding added
    assert by_line[line_of(path, "x = self.patch(x)")] == ["→ (1, 4, 8)"]
    assert by_line[line_of(path, "x = torch.cat(")] == ["→ (1, 5, 8)"]
    # the head on the CLS row: (1, 2)
    assert by_line[line_of(path, "return self.head(x[:, 0])")] == ["→ (1, 2)"]
    hover = await _hover(client, uri, line_of(path, "self.cls_token ="))
    assert "`cls_token` of the root module: (1, 1, 8), 8 elements, trainable" in hover.contents.value


async def test_the_library_modeling_file_gets_hints_and_hovers(client):
    await analysed(client, client.status, client.root / "mistral.py")
    import transformers.models.mistral.modeling_mistral as modeling

    library = Path(modeling.__file__).resolve()
    assert not library.is_relative_to(client.root)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=from_fs_path(str(library)), language_id="python", version=1, text=library.read_text(encoding="utf-8"))))
    uri = from_fs_path(str(library))
    # the server reads the opened file off its event loop, so a request made at once may come first
    # (an editor asks again on the refresh that follows): ask until the file's lines are known
    wanted = line_of(library, "self.q_proj = nn.Linear")
    for _ in range(300):
        by_line = labels_by_line(await hints(client, uri, lines=2000))
        if wanted in by_line:
            break
        await asyncio.sleep(0.1)
    # head_dim = 32 / 4 = 8; q_proj = Linear(32, 4·8 = 32, bias=False) in each of the 2 layers:
    #   2 · 32·32 = 2,048 params; on (1, 8, 32) its mm is 2·8·32·32 = 16,384 FLOPs a call, 2 calls
    #   = 32,768 → "32.8 kFLOPs". k_proj = Linear(32, 2·8 = 16): 2 · 512 = 1,024 params,
    #   2 · 2·8·32·16 = 16,384 FLOPs.
    assert by_line[line_of(library, "self.q_proj = nn.Linear")] == ["×2 · 2.05k params · 32.8 kFLOPs"]
    assert by_line[line_of(library, "self.k_proj = nn.Linear")] == ["×2 · 1.02k params · 16.4 kFLOPs"]
    # the call line of q_proj shows the line's result: q_proj's (1, 8, 32) viewed as (1, 8, 4 heads,
    # 8) and transposed to (1, 4, 8, 8), as the line assigns it to query_states
    assert by_line[line_of(library, "query_states = self.q_proj(")] == ["→ (1, 4, 8, 8)"]
    # the residual add after the attention, a line that calls no module: (B, T, hidden) = (1, 8, 32)
    assert by_line[line_of(library, "hidden_states = residual + hidden_states")] == ["→ (1, 8, 32)"]
    # the class line of the attention sums its 2 instances: q, k, v, o = 1,024 + 512 + 512 + 1,024
    #   = 3,072 params each, 6,144 → "6.14k params"
    (attention,) = by_line[line_of(library, "class MistralAttention")]
    assert attention.startswith("×2 · 6.14k params · ")

    hover = await _hover(client, uri, line_of(library, "self.q_proj = nn.Linear"))
    text = hover.contents.value
    assert "### Linear ×2" in text
    assert "`model.layers.0.self_attn.q_proj`, `model.layers.1.self_attn.q_proj`" in text


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed "
                    "(the examples extra)")
async def test_the_line_that_builds_a_library_model_shows_the_model_and_its_children(client):
    path = client.root / "mistral.py"
    uri = await analysed(client, client.status, path)
    by_line = labels_by_line(await hints(client, uri))
    # hidden 32, 4 heads of 8, 2 key-value heads (k and v are 16 wide), MLP 64, vocabulary 64, 2 layers:
    # embedding 64·32 = 2,048; a layer: q 32·32 + k 32·16 + v 32·16 + o 32·32 = 3,072, gate, up and
    # down 3·32·64 = 6,144, two norms 2·32 = 64: 9,280; the final norm 32; the (untied) head 32·64 =
    # 2,048. 2,048 + 2·9,280 + 32 + 2,048 = 22,688 → "22.7k params"
    (total,) = by_line[line_of(path, "def build_mistral")]
    params, _, flops = total.split(" · ")
    assert params == "22.7k params"
    # the factory's line that ran the library's constructor says what it built: the whole model
    assert by_line[line_of(path, "model = MistralForCausalLM")] == [f"{params} · {flops}"]
    hover = (await _hover(client, uri, line_of(path, "model = MistralForCausalLM"))).contents.value
    assert hover.startswith("### MistralForCausalLM\n")   # the model, not its nine module classes
    assert "Input: input_ids=(1, 8) → output:" in hover   # a keyword input, by name
    assert "**Children** (2)" in hover
    assert "| `model` | MistralModel | 20.6k params |" in hover   # 2,048 + 2·9,280 + 32 = 20,640
    assert "| `lm_head` | Linear | 2.05k params |" in hover
    assert "Not counted" not in hover
