"""The largest size along one axis whose estimated step fits a budget: fitted, then confirmed.

:func:`largest_fitting` works in three stages:

1. **Fit**: the step is estimated at a few sizes (``fit_at``: the batch at 1 and 2; the sequence at
   a quarter, half and all of the factory's length), each phase's peak is fitted against the size
   (:mod:`.fits`: a line in the batch, a quadratic in the sequence) and the fit is solved for the
   largest size under the budget.
2. **Check the fit where it answers**: the step is estimated at that size. A step's peak is the
   largest of many moments, each growing at its own rate (at a small batch the backward's peak is
   where every gradient exists, at a large one where every activation still does), so a fit from
   small sizes can be off far from them; when it is off there by more than
   :data:`REFIT_TOLERANCE`, it is fitted again on sizes around that answer (half and all of it; a
   quarter, half and all along a sequence).
3. **Confirm**: the answer of the fit is estimated, with the size one above it. The answer stands
   only when the estimate at it fits and the estimate one above does not, so no answer rests on
   extrapolation alone. When they disagree, the bracket of sizes known to fit and not to fit
   shrinks -- by the secant through its two ends, by bisection when that stalls -- until the two
   are one apart, within :data:`MAX_ESTIMATES` estimates.

The fit reported is the last one, with its error at the estimate nearest the answer that it was not
fitted on; the FLOPs fit (from the first stage's sizes) with its error at the answer (or one above
it, when the answer is a size it was fitted on).

The categories at the peak (activations, gradients, ...) are fitted on the same sizes, but they are
a function of the size only while the moment of the peak stays where it is: at batch 1 the peak of
a small MLP's SGD step with weight decay is in the optimizer step, where every gradient exists, at
batch 2 in the backward, where most do not yet, so a line through the two says ``gradients = 140
KiB − 65.0 KiB × batch``. The peak's own fit is a line wherever the moment is (it is the largest of
the phases' lines); a category's curve is kept only where it **holds** (:func:`_contradiction`):
non-negative from the smallest size fitted on to the answer, and within :data:`REFIT_TOLERANCE` of
every estimate in that range it was not fitted on. The others are ``not_fitted``, with the size
that showed it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchscan_lsp.contract.format import byte_size
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.engine.training.estimator import Point
from torchscan_lsp.engine.training.fits import POWERS, Curve, fit, largest_within, relative_error

__all__ = ["MAX_ESTIMATES", "REFIT_TOLERANCE", "AxisAnswer", "largest_fitting"]

#: The most estimates one axis of one policy may take (fit points and confirmations included).
MAX_ESTIMATES = 16
#: A fit off by more than this (relative) where it puts the answer is fitted again around it.
REFIT_TOLERANCE = 0.01


@dataclass
class AxisAnswer:
    """The answer along one axis.

    Attributes:
        axis: ``batch`` or ``sequence``.
        largest: the largest size whose estimate fits (0 when none does), ``None`` when unknown.
        status: ``complete`` (confirmed by the estimate one above), ``partial`` (a lower bound: the
            search's ceiling fits, or the estimates ran out) or ``unavailable`` (with ``reason``).
        limit: what bounds it: ``budget``, ``ceiling``, ``model`` (the model refused the size
            above: ``reason``), ``does_not_fit`` (not even the smallest size), ``estimates``.
        at_largest, above, smallest: the estimates at the answer, one above, and at the smallest size.
        estimates: every estimate, by size.
        phase_curves, category_curves, flops_curve: the fitted curves (the categories that hold:
            see the module docstring); ``fitted_on`` the sizes the memory curves were fitted on.
        not_fitted: the categories whose curve did not hold, each ``{"curve", "size", "predicted",
            "estimated"}``: where it was negative or off (``estimated``: the estimate there, if any).
        held_out: the memory and FLOPs fits' errors at a size they were not fitted on.
    """

    axis: str
    largest: int | None = None
    status: str = "unavailable"
    limit: str | None = None
    reason: str | None = None
    at_largest: Point | None = None
    above: Point | None = None
    smallest: Point | None = None
    estimates: dict[int, Point] = field(default_factory=dict)
    phase_curves: dict[str, Curve] = field(default_factory=dict)
    category_curves: dict[str, Curve] = field(default_factory=dict)
    fitted_on: list[int] = field(default_factory=list)
    not_fitted: dict[str, dict[str, Any]] = field(default_factory=dict)
    flops_curve: Curve | None = None
    held_out: dict[str, Any] = field(default_factory=dict)

    def fit_record(self, symbol: str) -> dict[str, Any]:
        """The fit as JSON: curves (``memory.phases``, ``memory.categories`` that hold, ``flops``),
        ``memory.fitted_on`` and ``memory.not_fitted``, their texts with ``symbol`` for the size,
        ``held_out`` errors, and ``quadratic_share``: the share of the FLOPs' ``T²`` term at the
        answer (``None`` for a line)."""
        texts = []
        shown = self.at_largest or self.smallest
        phase = shown.peak_phase if shown else None
        if phase in self.phase_curves:
            texts.append(self.phase_curves[phase].text(f"peak ({phase.replace('_', ' ')})", symbol, "bytes")
                         + f", fitted at {self._sizes(self.fitted_on)}")
        texts += [curve.text(name.replace("_", " "), symbol, "bytes") for name, curve in self.category_curves.items()
                  if any(abs(c) >= 1 for c, p in zip(curve.coefficients, curve.powers) if p)]
        if self.not_fitted and shown is not None:
            values = ", ".join(f"{name.replace('_', ' ')} {byte_size(shown.by_category.get(name, 0))}"
                               for name in self.not_fitted)
            texts.append(f"not fitted, as the moment of the peak moves with the {_NOUNS[self.axis][0]}: {values} "
                         f"at {self._sizes([shown.size])}")
        share = None
        if self.flops_curve is not None:
            texts.append(self.flops_curve.text("FLOPs", symbol, "FLOPs"))
            size = self.largest
            if 2 in self.flops_curve.powers and size and self.flops_curve(size) > 0:
                share = {"size": size, "share": self.flops_curve.term(2, size) / self.flops_curve(size)}
                texts.append(f"the {symbol}² term (attention's scores and weighted sums) at {symbol} = {size:,}: "
                             f"{100 * share['share']:.1f} % of the FLOPs")
        return {"memory": {"phases": {k: c.as_dict() for k, c in self.phase_curves.items()},
                           "categories": {k: c.as_dict() for k, c in self.category_curves.items()},
                           "fitted_on": list(self.fitted_on), "not_fitted": dict(self.not_fitted)},
                "flops": self.flops_curve.as_dict() if self.flops_curve else None,
                "texts": texts, "held_out": self.held_out, "quadratic_share": share}

    def _sizes(self, sizes: list[int]) -> str:
        """``"batch 13 and 27"``, ``"lengths 16, 32 and 64"``."""
        listed = [f"{size:,}" for size in sorted(sizes)]
        joined = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
        return f"{_NOUNS[self.axis][len(listed) > 1]} {joined}"


#: How the sizes of an axis are named: alone, and several.
_NOUNS = {"batch": ("batch", "batch"), "sequence": ("length", "lengths")}


class _Search:
    """The state of one search: the estimates so far, the sizes the model refused, the fit."""

    def __init__(self, estimate: Callable[[int, bool], Point], count_flops: Callable[[int], dict[str, Any]], *, axis: str,
                 kind: str, fit_at: list[int], budget: int, ceiling: int, flops_kind: str) -> None:
        self.answer = AxisAnswer(axis)
        self.errors: dict[int, str] = {}
        self._estimate, self._count_flops = estimate, count_flops
        self.kind, self.fit_at, self.budget, self.ceiling, self.flops_kind = kind, fit_at, budget, ceiling, flops_kind
        self.fitted_on: set[int] = set()
        self.predict: Callable[[int], float] | None = None

    def get(self, size: int, flops: bool = False) -> Point | None:
        """The estimate at ``size`` (made once; ``None`` when the model refused it), with its FLOPs
        when ``flops``."""
        point = self.answer.estimates.get(size)
        if point is None and size not in self.errors:
            try:
                point = self._estimate(size, flops)
            except Exception as error:  # noqa: BLE001 - a size the model refuses bounds the answer
                self.errors[size] = f"{type(error).__name__}: {error}"
                return None
            point.size = size
            self.answer.estimates[size] = point
        if point is not None and flops and point.flops is None:
            point.flops = self._count_flops(size)
        return point

    def fits(self, size: int) -> bool:
        point = self.answer.estimates.get(size)
        return point is not None and point.peak_bytes <= self.budget

    def bracket(self) -> tuple[int, int | None]:
        """``(good, bad)``: the smallest size known not to fit (or refused), and the largest known
        to fit below it."""
        known = set(self.answer.estimates) | set(self.errors)
        bad = min((size for size in known if not self.fits(size)), default=None)
        good = max(size for size in self.answer.estimates if self.fits(size) and (bad is None or size < bad))
        return good, bad

    def refit(self, sizes: list[int]) -> None:
        """Fit the curves on the estimates at ``sizes``."""
        points = [self.answer.estimates[size] for size in sizes if size in self.answer.estimates]
        try:
            curves = {name: fit(self.kind, [p.size for p in points], [p.phase_bytes[name] for p in points])
                      for name in points[0].phase_bytes}
            categories = {name: fit(self.kind, [p.size for p in points], [p.by_category.get(name, 0) for p in points])
                          for name in points[0].by_category if any(p.by_category.get(name) for p in points)}
        except (ValueError, IndexError):
            return
        self.answer.phase_curves, self.answer.category_curves = curves, categories
        self.fitted_on = {p.size for p in points}
        self.answer.fitted_on = sorted(self.fitted_on)
        self.predict = lambda x: max(curve(x) for curve in curves.values())

    def solve(self, low: int, high: int) -> int:
        """The fit's largest size under the budget in ``[low, high]`` (``low − 1``: none)."""
        return largest_within(self.predict, self.budget, low, high) if self.predict else low - 1

    def run(self) -> AxisAnswer:
        answer = self.answer
        first = self.get(self.fit_at[0], True)
        if first is None:
            answer.reason = f"the estimate at {answer.axis} {self.fit_at[0]} failed: {self.errors[self.fit_at[0]]}"
            return answer
        answer.smallest = first
        if first.peak_bytes > self.budget:
            answer.largest, answer.status, answer.limit = 0, "complete", "does_not_fit"
            return answer
        fitted = [p for p in (self.get(size, True) for size in self.fit_at) if p is not None]
        self._fit_flops(fitted)
        self.refit([p.size for p in fitted])
        good, bad = self.bracket()
        guess = self.solve(good + 1, (bad - 1) if bad is not None else self.ceiling)
        checked = self.get(guess) if guess > good else None
        if checked is not None and self.predict is not None:  # stage 2: the fit where it answers
            if abs(relative_error(self.predict(guess), checked.peak_bytes)) > REFIT_TOLERANCE:
                fractions = (2, 1) if self.kind == "linear" else (4, 2, 1)
                around = sorted({max(1, guess // f) for f in fractions})
                for size in around:
                    self.get(size)
                if len(around) >= len(POWERS[self.kind]):
                    self.refit(around)
        self._confirm()
        _conclude(answer, *self.bracket(), self.ceiling, self.errors, self.get)
        self._held_out_memory()
        self._keep_holding_categories()
        _flops_held_out(answer, set(self.fit_at), self.get)
        return answer

    def _held_out_memory(self) -> None:
        """The peak's fit against the estimate nearest the answer that it was not fitted on: the
        answer's own or the one above it, else (when the search's last estimates were the fit's own,
        at its ceiling) an earlier one."""
        answer = self.answer
        others = [size for size in answer.estimates if size not in self.fitted_on]
        if self.predict is None or not answer.largest or not others:
            return
        size = min(others, key=lambda s: (abs(s - answer.largest), s))
        answer.held_out["memory"] = _held_out(size, self.predict(size), answer.estimates[size].peak_bytes)

    def _keep_holding_categories(self) -> None:
        """Keep the category curves that hold from the smallest size fitted on to the answer (the
        module docstring); move the others to ``not_fitted``."""
        answer = self.answer
        if not answer.fitted_on:
            return
        low, high = min(answer.fitted_on), max(answer.largest or 0, *answer.fitted_on)
        checks = {size: point for size, point in sorted(answer.estimates.items())
                  if low <= size <= high and size not in self.fitted_on}
        kept = {}
        for name, curve in answer.category_curves.items():
            found = _contradiction(curve, name, checks, low, high, answer.estimates)
            if found is None:
                kept[name] = curve
            else:
                answer.not_fitted[name] = {"curve": curve.as_dict(), **found}
        answer.category_curves = kept

    def _confirm(self) -> None:
        """Stage 3: the fit's answer and the size above it, then the bracket closed by secant (by
        bisection after a step that did not halve it)."""
        first, halve = True, False
        while len(self.answer.estimates) + len(self.errors) < MAX_ESTIMATES:
            good, bad = self.bracket()
            high = bad - 1 if bad is not None else self.ceiling
            if good >= high:
                return
            if first:
                guess = self.solve(good + 1, high)
            elif halve and bad is not None:
                guess = (good + bad) // 2
            else:
                guess = self._secant(good, bad, high)
            if guess <= good or guess in self.answer.estimates or guess in self.errors:
                guess = good + 1 if first else min(high, max(good + 1, (good + (bad or 2 * good + 1)) // 2))
            first = False
            width = (bad or self.ceiling + 1) - good
            if self.get(guess) is not None and self.fits(guess) and guess + 1 <= high:
                self.get(guess + 1)  # one above: it closes the bracket if the guess was right
            good, bad = self.bracket()
            halve = (bad or self.ceiling + 1) - good > width // 2

    def _secant(self, good: int, bad: int | None, high: int) -> int:
        """The size where the line through the bracket's two estimates meets the budget (doubling
        while no size is known not to fit)."""
        if bad is None:
            return min(high, 2 * good)
        if bad not in self.answer.estimates:  # refused by the model: no peak to draw the line to
            return (good + bad) // 2
        low_peak, high_peak = self.answer.estimates[good].peak_bytes, self.answer.estimates[bad].peak_bytes
        if high_peak <= low_peak:
            return (good + bad) // 2
        guess = good + int((self.budget - low_peak) * (bad - good) / (high_peak - low_peak))
        return min(high, max(good + 1, guess))

    def _fit_flops(self, points: list[Point]) -> None:
        counted = [(p.size, metric_value(p.flops)) for p in points if p.flops is not None]
        if len(counted) >= len(POWERS[self.flops_kind]) and all(value is not None for _, value in counted):
            self.answer.flops_curve = fit(self.flops_kind, [s for s, _ in counted], [v for _, v in counted])


def largest_fitting(estimate: Callable[[int, bool], Point], count_flops: Callable[[int], dict[str, Any]], *, axis: str,
                    kind: str, fit_at: list[int], budget: int, ceiling: int, flops_kind: str) -> AxisAnswer:
    """The largest size along ``axis`` whose estimate fits ``budget`` bytes (see the module docstring).

    Args:
        estimate: ``estimate(size, flops) -> Point``, with its FLOPs when ``flops`` and they come in
            the same pass; may raise for a size the model refuses.
        count_flops: ``count_flops(size) -> training FLOPs metric``, for the sizes whose FLOPs the
            fit and the answer need and the estimate did not count.
        axis: ``batch`` or ``sequence`` (names only).
        kind: the memory fit (``linear`` or ``quadratic``); ``flops_kind`` the FLOPs fit.
        fit_at: the sizes first fitted on, smallest first (all at most the factory's own size).
        budget: bytes per device; ceiling: the largest size tried.
    """
    return _Search(estimate, count_flops, axis=axis, kind=kind, fit_at=fit_at, budget=budget, ceiling=ceiling,
                   flops_kind=flops_kind).run()


def _contradiction(curve: Curve, name: str, checks: dict[int, Point], low: int, high: int,
                   estimates: dict[int, Point]) -> dict[str, Any] | None:
    """Where the curve of the category ``name`` does not hold over ``[low, high]``, ``{"size",
    "predicted", "estimated"}``: the first estimate of ``checks`` it misses by more than
    :data:`REFIT_TOLERANCE` (and a byte), else the size where it is lowest, when it is negative
    there (by more than half a byte: rounding); ``None`` when it holds."""
    for size, point in checks.items():
        actual = point.by_category.get(name, 0)
        predicted = curve(size)
        if abs(predicted - actual) > max(1.0, REFIT_TOLERANCE * abs(actual)):
            return {"size": size, "predicted": predicted, "estimated": actual}
    size, lowest = curve.lowest(low, high)
    if lowest < -0.5:
        there = estimates.get(size)
        return {"size": size, "predicted": lowest, "estimated": there.by_category.get(name, 0) if there else None}
    return None


def _held_out(size: int, predicted: float, actual: float) -> dict[str, Any]:
    return {"size": size, "predicted": predicted, "estimated": actual, "relative_error": relative_error(predicted, actual)}


def _conclude(answer: AxisAnswer, good: int, bad: int | None, ceiling: int, errors: dict[int, str],
              get: Callable[..., Point | None]) -> None:
    answer.largest, answer.at_largest = good, get(good, True)
    if bad is not None and bad == good + 1:
        answer.above = answer.estimates.get(bad)
        answer.status = "complete"
        answer.limit = "model" if bad in errors else "budget"
        if bad in errors:
            answer.reason = f"the model refused {answer.axis} {bad}: {errors[bad]}"
    elif good == ceiling:
        answer.status, answer.limit = "partial", "ceiling"
    else:
        answer.status, answer.limit = "partial", "estimates"
        refused = f", the model refused {bad} ({errors[bad]})" if bad in errors else f", {bad} does not fit"
        answer.reason = f"{MAX_ESTIMATES} estimates did not close the bracket: {good} fits" + (refused if bad is not None else "")


def _flops_held_out(answer: AxisAnswer, fit_sizes: set[int], get: Callable[..., Point | None]) -> None:
    if answer.flops_curve is None or answer.largest is None:
        return
    size = answer.largest if answer.largest not in fit_sizes else (answer.largest + 1 if answer.above else None)
    point = get(size, True) if size is not None else None
    actual = metric_value(point.flops) if point is not None and point.flops is not None else None
    if actual:
        answer.held_out["flops"] = _held_out(size, answer.flops_curve(size), actual)
