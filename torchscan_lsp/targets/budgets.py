"""The options of budgets and baselines: ``budget``, ``max_increase`` and ``compare_with``.

``budget={"params": "25M", "flops": "4.1 GFLOPs"}`` holds limits on the target's costs,
``max_increase={"flops": "5 %"}`` the growth allowed against its baseline, and
``compare_with="HEAD"`` names that baseline: ``"HEAD"``, another git ref (``"main"``,
``"origin/main"``, a commit), ``"save"`` (the target's previous analysis in this editor session) or
``"off"``. The amounts are parsed by :mod:`torchscan_lsp.contract.budget`; a ref is checked here by
its spelling only (whether it exists is git's to say, when the baseline is read).
"""

from __future__ import annotations

import re
from typing import Any

from torchscan_lsp.contract.budget import parse_budget, parse_max_increase

__all__ = ["COMPARISON_OPTIONS", "COMPARISON_HELP", "BASELINE_WORDS", "check_budget", "check_max_increase",
           "check_compare_with", "merge_limits"]

#: Options of budgets and baselines: read by the session, never by the worker.
COMPARISON_OPTIONS = ("budget", "max_increase", "compare_with")

#: Baselines that are no git ref: the previous analysis of this session, and none.
BASELINE_WORDS = ("save", "off")

COMPARISON_HELP = {
    "budget": 'a dict of limits, e.g. {"params": "25M", "flops": "4.1 GFLOPs", "peak_memory": "2 GiB", "latency": "5 ms"}',
    "max_increase": 'a dict of the growth allowed against the baseline, e.g. {"flops": "5 %", "params": "100k"}',
    "compare_with": '"HEAD" (default), another git ref such as "main", "save" (the previous analysis) or "off"',
}

# A git ref as people write one (branch, tag, remote branch, commit, HEAD~2, main@{1}); never an
# option of git's (a leading "-") and never a range ("a..b").
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@{}~^+-]*$")


def check_budget(value: Any) -> None:
    """Raise ``TypeError``/``ValueError`` (its message the user's) when ``value`` is no valid budget."""
    parse_budget(value)


def check_max_increase(value: Any) -> None:
    """Raise ``TypeError``/``ValueError`` when ``value`` is no valid growth limit."""
    parse_max_increase(value)


def check_compare_with(value: Any) -> None:
    """Raise ``ValueError`` when ``value`` is neither a baseline word nor spelled as a git ref."""
    if isinstance(value, str) and (value in BASELINE_WORDS or (_REF.match(value) and ".." not in value)):
        return
    raise ValueError(f"compare_with must be {COMPARISON_HELP['compare_with']}, got {value!r}")


def merge_limits(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own``'s limits over ``base``'s, key by key: a target's ``budget={"flops": ...}`` keeps the
    workspace's ``params`` limit."""
    return {**base, **own}
