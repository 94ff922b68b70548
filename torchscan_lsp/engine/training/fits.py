"""Fits of a step's memory and FLOPs against the size a plan scales, from a few estimates.

A step's memory is a sum of terms that grow with the batch ``B`` like ``B`` (activations: every
sample keeps its own) or not at all (parameters, gradients, optimizer state), so at a fixed
sequence length each phase's peak is a line ``a + b·B``; along a sequence axis ``T`` an attention
that keeps its ``T × T`` scores adds ``T²``, so a phase's peak is ``a + b·T + c·T²``. The step's
FLOPs are ``a + b·B`` per batch and ``a + b·T + c·T²`` along the sequence: the dense layers' work
grows like ``T``, attention's score and weighted-sum products like ``T²`` (2·T²·d multiply-adds per
layer and sample, forward), and the constant ``a`` is small and negative: a sum of ``n`` numbers is
``n − 1`` additions, so every reduction over the batch (a bias's gradient, the loss) counts one
addition less than its elements.

:func:`fit` solves the least-squares problem of a :class:`Curve` through the points (exactly
through them when there are as many as coefficients), by the normal equations; the plan holds each
fit against an estimate at a size it was not fitted on (:func:`relative_error`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torchscan_lsp.contract import format as fmt

__all__ = ["Curve", "fit", "largest_within", "relative_error"]

#: The powers of each kind of curve: a line and a quadratic.
POWERS = {"linear": (0, 1), "quadratic": (0, 1, 2)}


@dataclass(frozen=True)
class Curve:
    """``y = Σ coefficients[i] · x**powers[i]``.

    Attributes:
        kind: a key of :data:`POWERS`.
        coefficients: one per power, in the order of :data:`POWERS` (units of ``y`` per ``x**p``).
        points: how many points it was fitted on.
    """

    kind: str
    coefficients: tuple[float, ...]
    points: int

    @property
    def powers(self) -> tuple[int, ...]:
        """The powers of ``x``."""
        return POWERS[self.kind]

    def __call__(self, x: float) -> float:
        return sum(c * x ** p for c, p in zip(self.coefficients, self.powers))

    def term(self, power: int, x: float) -> float:
        """The value of the term of ``x**power`` at ``x`` (0 without such a term)."""
        return sum(c * x ** p for c, p in zip(self.coefficients, self.powers) if p == power)

    def lowest(self, low: int, high: int) -> tuple[int, float]:
        """``(x, y)``: the integer ``x`` in ``[low, high]`` where the curve is lowest, and its value
        there -- an end, or for a parabola that opens upward the integer next to its vertex."""
        candidates = {low, high}
        c2 = self.term(2, 1.0)
        if c2 > 0:
            vertex = -self.term(1, 1.0) / (2 * c2)
            candidates |= {x for x in (int(vertex), int(vertex) + 1) if low <= x <= high}
        return min(((x, self(x)) for x in candidates), key=lambda item: item[1])

    def text(self, name: str, axis: str, unit: str) -> str:
        """``"activations = 1.20 MiB + 310 MiB × batch"``: each coefficient in ``unit`` (``bytes`` or
        ``FLOPs``), negligible terms (below a byte or a FLOP) left out."""
        symbol = {0: "", 1: f" × {axis}", 2: f" × {axis}²"}
        terms = []
        for coefficient, power in zip(self.coefficients, self.powers):
            if abs(coefficient) < 1:  # below a byte or a FLOP: rounding, not a term
                continue
            value = fmt.byte_size(abs(coefficient)) if unit == "bytes" else fmt.number(abs(coefficient), unit)
            sign = "−" if coefficient < 0 else "+"
            terms.append((sign, value + symbol[power]))
        if not terms:
            return f"{name} = 0"
        if len(terms) > 1 and terms[0][0] == "−":  # a negative constant reads better last
            terms.append(terms.pop(0))
        first = ("−" if terms[0][0] == "−" else "") + terms[0][1]
        return f"{name} = " + " ".join([first, *(f"{sign} {value}" for sign, value in terms[1:])])

    def as_dict(self) -> dict[str, object]:
        """JSON-safe fields: ``kind``, ``powers``, ``coefficients``, ``points``."""
        return {"kind": self.kind, "powers": list(self.powers), "coefficients": list(self.coefficients),
                "points": self.points}


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a 2x2 or 3x3 normal-equation system)."""
    n = len(vector)
    rows = [row[:] + [value] for row, value in zip(matrix, vector)]
    for column in range(n):
        pivot = max(range(column, n), key=lambda r: abs(rows[r][column]))
        rows[column], rows[pivot] = rows[pivot], rows[column]
        if rows[column][column] == 0:
            raise ValueError("the points do not determine the fit (too few distinct sizes).")
        for row in range(n):
            if row != column:
                factor = rows[row][column] / rows[column][column]
                rows[row] = [a - factor * b for a, b in zip(rows[row], rows[column])]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def fit(kind: str, xs: Sequence[float], ys: Sequence[float]) -> Curve:
    """The least-squares :class:`Curve` of ``kind`` through ``(xs[i], ys[i])``; the ``x`` are scaled
    to their largest for the solve, so that ``x²`` of a long sequence does not swamp the system.

    Raises:
        ValueError: fewer distinct ``x`` than coefficients.
    """
    powers = POWERS[kind]
    if len(set(xs)) < len(powers):
        raise ValueError(f"a {kind} fit needs {len(powers)} distinct sizes, got {sorted(set(xs))}.")
    unit = max(abs(x) for x in xs) or 1.0
    scaled = [x / unit for x in xs]
    basis = [[x ** p for p in powers] for x in scaled]
    normal = [[sum(row[i] * row[j] for row in basis) for j in range(len(powers))] for i in range(len(powers))]
    right = [sum(row[i] * y for row, y in zip(basis, ys)) for i in range(len(powers))]
    solved = _solve(normal, right)
    return Curve(kind, tuple(c / unit ** p for c, p in zip(solved, powers)), len(xs))


def relative_error(predicted: float, actual: float) -> float:
    """``(predicted − actual) / actual`` (0 when both are 0)."""
    if actual == 0:
        return 0.0 if predicted == 0 else float("inf")
    return (predicted - actual) / actual


def largest_within(value: Callable[[int], float], limit: float, low: int, high: int) -> int:
    """The largest integer ``x`` in ``[low, high]`` with ``value(x) <= limit``, for a ``value`` that
    does not decrease; ``low − 1`` when even ``low`` exceeds it (found by bisection)."""
    if value(low) > limit:
        return low - 1
    if value(high) <= limit:
        return high
    good, bad = low, high
    while bad - good > 1:
        middle = (good + bad) // 2
        if value(middle) <= limit:
            good = middle
        else:
            bad = middle
    return good
