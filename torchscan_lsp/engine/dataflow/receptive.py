"""Cumulative receptive field: the field of the model *up to* a tensor, composed along its data flow.

A :class:`Field` describes one tensor along its first spatial axis (dimension 2 of an ``N, C, L…``
layout), in elements of the tensor the chain started from (a model input):

* ``rf``: how many source elements one element of the tensor depends on, first to last;
* ``jump``: how many source elements lie between two neighbouring elements (the effective stride);
* ``padding``: where element 0's window starts, counted backwards from source element 0 (the
  effective padding).

Composition with a module-local ``(k_eff, s, p)`` (``k_eff = d·(k − 1) + 1``), from Araujo, Norris &
Sim, "Computing Receptive Fields of Convolutional Neural Networks", Distill 2019::

    rf' = rf + (k_eff − 1)·jump        jump' = jump·s        padding' = padding + p·jump

Transposed convolutions give ``s = 1/stride`` and compose the same way (see
``formulas.conv.rf_convtransposend``). Values are kept as exact fractions and reported as ints when
integral, floats otherwise.

Merging branches (an element-wise ``add``, a channel ``cat``) takes the union of the branches'
windows: for output element ``i``, the window of a branch of the same length starts at
``i·jump − padding`` and spans ``rf`` elements; a broadcast branch (length 1) has one fixed window.
The union's extent is a convex function of ``i``, so its largest value is at ``i = 0`` or
``i = n − 1``. When positional branches have different jumps the union is not a single field: the
result is ``partial``, with the largest branch ``rf`` as a lower bound.

A tensor whose positions were *folded* into its feature axis (``flatten(1)`` of an ``N, C, L`` map,
``nn.Flatten``) keeps its field while only element-wise work follows; a module that mixes the
feature axis (``nn.Linear``, ``nn.LayerNorm``, softmax) then depends on every folded position:
``rf' = rf + (n − 1)·jump``, ``jump' = n·jump`` — the field of a global pool over ``n`` positions.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

from torch import nn

from torchscan_lsp.engine.report import METHOD_MODULE_FORMULA, metric_result

__all__ = [
    "CUMULATIVE_METRICS",
    "LOCAL_METRICS",
    "Field",
    "SOURCE",
    "CONSTANT",
    "compose",
    "fold_into_features",
    "mix_folded",
    "union",
    "number",
    "field_metrics",
    "mixes_feature_axis",
]

#: Cumulative metrics of a leaf call (the reference's names, now cumulative).
CUMULATIVE_METRICS = ("receptive_field", "effective_stride", "effective_padding")
#: Module-local metrics kept beside them: kernel extent, stride and padding of the module alone.
LOCAL_METRICS = ("local_receptive_field", "local_stride", "local_padding")

COMPLETE, PARTIAL, UNAVAILABLE = "complete", "partial", "unavailable"


class Field(NamedTuple):
    """The cumulative receptive field of one tensor (see the module docstring).

    ``rf``, ``jump``, ``padding``: ints, or exact :class:`~fractions.Fraction` values after a
    fractional stride. ``status``: ``complete`` (all three exact), ``partial`` (``rf`` is a lower
    bound, the other two unknown) or ``unavailable`` (nothing known). ``cause``: why it is not
    complete — a sentence naming the module or operator where the chain broke; ``None`` when
    complete. ``folded``: the number of positions folded into the feature axis, or ``None``.
    (A named tuple: one is built per module call, so construction must be cheap.)
    """

    rf: Any = 1
    jump: Any = 1
    padding: Any = 0
    status: str = COMPLETE
    cause: str | None = None
    folded: int | None = None

    @staticmethod
    def unavailable(cause: str) -> Field:
        """No field: ``cause`` says where and why the data flow could not be followed."""
        return Field(1, 1, 0, UNAVAILABLE, cause)


#: The field of a model input: a chain starts here.
SOURCE = Field()
#: A parameter, buffer, one-element tensor or created constant: depends on no input element. Told
#: apart from :data:`SOURCE` by identity (``field is CONSTANT``); it starts a fresh chain when a
#: module reads it, and adds nothing when merged with a branch.
CONSTANT = Field()


def _exact(value: Any) -> Any:
    """An int, or an exact Fraction for a non-integral float (``1/3`` from a float stride stays 1/3)."""
    if type(value) is int:
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return Fraction(value).limit_denominator(1 << 20)
    return value


def number(value: Any) -> int | float:
    """A JSON number: an int when ``value`` is integral, else a float."""
    if type(value) is int:
        return value
    value = Fraction(value)
    return int(value) if value.denominator == 1 else float(value)


def compose(field: Field, local: tuple[Any, Any, Any]) -> Field:
    """``field`` followed by a module with module-local ``(k_eff, s, p)``.

    A partial field stays partial with the same lower bound (a module never shrinks the field, and
    its growth depends on the unknown jump); an unavailable one stays unavailable.
    """
    if field.status != COMPLETE:
        return field
    k, s, p = local
    if k == 1 and s == 1 and p == 0:  # point-wise: nothing changes (most calls)
        return field
    k, s, p = _exact(k), _exact(s), _exact(p)
    jump = field.jump
    return Field(field.rf + (k - 1) * jump, jump * s, field.padding + p * jump, COMPLETE, None, field.folded)


def fold_into_features(field: Field, positions: int) -> Field:
    """The spatial axis of ``positions`` elements was folded into the feature axis (a flatten)."""
    if field.status != COMPLETE or field.folded is not None:
        return field
    return field._replace(folded=positions)


def mix_folded(field: Field) -> Field:
    """A module mixed the feature axis of a folded tensor: each output depends on every position."""
    if field.status != COMPLETE or field.folded is None:
        return field
    n = field.folded
    return Field(field.rf + (n - 1) * field.jump, field.jump * n, field.padding)


def union(branches: list[tuple[Field, int]], length: int, where: str) -> Field:
    """Merge branches element-wise into an output of ``length`` positions.

    ``branches``: ``(field, n)`` per input, ``n`` its length along the first spatial axis (1 when
    broadcast). ``where`` names the operator and container, for the cause of a non-exact result.
    Unavailable branches, and positional branches of different jumps, make the result ``partial``
    (largest known ``rf`` as a lower bound) or ``unavailable`` (nothing known).
    """
    known = [(f, n) for f, n in branches if f.status == COMPLETE]
    lower = max((f.rf for f, _ in branches if f.status != UNAVAILABLE), default=None)
    broken = next((f for f, _ in branches if f.status != COMPLETE), None)
    folded = {f.folded for f, _ in known}
    positional = [f for f, n in known if n == length and length > 1]
    jumps = {f.jump for f in positional}
    if broken is None and len(jumps) <= 1 and len(folded) == 1:
        jump = jumps.pop() if jumps else known[0][0].jump

        def window(f: Field, n: int, i: int) -> tuple[Fraction, Fraction]:
            start = (i if n == length else 0) * f.jump - f.padding
            return start, start + f.rf - 1

        extents = []
        starts = []
        for i in {0, max(length - 1, 0)}:
            ws = [window(f, n, i) for f, n in known]
            start, end = min(w[0] for w in ws), max(w[1] for w in ws)
            extents.append(end - start + 1)
            if i == 0:
                starts.append(start)
        return Field(max(extents), jump, -starts[0], COMPLETE, None, folded.pop())
    if broken is not None:
        cause = broken.cause or f"a branch merged by {where} has no receptive field"
    elif len(folded) > 1:
        cause = f"{where} merges a tensor whose positions were folded into features with one whose were not"
    else:
        cause = f"{where} merges branches of different effective strides ({', '.join(str(number(j)) for j in sorted(jumps))})"
    if lower is None:
        return Field.unavailable(cause)
    return Field(lower, 1, 0, PARTIAL, cause)


#: Module classes whose output mixes the last (feature) axis, so folded positions all meet there.
_FEATURE_MIXERS: tuple[type, ...] = tuple(
    cls for cls in (nn.Linear, nn.Bilinear, getattr(nn, "RMSNorm", None), nn.LayerNorm) if cls is not None
)
_SOFTMAXES = (nn.Softmax, nn.LogSoftmax, nn.Softmin)


def mixes_feature_axis(module: nn.Module, ndim: int) -> bool:
    """Whether ``module`` combines the elements of its input's last axis (``ndim`` dimensions)."""
    if isinstance(module, _FEATURE_MIXERS):
        return True
    if isinstance(module, _SOFTMAXES):
        dim = module.dim
        return dim is None or dim in (-1, ndim - 1)
    return False


