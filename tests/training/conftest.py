"""Shared models of the training-step tests: the hand-written decoders of ``examples/``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_example", _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def llama_blocks():
    """``examples/llama_blocks.py`` as a module (``LlamaBlocks``, ``LLAMA_7B``, ``parameter_count``)."""
    return _load_example("llama_blocks")


@pytest.fixture(scope="session")
def nanogpt():
    """``examples/gpt.py`` as a module (``GPT``, ``GPTConfig``): nanoGPT's layout, tied head."""
    return _load_example("gpt")
