"""Shared models of the training-step tests: the hand-written Llama blocks of ``examples/``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama_blocks.py"


def _load_llama_blocks():
    spec = importlib.util.spec_from_file_location("llama_blocks_example", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def llama_blocks():
    """``examples/llama_blocks.py`` as a module (``LlamaBlocks``, ``LLAMA_7B``, ``parameter_count``)."""
    return _load_llama_blocks()
