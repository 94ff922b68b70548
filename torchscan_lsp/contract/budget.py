"""Cost budgets: ``budget={...}`` and ``max_increase={...}`` and their amounts as text (standard
library only).

A target's (or ``[tool.torchscan-lsp.budget]``'s) ``budget`` holds the limits a team agreed on,
one per metric; ``max_increase`` the growth allowed against the target's baseline (the same target
at git ``HEAD``, or the ref ``compare_with`` names). The source reader validates them with
:func:`parse_budget` and :func:`parse_max_increase`; the session holds results against them. Each
amount is written as people write it:

========================  ==================================================  ================
key                       amounts                                             unit
========================  ==================================================  ================
``params``                ``25_000_000``, ``"25M"``, ``"1.5k params"``        elements
``flops``                 ``"4.1 GFLOPs"``, ``"800M"``, ``4100000000``        FLOPs
``macs``                  ``"2 GMACs"``                                       MACs
``peak_memory``           ``"2 GiB"``, ``"512 MB"`` (:func:`parse_bytes`)     bytes
``latency``               ``"5 ms"``, ``"250 µs"``, ``"0.5 s"``               seconds
``train_memory``          ``"24 GiB"``                                        bytes
========================  ==================================================  ================

SI prefixes are powers of 1000 (``k``, ``M``, ``G``, ``T``, ``P``); byte sizes follow
:func:`~torchscan_lsp.contract.training.parse_bytes`. A ``max_increase`` amount is either a share of
the baseline (``"5 %"``) or an amount in the metric's unit (``{"params": "100k"}``). Errors are
``ValueError`` (``TypeError`` for a value of the wrong type) whose message names the option, the
key and what to write instead.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from torchscan_lsp.contract.training import parse_bytes

__all__ = ["BUDGET_KEYS", "INCREASE_KEYS", "UNITS", "Amount", "parse_amount", "parse_budget",
           "parse_max_increase", "budget_problems"]

#: Every key of ``budget={...}``, in the order messages list them.
BUDGET_KEYS = ("params", "flops", "macs", "peak_memory", "latency", "train_memory")
#: The keys of ``max_increase={...}``: the analysis's own counts, which the baseline (an analysis,
#: never a measurement) also has.
INCREASE_KEYS = ("params", "flops", "macs")
#: The unit of each key's amounts (the unit word of its metric object).
UNITS = {"params": "elements", "flops": "FLOPs", "macs": "MACs", "peak_memory": "bytes", "latency": "seconds",
         "train_memory": "bytes"}

_EXAMPLES = {
    "params": '"25M", "1.5k params" or 25000000',
    "flops": '"4.1 GFLOPs", "800 MFLOPs" or 4100000000',
    "macs": '"2 GMACs", "500 MMACs" or 2000000000',
    "peak_memory": '"2 GiB", "512 MiB" or "4 GB"',
    "latency": '"5 ms", "250 µs" or "0.5 s"',
    "train_memory": '"24 GiB" or "80 GB"',
}
_PREFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_NAMES = {"params": "parameters", "flops": "FLOPs", "macs": "MACs"}
_WORDS = {"params": r"params?|parameters?", "flops": r"FLOPs?|flops?", "macs": r"MACs?|macs?"}
_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([kKMGTP]?)\s*([A-Za-z]*)\s*$")
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(s|ms|us|µs|μs|ns)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True)
class Amount:
    """One limit, parsed.

    Attributes:
        key: the metric it limits (one of :data:`BUDGET_KEYS`).
        value: the amount in the key's unit (:data:`UNITS`: elements, FLOPs, MACs, bytes, seconds),
            or, when ``relative``, the fraction of the baseline (``"5 %"`` is 0.05).
        relative: a share of the baseline (``max_increase`` only).
        text: the amount as it was written (``"4.1 GFLOPs"``), for messages.
    """

    key: str
    value: float
    relative: bool = False
    text: str = ""

    @property
    def unit(self) -> str:
        """The unit word of the metric the amount limits."""
        return UNITS[self.key]


def _expected(option: str, key: str, relative: bool) -> str:
    share = 'a share of the baseline such as "5 %", or ' if relative else ""
    return f"expected {share}{_EXAMPLES[key]}"


def _count(option: str, key: str, text: str, relative: bool) -> float:
    match = _COUNT.match(text)
    if match is None or (match[3] and not re.fullmatch(_WORDS[key], match[3])):
        found = f" (that is {match[3]}, not {_NAMES[key]})" if match is not None and match[3] else ""
        raise ValueError(f"{option} {key!r}: {text!r} is not an amount{found}; {_expected(option, key, relative)}.")
    return float(Decimal(match[1]) * _PREFIX[match[2]])  # exact: "4.1 GFLOPs" is 4,100,000,000


def _duration(option: str, key: str, text: str, relative: bool) -> float:
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{option} {key!r}: {text!r} is not a duration with its unit; "
                         f"{_expected(option, key, relative)}.")
    return float(match[1]) * _SECONDS[match[2]]


def parse_amount(key: str, value: Any, *, option: str = "budget", relative: bool = False) -> Amount:
    """``value`` (an int, float or string as the table above) as an :class:`Amount` of ``key``.

    ``relative`` allows a share of the baseline (``"5 %"``), as ``max_increase`` does. A number
    without a unit is in the key's unit (elements, FLOPs, MACs, bytes), except for ``latency``,
    which needs its unit (``5`` could be seconds or milliseconds).

    Raises:
        TypeError: ``value`` is neither a number nor a string.
        ValueError: not an amount, a unit of another metric, zero or negative; the message names
            ``option`` and ``key`` and gives examples.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{option} {key!r}: expected a number or a string, got {type(value).__name__}; "
                        f"{_expected(option, key, relative)}.")
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, str) and relative and _PERCENT.match(value):
        share = float(_PERCENT.match(value)[1]) / 100.0
        return Amount(key, share, True, value)
    if isinstance(value, str) and "%" in value:
        where = ("a share of the baseline belongs in max_increase" if not relative
                 else "a share is a number and %, such as \"5 %\"")
        raise ValueError(f"{option} {key!r}: {value!r}: {where}; {_expected(option, key, relative)}.")
    if UNITS[key] == "bytes":
        try:
            amount = float(parse_bytes(value, name=f"{option} {key!r}"))
        except (TypeError, ValueError) as error:
            share = '; or a share of the baseline such as "5 %"' if relative else ""
            raise type(error)(f"{str(error).rstrip('.')}{share}.") from None
    elif isinstance(value, str):
        amount = (_duration if key == "latency" else _count)(option, key, value, relative)
    elif key == "latency":
        raise ValueError(f"{option} {key!r}: {value!r} has no unit; {_expected(option, key, relative)}.")
    else:
        amount = float(value)
    if not math.isfinite(amount) or amount <= 0:
        raise ValueError(f"{option} {key!r}: expected a positive amount, got {text}.")
    return Amount(key, amount, False, text)


