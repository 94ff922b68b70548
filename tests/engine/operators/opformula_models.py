"""Small real-architecture workloads for the operator-formula tests (random weights, tiny configs).

Each builder returns ``(model, args, kwargs)``. CNN blocks are written by hand (torchvision is not a
test dependency); transformer models come from ``transformers`` when it is importable.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from torchscan_lsp.engine.operator_formulas import DEFAULT_FORMULAS, EXTRA_IGNORED, counter_mapping

# The reference ignore list (docs/operator-formulas.md), which other engineers implement in engine/recording/operators.py.
SPEC_IGNORED = {
    f"aten.{name}"
    for name in (
        "_unsafe_view alias as_strided detach expand narrow permute select slice squeeze t transpose "
        "unbind unsqueeze view _to_copy cat clone contiguous copy_ split to empty empty_strided full "
        "lift_fresh lift_fresh_copy ones scalar_tensor zeros"
    ).split()
}


# --- hand-written CNN blocks --------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(c // r, c, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, hidden: int, cout: int, stride: int, se: bool, act: type[nn.Module]) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), act(),
                                   nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                                   nn.BatchNorm2d(hidden), act()]
        if se:
            layers.append(SqueezeExcite(hidden))
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


class TinyMobileNetV3(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 16, 8, 1, True, nn.ReLU),
            InvertedResidual(8, 24, 12, 2, False, nn.Hardswish),
            InvertedResidual(12, 36, 12, 1, True, nn.Hardswish),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 32), nn.Hardswish(),
                                  nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))


class UNetish(nn.Module):
    """Down/up path: GroupNorm, SiLU, GELU, interpolation, concat, LayerNorm, softmax, std/var."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.GroupNorm(2, 8), nn.SiLU())
        self.mid = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.InstanceNorm2d(8, affine=True), nn.GELU(),
                                 nn.Conv2d(8, 8, 1), nn.Mish(), nn.ELU(), nn.LeakyReLU(0.1), nn.PReLU())
        self.up = nn.ConvTranspose2d(16, 4, 2, 2)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.down(x)
        m = self.mid(d)
        bil = nn.functional.interpolate(m, scale_factor=2.0, mode="bilinear", align_corners=False)
        near = nn.functional.interpolate(bil, size=d.shape[-2:], mode="nearest")
        y = self.up(torch.cat([near, d], 1))
        y = self.norm(y)
        y = y.softmax(-1) + y.log_softmax(-1) + torch.tanh(y) * torch.sigmoid(y)
        return y - y.mean((2, 3), keepdim=True) / (y.std((2, 3), keepdim=True) + 1e-5)


class ConvNeXtBlock(nn.Module):
    """torchvision-style ConvNeXt block: depthwise 7x7, channels-last LayerNorm, GELU MLP, layer scale."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma = nn.Parameter(torch.full((dim, 1, 1), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.mlp(self.norm(y)).permute(0, 3, 1, 2)
        return x + self.gamma * y


class SwinishBlock(nn.Module):
    """Shifted-window attention as torchvision's Swin V2 writes it: roll, window partition, cosine
    attention with a logit scale, a continuous relative-position MLP, masked_fill, GELU MLP."""

    def __init__(self, dim: int = 16, heads: int = 2, window: int = 4) -> None:
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.cpb = nn.Sequential(nn.Linear(2, 32), nn.ReLU(inplace=True), nn.Linear(32, heads, bias=False))
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        coords = torch.arange(-(window - 1), window, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(coords, coords, indexing="ij")).permute(1, 2, 0).unsqueeze(0)
        table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / 3.0
        self.register_buffer("table", table)
        idx = torch.arange(window * window)
        self.register_buffer("index", (idx[:, None] + idx[None, :]) % ((2 * window - 1) ** 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        ws = self.window
        shifted = torch.roll(x, shifts=(-2, -2), dims=(1, 2))
        win = shifted.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        qkv = self.qkv(win).reshape(win.size(0), ws * ws, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=4.6).exp()
        bias = self.cpb(self.table).view(-1, self.heads)[self.index.view(-1)].view(ws * ws, ws * ws, -1)
        attn = attn + 16 * torch.sigmoid(bias.permute(2, 0, 1).contiguous())
        mask = torch.zeros(ws * ws, ws * ws, device=x.device)
        mask[: ws * ws // 2, ws * ws // 2:] = 1
        attn = attn.masked_fill(mask.bool(), -100.0).softmax(-1)
        out = (attn @ v).transpose(1, 2).reshape(win.size(0), ws * ws, c)
        out = self.proj(out).view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        x = x + self.norm(torch.roll(out, shifts=(2, 2), dims=(1, 2)))
        return x + self.norm(self.mlp(x))


class TorchvisionStyleViT(nn.Module):
    """torchvision's VisionTransformer encoder block: nn.MultiheadAttention(need_weights=False)."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.0), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        y = self.ln1(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        x = x + y
        x = x + self.mlp(self.ln2(x))
        return self.head(x[:, 0])