def field_metrics(field: Field) -> dict[str, dict[str, Any]]:
    """The three cumulative :class:`MetricResult` objects of ``field`` (unit ``elements``).

    Partial: ``receptive_field`` is partial with its lower bound; stride and padding unavailable.
    """
    if field.status == COMPLETE:
        # built directly (not through metric_result): three per leaf call, on the hot path
        rf, jump, padding = number(field.rf), number(field.jump), number(field.padding)
        method = METHOD_MODULE_FORMULA
        return {
            "receptive_field": {"status": COMPLETE, "value": rf, "known_value": rf, "unit": "elements",
                                "scope": "module_call", "method": method},
            "effective_stride": {"status": COMPLETE, "value": jump, "known_value": jump, "unit": "elements",
                                 "scope": "module_call", "method": method},
            "effective_padding": {"status": COMPLETE, "value": padding, "known_value": padding, "unit": "elements",
                                  "scope": "module_call", "method": method},
        }
    common = {"unit": "elements", "scope": "module_call", "method": METHOD_MODULE_FORMULA}
    out = {name: metric_result(status=UNAVAILABLE, **common) for name in CUMULATIVE_METRICS}
    if field.status == PARTIAL:
        out["receptive_field"] = metric_result(status=PARTIAL, known_value=number(field.rf), **common)
    return out
