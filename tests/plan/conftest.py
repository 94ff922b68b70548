"""Fixtures of the training-plan tests; the models and real measurements they share are in
plan_models.py (a module of its own: tests import it by a name no other folder's helpers take)."""

from __future__ import annotations

import pytest

from plan_models import load_example


@pytest.fixture(scope="session")
def llama_blocks():
    """``examples/llama_blocks.py`` as a module."""
    return load_example("llama_blocks")