class ShuffleInception(nn.Module):
    """ShuffleNet channel shuffle, Inception branches (ceil-mode max pool, padded avg pool), DenseNet
    concatenation, SqueezeNet-style dropout head, LocalResponseNorm (AlexNet/GoogLeNet v1)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU6(inplace=True),
                                  nn.LocalResponseNorm(2))
        self.b1 = nn.Conv2d(8, 4, 1)
        self.b2 = nn.Sequential(nn.MaxPool2d(3, 2, ceil_mode=True), nn.Conv2d(8, 4, 1),
                                nn.Upsample(scale_factor=2, mode="nearest"))
        self.b3 = nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False), nn.Conv2d(8, 4, 3, padding=1, groups=4))
        self.shuffle = nn.ChannelShuffle(3)
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(12, 10, 1), nn.ReLU(inplace=True),
                                  nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Softmax(dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = torch.cat([self.b1(x), self.b2(x)[..., : x.shape[-2], : x.shape[-1]], self.b3(x)], 1)
        return self.head(self.shuffle(y))


def convnext():
    return nn.Sequential(nn.Conv2d(3, 16, 4, 4), ConvNeXtBlock(16), ConvNeXtBlock(16)), (torch.randn(2, 3, 32, 32),), {}


def swinish():
    return SwinishBlock(), (torch.randn(1, 8, 8, 16),), {}


def torchvision_vit():
    return TorchvisionStyleViT(), (torch.randn(2, 3, 16, 16),), {}


def shuffle_inception():
    return ShuffleInception(), (torch.randn(1, 3, 32, 32),), {}


def resnet():
    return TinyResNet(), (torch.randn(2, 3, 32, 32),), {}


def mobilenet_v3():
    return TinyMobileNetV3(), (torch.randn(2, 3, 32, 32),), {}


def unetish():
    return UNetish(), (torch.randn(1, 3, 16, 16),), {}


def torch_transformer_encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(2, 8, 32),), {}


def torch_lstm():
    return nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True), (torch.randn(2, 5, 8),), {}


def torch_gru():
    return nn.GRU(8, 12, num_layers=1), (torch.randn(5, 2, 8),), {}


def torch_mha():
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    x = torch.randn(2, 6, 16)
    return mha, (x, x, x), {}


def embedding_bag():
    class Bag(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bag = nn.EmbeddingBag(20, 8, mode="mean")
            self.emb = nn.Embedding(20, 8)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.bag(ids) + self.emb(ids).amax(1)

    return Bag(), (torch.randint(0, 20, (2, 5)),), {}


CNN_BUILDERS: dict[str, Callable[[], tuple[nn.Module, tuple, dict]]] = {
    "resnet": resnet,
    "mobilenet_v3": mobilenet_v3,
    "unetish": unetish,
    "torch_transformer_encoder": torch_transformer_encoder,
    "torch_lstm": torch_lstm,
    "torch_gru": torch_gru,
    "torch_mha": torch_mha,
    "embedding_bag": embedding_bag,
    "convnext": convnext,
    "swinish": swinish,
    "torchvision_vit": torchvision_vit,
    "shuffle_inception": shuffle_inception,
}


# --- transformers models ------------------------------------------------------------------------


def _ids(batch: int = 2, length: int = 8, vocab: int = 64) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length))


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    return GPT2LMHeadModel(cfg), (), {"input_ids": _ids()}


def bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32)
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return BertModel(cfg), (), {"input_ids": ids, "attention_mask": mask}


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaForCausalLM(cfg), (), {"input_ids": _ids()}


def mistral():
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                        sliding_window=4)
    return MistralForCausalLM(cfg), (), {"input_ids": _ids()}


def vit():
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64)
    return ViTModel(cfg), (), {"pixel_values": torch.randn(2, 3, 16, 16)}


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                   num_heads=4, decoder_start_token_id=0)
    return T5ForConditionalGeneration(cfg), (), {"input_ids": _ids(), "decoder_input_ids": _ids(length=4)}


def mamba():
    from transformers import MambaConfig, MambaForCausalLM

    cfg = MambaConfig(vocab_size=64, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)
    return MambaForCausalLM(cfg), (), {"input_ids": _ids()}


TRANSFORMERS_BUILDERS: dict[str, Callable[[], tuple[nn.Module, tuple, dict]]] = {
    "gpt2": gpt2,
    "bert": bert,
    "llama": llama,
    "mistral": mistral,
    "vit": vit,
    "t5": t5,
    "mamba": mamba,
}


# --- dispatch recording -------------------------------------------------------------------------


class OperatorRecorder(TorchDispatchMode):
    """Counts every executed operator by packet name.

    Entered *outside* the counter, it sees the operators FlopCounterMode actually executes (after the
    CompositeImplicit decompositions the counter performs), as the engine's counting mode records
    them; ``DECOMPOSITION_GUARDS`` keeps our formulas' operators whole.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        packet = getattr(func, "overloadpacket", func)
        self.calls[str(packet)] += 1
        return func(*args, **(kwargs or {}))


