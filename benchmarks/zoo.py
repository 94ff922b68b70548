"""Model-zoo coverage report: real architectures, built by their libraries' own code with
random weights, analysed with ``torchscan_lsp.crawl_module``.

For every model it prints the status of the four FLOP-like totals — module FLOPs, MACs, DMAs (module
formulas) and operator FLOPs (the dispatcher, with ``operator_formulas.DEFAULT_FORMULAS``) — the
ratio module FLOPs / operator FLOPs, the analysis time over a plain ``no_grad`` forward, and what is
not covered: module types without a formula and operators without one. A summary gives, per source,
how many models report ``complete`` operator FLOPs.

Sources:

* ``transformers`` (required): GPT-2, BERT, Llama, Mistral, ViT, T5 and Mamba, from small configs
  (``--size small``, default) or the libraries' default configurations (``--size base``: GPT-2 small,
  BERT base, ViT base, T5 small, and Llama/Mistral/Mamba at a 1B-ish width);
* ``torch``: native fused-path modules (``nn.TransformerEncoder``, ``nn.LSTM``, ``nn.GRU``,
  ``nn.MultiheadAttention``) in evaluation, where PyTorch runs its fused CPU kernels;
* ``torchvision`` (optional): every classification model of ``torchvision.models``;
* ``timm`` (optional): a spread of architectures families (``--timm-all`` for every model).

Run: ``python benchmarks/zoo.py`` (``--models gpt2,bert`` to choose, ``--json out.json`` to save
the rows, ``--device meta`` to analyse on the meta device, ``--quick`` for one timing round).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

Builder = Callable[[], tuple[nn.Module, tuple, dict]]

# --------------------------------------------------------------------------------------------------
# transformers


def _ids(batch: int, tokens: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, tokens))


def _with_mask(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """``input_ids`` and an all-ones attention mask, except on the meta device, where ``transformers``
    would read the mask's values (``Tensor.item()``) to decide whether it can be skipped."""
    if ids.device.type == "meta":
        return {"input_ids": ids}
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def transformers_builders(size: str, tokens: int) -> dict[str, Builder]:
    import transformers as tf

    small = size == "small"
    vocab = 1000 if small else None

    def gpt2() -> tuple[nn.Module, tuple, dict]:
        cfg = tf.GPT2Config(vocab_size=vocab, n_layer=2, n_embd=128, n_head=4) if small else tf.GPT2Config()
        return tf.GPT2LMHeadModel(cfg), (), _with_mask(_ids(1, tokens, cfg.vocab_size))

    def bert() -> tuple[nn.Module, tuple, dict]:
        cfg = (tf.BertConfig(vocab_size=vocab, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=512) if small else tf.BertConfig())
        return tf.BertModel(cfg), (), _with_mask(_ids(1, tokens, cfg.vocab_size))

    def llama() -> tuple[nn.Module, tuple, dict]:
        if small:
            cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)
        else:
            cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                                 num_attention_heads=32, num_key_value_heads=4)
        return tf.LlamaForCausalLM(cfg), (), {"input_ids": _ids(1, tokens, cfg.vocab_size)}

    def mistral() -> tuple[nn.Module, tuple, dict]:
        if small:
            cfg = tf.MistralConfig(vocab_size=vocab, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, sliding_window=16)
        else:
            cfg = tf.MistralConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                                   num_attention_heads=32, num_key_value_heads=8, sliding_window=4096)
        return tf.MistralForCausalLM(cfg), (), {"input_ids": _ids(1, tokens, cfg.vocab_size)}

    def vit() -> tuple[nn.Module, tuple, dict]:
        cfg = (tf.ViTConfig(image_size=64, patch_size=16, hidden_size=128, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=512) if small else tf.ViTConfig())
        return tf.ViTModel(cfg), (), {"pixel_values": torch.randn(1, 3, cfg.image_size, cfg.image_size)}

    def t5() -> tuple[nn.Module, tuple, dict]:
        cfg = (tf.T5Config(vocab_size=vocab, d_model=128, d_kv=32, d_ff=512, num_layers=2, num_heads=4,
                           decoder_start_token_id=0) if small else tf.T5Config(decoder_start_token_id=0))
        return tf.T5ForConditionalGeneration(cfg), (), {
            "input_ids": _ids(1, tokens, cfg.vocab_size), "decoder_input_ids": _ids(1, max(tokens // 2, 1), cfg.vocab_size)}

    def mamba() -> tuple[nn.Module, tuple, dict]:
        cfg = (tf.MambaConfig(vocab_size=vocab, hidden_size=128, state_size=16, num_hidden_layers=2) if small
               else tf.MambaConfig(vocab_size=32000, hidden_size=1024, num_hidden_layers=4))
        return tf.MambaForCausalLM(cfg), (), {"input_ids": _ids(1, tokens, cfg.vocab_size)}

    return {"gpt2": gpt2, "bert": bert, "llama": llama, "mistral": mistral, "vit": vit, "t5": t5, "mamba": mamba}


# --------------------------------------------------------------------------------------------------
# torch native fused paths


def torch_builders(tokens: int) -> dict[str, Builder]:
    def encoder() -> tuple[nn.Module, tuple, dict]:
        layer = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), (torch.randn(1, tokens, 256),), {}

    def transformer() -> tuple[nn.Module, tuple, dict]:
        model = nn.Transformer(128, 4, 2, 2, 256, dropout=0.0, batch_first=True)
        return model, (torch.randn(1, tokens, 128), torch.randn(1, max(tokens // 2, 1), 128)), {}

    def lstm() -> tuple[nn.Module, tuple, dict]:
        return nn.LSTM(64, 128, num_layers=2, bidirectional=True, batch_first=True), (torch.randn(1, tokens, 64),), {}

    def gru() -> tuple[nn.Module, tuple, dict]:
        return nn.GRU(64, 128, num_layers=2), (torch.randn(tokens, 1, 64),), {}

    def mha() -> tuple[nn.Module, tuple, dict]:
        x = torch.randn(1, tokens, 128)
        return nn.MultiheadAttention(128, 4, batch_first=True), (x, x, x), {}

    return {"torch.TransformerEncoder": encoder, "torch.Transformer": transformer, "torch.LSTM": lstm,
            "torch.GRU": gru, "torch.MultiheadAttention": mha}


# --------------------------------------------------------------------------------------------------
# optional: torchvision and timm

_TIMM_SPREAD = (
    "resnet18", "resnet50d", "resnext26ts", "seresnet18", "regnetx_002", "regnety_004", "densenet121",
    "dla34", "dpn48b", "efficientnet_b0", "tf_efficientnetv2_b0", "mobilenetv3_small_100",
    "mobilenetv4_conv_small", "mnasnet_100", "ghostnet_100", "rexnet_100", "hrnet_w18_small",
    "convnext_atto", "convnextv2_atto", "inception_v3", "xception41", "vgg11", "repvgg_a0", "cspresnet50",
    "darknet17", "res2net50_14w_8s", "skresnet18", "ese_vovnet19b_dw", "nfnet_l0",
    "vit_tiny_patch16_224", "deit_tiny_patch16_224", "deit3_small_patch16_224", "beit_base_patch16_224",
    "eva02_tiny_patch14_224", "swin_tiny_patch4_window7_224", "swinv2_cr_tiny_ns_224", "cait_xxs24_224",
    "coat_lite_tiny", "convit_tiny", "crossvit_tiny_240", "levit_128s", "mixer_s16_224", "resmlp_12_224",
    "gmlp_ti16_224", "poolformer_s12", "poolformerv2_s12", "mobilevit_xxs", "mobilevitv2_050",
    "efficientformer_l1", "efficientformerv2_s0", "edgenext_xx_small", "fastvit_t8", "maxvit_nano_rw_256",
    "coatnet_nano_rw_224", "pvt_v2_b0", "twins_svt_small", "tnt_s_patch16_224", "xcit_nano_12_p16_224",
    "visformer_tiny", "sequencer2d_s", "tiny_vit_5m_224", "efficientvit_b0", "hgnetv2_b0", "repghostnet_050",
    "inception_next_tiny", "davit_tiny", "focalnet_tiny_srf", "nest_tiny", "pit_ti_224", "volo_d1_224",
    "caformer_s18", "convformer_s18", "gcvit_xxtiny", "hiera_tiny_224", "vitamin_small_224", "rdnet_tiny",
)


def torchvision_builders() -> dict[str, Builder]:
    try:
        import torchvision
    except ImportError:
        return {}
    builders: dict[str, Builder] = {}
    for name in torchvision.models.list_models(module=torchvision.models):
        def build(name: str = name) -> tuple[nn.Module, tuple, dict]:
            model = torchvision.models.get_model(name, weights=None)
            size = 299 if name.startswith("inception") else 224
            return model, (torch.randn(1, 3, size, size),), {}

        builders[f"torchvision.{name}"] = build
    return builders


def timm_builders(everything: bool) -> dict[str, Builder]:
    try:
        import timm
    except ImportError:
        return {}
    available = set(timm.list_models())
    names = sorted(available) if everything else [n for n in _TIMM_SPREAD if n in available]
    builders: dict[str, Builder] = {}
    for name in names:
        def build(name: str = name) -> tuple[nn.Module, tuple, dict]:
            model = timm.create_model(name, pretrained=False)
            size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
            return model, (torch.randn(1, *size),), {}

        builders[f"timm.{name}"] = build
    return builders


# --------------------------------------------------------------------------------------------------
# one model


_UNSUPPORTED = re.compile(r"Module type not supported: (\S+)")


def _value(metric: dict[str, Any]) -> float | None:
    value = metric.get("value")
    if value is None:
        value = metric.get("known_value")
    return value


def analyse(name: str, builder: Builder, *, device: str, rounds: int) -> dict[str, Any]:
    from torchscan_lsp import crawl_module

    row: dict[str, Any] = {"model": name}
    torch.manual_seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.device(device):
                model, args, kwargs = builder()
            model.eval()
            row["parameters"] = sum(p.numel() for p in model.parameters())
            # plain forward and analysis interleaved, round after round, so that load from other
            # processes hits both alike; wall-clock and process CPU time are both kept
            plain_wall: list[float] = []
            plain_cpu: list[float] = []
            crawl_wall: list[float] = []
            crawl_cpu: list[float] = []
            report = None
            if device != "meta":
                with torch.no_grad():
                    model(*args, **kwargs)  # warm-up (lazy initialisation, oneDNN primitive caches)
            for _ in range(rounds if device != "meta" else 1):
                if device != "meta":
                    wall, cpu = time.perf_counter(), time.process_time()
                    with torch.no_grad():
                        model(*args, **kwargs)
                    plain_wall.append(time.perf_counter() - wall)
                    plain_cpu.append(time.process_time() - cpu)
                wall, cpu = time.perf_counter(), time.process_time()
                report = crawl_module(model, args=args, kwargs=kwargs)
                crawl_wall.append(time.perf_counter() - wall)
                crawl_cpu.append(time.process_time() - cpu)
    except Exception as exc:  # a model that cannot be built or analysed is a row, not a crash
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        row["traceback"] = traceback.format_exc(limit=3)
        return row
    totals = report["totals"]
    for key in ("module_flops", "macs", "dmas", "operator_flops"):
        metric = totals.get(key, {})
        row[key] = {"status": metric.get("status"), "value": _value(metric)}
    module, operator = row["module_flops"]["value"], row["operator_flops"]["value"]
    row["module_over_operator"] = (module / operator) if module is not None and operator else None
    row["analysis_s"] = statistics.median(crawl_wall)
    row["forward_s"] = statistics.median(plain_wall) if plain_wall else None
    row["analysis_over_forward"] = (row["analysis_s"] / row["forward_s"]) if row["forward_s"] else None
    cpu_forward = statistics.median(plain_cpu) if plain_cpu else None
    row["analysis_over_forward_cpu"] = (statistics.median(crawl_cpu) / cpu_forward) if cpu_forward else None
    types = {layer.get("path"): layer.get("type") for layer in report.get("layers", [])}
    modules: dict[str, set[str]] = {}
    operators: dict[str, str] = {}
    other: dict[str, int] = {}
    for diag in report.get("diagnostics", []):
        code = diag.get("code")
        metric = diag.get("metric", "?")
        if code == "uncounted_operator":
            operators[diag.get("operator", "?")] = diag.get("message", "")
        elif code == "unsupported_module_metric" and metric in ("module_flops", "macs", "dmas"):
            match = _UNSUPPORTED.search(diag.get("message", ""))
            kind = match.group(1) if match else str(types.get(diag.get("path")) or diag.get("path", "?"))
            modules.setdefault(kind, set()).add(metric)
        elif code == "unsupported_module_metric":
            continue  # receptive field / token dependencies: not a FLOP-like total
        elif diag.get("severity") != "info":
            key = f"{code} ({metric})"
            other[key] = other.get(key, 0) + 1
    row["uncovered_modules"] = {kind: sorted(metrics) for kind, metrics in sorted(modules.items())}
    row["uncovered_operators"] = sorted(operators)
    row["other_diagnostics"] = other
    row["execution"] = {k: v for k, v in report.get("context", {}).items() if "path" in k or "mode" in k}
    return row


# --------------------------------------------------------------------------------------------------
# output


def _short(status: str | None) -> str:
    return {"complete": "ok", "partial": "PART", "unavailable": "n/a"}.get(status or "", "?")


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_row(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"{row['model']:<34} ERROR {row['error']}")
        return
    statuses = " ".join(_short(row[k]["status"]).ljust(4) for k in ("module_flops", "macs", "dmas", "operator_flops"))
    op = row["operator_flops"]["value"]
    print(f"{row['model']:<34} {statuses}  {(op or 0) / 1e9:>9.3f}  {_fmt(row['module_over_operator']):>6}"
          f"  {_fmt(row['analysis_over_forward']):>6}  {_fmt(row['analysis_over_forward_cpu']):>6}")
    if row["uncovered_operators"]:
        print(f"{'':<36}uncovered operators: {', '.join(row['uncovered_operators'])}")
    if row["uncovered_modules"]:
        kinds = ", ".join(f"{k} ({'/'.join(m)})" for k, m in row["uncovered_modules"].items())
        print(f"{'':<36}module types without a formula: {kinds}")
    if row["other_diagnostics"]:
        print(f"{'':<36}other diagnostics: {row['other_diagnostics']}")


def header() -> None:
    print(f"{'model':<34} {'modF':<4} {'MACs':<4} {'DMAs':<4} {'opF':<4}  {'opGFLOPs':>9}  {'mod/op':>6}  {'t/fwd':>6}  {'cpu/fwd':>6}")
    print("-" * 94)


def summary(rows: list[dict[str, Any]]) -> None:
    print()
    print("summary: operator FLOPs complete per source")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        source = row["model"].split(".", 1)[0] if "." in row["model"] else "transformers"
        groups.setdefault(source, []).append(row)
    for source, members in groups.items():
        done = [r for r in members if "error" not in r]
        complete = [r for r in done if r["operator_flops"]["status"] == "complete"]
        errors = len(members) - len(done)
        share = 100.0 * len(complete) / len(done) if done else 0.0
        print(f"  {source:<14} {len(complete)}/{len(done)} complete ({share:.1f}%)" + (f", {errors} errors" if errors else ""))
        missing: dict[str, int] = {}
        for r in done:
            for op in r["uncovered_operators"]:
                missing[op] = missing.get(op, 0) + 1
        if missing:
            print(f"  {'':<14} uncovered operators: " + ", ".join(f"{k} x{v}" for k, v in sorted(missing.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated model names (substring match)")
    parser.add_argument("--size", choices=("small", "base"), default="small")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="one timing round per model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-torchvision", action="store_true")
    parser.add_argument("--no-timm", action="store_true")
    parser.add_argument("--timm-all", action="store_true", help="every timm model instead of the spread")
    parser.add_argument("--json", help="write the rows to this file")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    rounds = 1 if ns.quick else ns.rounds

    builders: dict[str, Builder] = {}
    try:
        builders.update(transformers_builders(ns.size, ns.tokens))
    except ImportError:
        print("transformers is not installed: its models are skipped", file=sys.stderr)
    builders.update(torch_builders(ns.tokens))
    if not ns.no_torchvision:
        builders.update(torchvision_builders())
    if not ns.no_timm:
        builders.update(timm_builders(ns.timm_all))
    if ns.models:
        wanted = [w.strip() for w in ns.models.split(",") if w.strip()]
        builders = {k: v for k, v in builders.items() if any(w in k for w in wanted)}

    versions = [f"torch {torch.__version__}"]
    for package in ("transformers", "torchvision", "timm"):
        try:
            versions.append(f"{package} {__import__(package).__version__}")
        except ImportError:
            versions.append(f"{package} not installed")
    print(f"model zoo on {ns.device}, {torch.get_num_threads()} thread(s); " + ", ".join(versions))
    print("columns: status of module FLOPs, MACs, DMAs, operator FLOPs (ok = complete, PART = partial);")
    print("operator GFLOPs; module FLOPs / operator FLOPs; crawl_module time / plain no_grad forward time,")
    print("in wall-clock and in process CPU time (medians of interleaved rounds)")
    print()
    header()
    rows = []
    for name, builder in builders.items():
        row = analyse(name, builder, device=ns.device, rounds=rounds)
        rows.append(row)
        print_row(row)
        sys.stdout.flush()
        gc.collect()
    summary(rows)
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
