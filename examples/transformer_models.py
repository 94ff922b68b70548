"""Transformer models built from the ``transformers`` library's own code, annotated for torchscan-lsp.

Each factory builds a small configuration with random weights (nothing is downloaded) and returns
``(model, (), kwargs)``: real inputs — token ids and an attention mask — instead of an
``input_shape``. Run

    torchscan-lsp scan examples/transformer_models.py

The modules themselves are defined inside ``transformers``, so the editor shows their numbers on the
factory lines here (the workspace lines that built and called them).
"""

import torch
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)

SEQUENCE_LENGTH = 32


def _tokens(vocab_size: int, length: int = SEQUENCE_LENGTH) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic token ids (batch of one) and an all-ones attention mask."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, vocab_size, (1, length), generator=generator)
    attention_mask = torch.ones(1, length, dtype=torch.long)
    return input_ids, attention_mask


# torchscan: device="cpu"
def gpt2_small():
    """GPT-2 with a language-model head: 2 layers, 4 heads, 128-wide embeddings."""
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_head=4, n_embd=128, n_positions=128, vocab_size=1000, bos_token_id=0, eos_token_id=0
    )
    model = GPT2LMHeadModel(config)
    input_ids, attention_mask = _tokens(config.vocab_size)
    return model, (), {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}


# torchscan: device="cpu"
def bert_small():
    """A BERT encoder: 2 layers, 4 heads, hidden size 128, intermediate size 512."""
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        vocab_size=1000,
        max_position_embeddings=128,
    )
    model = BertModel(config)
    input_ids, attention_mask = _tokens(config.vocab_size)
    token_type_ids = torch.zeros_like(input_ids)
    return model, (input_ids,), {"attention_mask": attention_mask, "token_type_ids": token_type_ids}


# torchscan: device="cpu"
def llama_small():
    """A Llama-style decoder (RMSNorm, rotary embeddings, gated MLP): 2 layers, 4 heads, width 128."""
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=128,
    )
    model = LlamaForCausalLM(config)
    input_ids, attention_mask = _tokens(config.vocab_size)
    return model, (), {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}


# torchscan: device="cpu"
def mistral_small():
    """A Mistral decoder (grouped-query attention, gated MLP): 2 layers, 4 heads, width 128."""
    torch.manual_seed(0)
    config = MistralConfig(
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=128,
    )
    model = MistralForCausalLM(config)
    input_ids, attention_mask = _tokens(config.vocab_size)
    return model, (), {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}


# torchscan: device="cpu"
def t5_small():
    """A T5 encoder-decoder: 2 + 2 layers, 4 heads of 32, width 128, 32 source and 8 target tokens."""
    torch.manual_seed(0)
    config = T5Config(
        d_model=128, d_kv=32, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=1000
    )
    model = T5ForConditionalGeneration(config)
    input_ids, attention_mask = _tokens(config.vocab_size)
    decoder_input_ids, _ = _tokens(config.vocab_size, length=8)
    return model, (), {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "decoder_input_ids": decoder_input_ids,
        "use_cache": False,
    }