def count(workload: Callable[[], Any], mapping: dict | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """Run ``workload`` under FlopCounterMode(custom_mapping=mapping) with a recorder around it.

    Returns (per-operator FLOPs from the counter's Global entry, per-operator call counts).
    """
    recorder = OperatorRecorder()
    counter = FlopCounterMode(display=False, custom_mapping=counter_mapping() if mapping is None else mapping)
    with recorder, counter:
        workload()
    flops = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return flops, dict(recorder.calls)


def uncovered(calls: dict[str, int]) -> dict[str, int]:
    """Recorded operators with no formula (ours or PyTorch's) and not on any ignore list."""
    known = {str(p) for p in DEFAULT_FORMULAS} | {str(p) for p in flop_registry}
    return {op: n for op, n in calls.items() if op not in known and op not in SPEC_IGNORED and op not in EXTRA_IGNORED}


def run_model(builder: Callable[[], tuple[nn.Module, tuple, dict]], *, mode: str = "eval_no_grad",
              device: str = "cpu", dtype: torch.dtype | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """Build a model (on ``device``; "meta" builds it there) and count one forward in ``mode``
    ("eval_no_grad", "eval", "train", "inference_mode")."""
    torch.manual_seed(0)
    with torch.device(device):
        model, args, kwargs = builder()
    if dtype is not None:
        model = model.to(dtype)
        args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
        kwargs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in kwargs.items()}
    if mode == "train":
        model.train()
    else:
        model.eval()

    def workload() -> Any:
        if mode == "eval_no_grad":
            with torch.no_grad():
                return model(*args, **kwargs)
        if mode == "inference_mode":
            with torch.inference_mode():
                return model(*args, **kwargs)
        return model(*args, **kwargs)

    return count(workload)


def op_flops(workload: Callable[[], Any]) -> dict[str, int]:
    """Per-operator FLOPs of ``workload`` under our formulas (decomposition guards on)."""
    return count(workload)[0]