def _keys(option: str, value: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{option} must be a dict such as {{\"params\": \"25M\", \"flops\": \"4.1 GFLOPs\"}}, "
                        f"got {type(value).__name__}.")
    for key in value:
        if key not in allowed:
            raise ValueError(_unknown(option, key, allowed))
    return value


def _unknown(option: str, key: Any, allowed: tuple[str, ...]) -> str:
    if option == "max_increase" and key in BUDGET_KEYS:
        return (f"max_increase {key!r}: only {', '.join(INCREASE_KEYS)} are compared with the baseline (the baseline is "
                f"analysed, never measured); put a limit on {key} in budget instead")
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {option} key {key!r}{hint}; {option} keys: {', '.join(allowed)}"


def parse_budget(value: Any) -> dict[str, Amount]:
    """``budget={...}`` as one :class:`Amount` per key (``None``: no budget).

    Raises:
        TypeError, ValueError: not a dict, an unknown key, or a bad amount; several bad keys are one
            :class:`ValueError` that names each (:func:`budget_problems`).
    """
    if value is None:
        return {}
    _all_problems("budget", value)
    return {key: parse_amount(key, amount) for key, amount in _keys("budget", value, BUDGET_KEYS).items()}


def _all_problems(option: str, value: Any) -> None:
    # one error for every bad key, so that a pragma is fixed in one edit, not one key per analysis
    if isinstance(value, Mapping) and len(problems := budget_problems(option, value)) > 1:
        raise ValueError("; ".join(message.rstrip(".") for _, message in problems) + ".")


def parse_max_increase(value: Any) -> dict[str, Amount]:
    """``max_increase={...}`` as one :class:`Amount` per key: a share of the baseline
    (``relative``) or an amount in the key's unit (``None``: no limit)."""
    if value is None:
        return {}
    _all_problems("max_increase", value)
    return {key: parse_amount(key, amount, option="max_increase", relative=True)
            for key, amount in _keys("max_increase", value, INCREASE_KEYS).items()}


def budget_problems(option: str, value: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every bad key of a ``budget`` or ``max_increase`` dict, ``(key, message)`` each, where the
    parsers stop at the first (a ``[tool.torchscan-lsp.budget]`` table is told them all at once)."""
    allowed = BUDGET_KEYS if option == "budget" else INCREASE_KEYS
    problems = []
    for key, amount in value.items():
        if key not in allowed:
            problems.append((str(key), _unknown(option, key, allowed)))
            continue
        try:
            parse_amount(key, amount, option=option, relative=option == "max_increase")
        except (TypeError, ValueError) as error:
            problems.append((key, str(error)))
    return problems
