"""``plan_training``: how far a model's training can go under a memory budget, policy by policy.

For each policy (a precision, an optimizer, activation checkpointing and sharding: every combination
of the plan's lists, :class:`~torchscan_lsp.contract.plan.PlanOptions`), the largest batch -- and,
when a sequence axis is named, the largest sequence length at batch 1 -- whose estimated training
step fits the budget per device, found by fitting each phase's peak against the size from a few
fake-tensor estimates and confirmed by an estimate at the answer and one above it
(:mod:`.search`); the peak by category at that size, the training FLOPs per step, the fits with
their error on a size they were not fitted on, and for sharded policies the per-rank figures and
the bytes of each collective.

Every figure carries its method: estimated on fake tensors with PyTorch's ``MemTracker``
(``FSDPMemTracker`` for FSDP2, under a fake process group), DDP's per-rank memory by the ZeRO stage
0 rule, and, when the budget is a GPU, the CUDA allocator's peak derived from its rules. A policy
the model cannot run, or whose estimate failed, says why instead of a number; a model that does not
fit even at batch 1 says so with that smallest peak and its largest category.

docs/measurement.md ("Planning a training run") explains the method and its limits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from torchscan_lsp.contract.format import byte_size
from torchscan_lsp.contract.metrics import metric_result
from torchscan_lsp.contract.plan import (DEFAULT_BUDGET, Budget, PlanOptionError, PlanOptions, Policy, parse_budget,
                                         parse_plan_options)
from torchscan_lsp.contract.training import TrainOptions, parse_train_options
from torchscan_lsp.engine.measuring.shared import measurement_context
from torchscan_lsp.engine.report import SCHEMA_VERSION, make_diagnostic
from torchscan_lsp.engine.training.estimate import estimate_failure
from torchscan_lsp.engine.training.estimator import NotApplicable, Point, PolicyEstimator
from torchscan_lsp.engine.training.parallel import processes_for, run_policies
from torchscan_lsp.engine.training.search import AxisAnswer, largest_fitting
from torchscan_lsp.engine.training.sharding import fake_process_group

__all__ = ["PlanError", "plan_training"]

Progress = Callable[[str, float], None]


class PlanError(RuntimeError):
    """Every policy of a plan failed: the first failure's reason, with its traceback (so that a
    worker locates it at the line of the model that raised)."""


def _budget(plan: PlanOptions, memory_budget: Any) -> tuple[Budget, str]:
    if plan.memory is not None:
        return parse_budget(plan.memory, name="plan option 'memory'"), "plan"
    if memory_budget is not None:
        return parse_budget(memory_budget, name="train_memory"), "train_memory"
    return parse_budget(DEFAULT_BUDGET), "default"


def _largest_category(point: Point) -> dict[str, Any]:
    name, size = max(point.by_category.items(), key=lambda item: item[1])
    return {"category": name, "bytes": size}


def _axis_record(answer: AxisAnswer, method: str, unit: str, symbol: str) -> dict[str, Any]:
    status = answer.status
    metric = (metric_result(status="unavailable", unit=unit, scope="workload", method=method) if answer.largest is None
              else metric_result(status=status, value=answer.largest if status == "complete" else None,
                                 known_value=answer.largest, unit=unit, scope="workload", method=method))
    shown = answer.at_largest or answer.smallest
    record: dict[str, Any] = {
        "largest": metric, "limit": answer.limit, "reason": answer.reason,
        "fits": answer.largest is not None and answer.largest > 0,
        "at_largest": answer.at_largest.as_dict() if answer.at_largest else None,
        "above": answer.above.as_dict() if answer.above else None,
        "smallest": answer.smallest.as_dict() if answer.smallest else None,
        "largest_category": _largest_category(shown) if shown else None,
        "training_flops": shown.flops if shown else None,
        "fit": answer.fit_record(symbol),
        "estimates": [point.as_dict() for _, point in sorted(answer.estimates.items())],
    }
    return record


def _sequence_sizes(base: int) -> list[int]:
    sizes = sorted({max(1, base // 4), max(1, base // 2), base})
    if len(sizes) < 3:
        raise NotApplicable(f"the sequence axis is {base} long; a fit in the sequence needs three lengths up to it "
                            "(give the factory a sequence of at least 3).")
    return sizes


def _empty_record(policy: Policy, reason: str | None = None) -> dict[str, Any]:
    return {"policy": policy.as_dict(), "status": "unavailable", "reason": reason,
            "batch": None, "sequence": None, "sharding": None}


def _costliest_first(policies: list[Policy]) -> list[int]:
    # sharded and checkpointed steps take the longest to estimate: handed out first, they do not
    # leave one process running alone at the end
    return sorted(range(len(policies)), key=lambda i: (policies[i].sharding == "single",
                                                       policies[i].checkpointing == "none"))


class _Planner:
    """The policies of one plan, run one after another."""

    def __init__(self, build: Callable[[], Any], options: TrainOptions, plan: PlanOptions, budget: Budget, *,
                 cuda: bool, input_shape: Any, input_dtype: Any, custom_mapping: Any, progress: Progress) -> None:
        self.build, self.options, self.plan, self.budget = build, options, plan, budget
        self.cuda, self.custom_mapping, self.progress = cuda, custom_mapping, progress
        self.inputs = {"input_shape": input_shape, "input_dtype": input_dtype}
        # training FLOPs do not depend on precision, optimizer or sharding (per rank, at its batch):
        # one count per checkpointing mode and size serves every policy
        self.flops: dict[tuple[str, int, int | None], dict[str, Any]] = {}
        self.count = 0
        self.failures: list[tuple[BaseException, str]] = []

    def _note(self, policy: Policy, what: str) -> None:
        self.progress(f"{policy.name}: {what}", 0.0)

    def _search(self, estimator: PolicyEstimator, policy: Policy, axis: str) -> AxisAnswer:
        scaler = estimator.scaler
        assert scaler is not None
        fixed = scaler.base_sequence if axis == "batch" else None
        same_pass = policy.checkpointing == "none" and policy.sharding != "fsdp"

        def size_of(size: int) -> tuple[int, int | None]:
            return (size, fixed) if axis == "batch" else (1, size)

        def estimate(size: int, flops: bool) -> Point:
            batch, sequence = size_of(size)
            self.count += 1
            self._note(policy, f"estimating {axis} {size}")
            point = estimator.estimate(batch, sequence, flops=flops and same_pass)
            if point.flops is not None:
                self.flops[(policy.checkpointing, batch, sequence)] = point.flops
            return point

        def count_flops(size: int) -> dict[str, Any]:
            batch, sequence = size_of(size)
            key = (policy.checkpointing, batch, sequence)
            if key not in self.flops:
                self._note(policy, f"counting FLOPs at {axis} {size}")
                self.flops[key] = estimator.count_flops(batch, sequence)
            return self.flops[key]

        if axis == "batch":
            return largest_fitting(estimate, count_flops, axis="batch", kind="linear", fit_at=[1, 2],
                                   budget=self.budget.bytes, ceiling=self.plan.max_batch, flops_kind="linear")
        limit = estimator.positions  # fake tensors never see a lookup past a position table fail
        ceiling = min(self.plan.max_sequence, limit[0]) if limit else self.plan.max_sequence
        answer = largest_fitting(estimate, count_flops, axis="sequence", kind="quadratic",
                                 fit_at=_sequence_sizes(scaler.base_sequence), budget=self.budget.bytes,
                                 ceiling=ceiling, flops_kind="quadratic")
        if limit and ceiling == limit[0] and answer.limit == "ceiling":
            answer.status, answer.limit = "complete", "model"
            answer.reason = f"{limit[1]}: the model takes no longer sequence"
        return answer

    def policy(self, policy: Policy, mesh: Any) -> dict[str, Any]:
        """The record of one policy (see :func:`plan_training`)."""
        record = _empty_record(policy)
        estimator = PolicyEstimator(self.build, policy, self.options, **self.inputs, sequence=self.plan.sequence,
                                    cuda=self.cuda, mesh=mesh, custom_mapping=self.custom_mapping)
        record["method"] = estimator.method
        started = time.perf_counter()
        try:
            self._note(policy, "building the model on fake tensors")
            with estimator:
                record["blocks"] = {"count": len(estimator.blocks),
                                    "type": type(estimator.blocks[0][1]).__name__ if estimator.blocks else None}
                batch = self._search(estimator, policy, "batch")
                record["batch"] = _axis_record(batch, estimator.method, "samples", "batch")
                answers = [batch]
                if self.plan.sequence is not None:
                    sequence = self._search(estimator, policy, "sequence")
                    record["sequence"] = _axis_record(sequence, estimator.method, "tokens", "T")
                    record["sequence"]["input"] = str(self.plan.sequence)
                    record["sequence"]["base"] = estimator.scaler.base_sequence
                    answers.append(sequence)
                record["batch"]["base_sequence"] = estimator.scaler.base_sequence
        except NotApplicable as error:
            record["reason"] = str(error)
            record["status"] = "not_applicable"
            return record
        except PlanOptionError as error:  # the option's error, the same in every policy: the plan raises it
            record["reason"] = record["option_error"] = str(error)
            return record
        except Exception as error:  # noqa: BLE001 - one policy failing fails alone
            record["reason"] = estimate_failure(error, measured=False)
            self.failures.append((error, record["reason"]))
            return record
        finally:
            record["elapsed_s"] = round(time.perf_counter() - started, 3)
        statuses = [answer.status for answer in answers]
        record["status"] = "complete" if all(s == "complete" for s in statuses) else (
            "unavailable" if all(s == "unavailable" for s in statuses) else "partial")
        record["reason"] = next((answer.reason for answer in answers if answer.reason), None)
        if policy.sharding != "single":
            record["sharding"] = self._sharding(policy, batch, estimator)
        return record

    def _sharding(self, policy: Policy, batch: AxisAnswer, estimator: PolicyEstimator) -> dict[str, Any]:
        point = batch.at_largest or batch.smallest
        largest = batch.largest or 0
        return {"ranks": policy.ranks, "kind": policy.sharding, "method": estimator.method,
                "global_batch": largest * policy.ranks,
                "communication": point.communication if point else None,
                "largest_by_category": point.largest if point else None,
                "gradient_buckets_bytes": estimator.buckets or None}


def _diagnostics(records: list[dict[str, Any]], budget: Budget) -> list[dict[str, Any]]:
    out = []
    for record in records:
        if record["status"] == "unavailable" and record.get("reason"):
            out.append(make_diagnostic("plan_policy_unavailable", "training_plan",
                                       f"{record['policy']['name']}: no estimate: {record['reason']}"))
    fitting = [r for r in records if (r.get("batch") or {}).get("fits")]
    estimated = [r for r in records if (r.get("batch") or {}).get("smallest")]
    if estimated and not fitting:
        smallest = min(estimated, key=lambda r: r["batch"]["smallest"]["peak_bytes"])
        point, category = smallest["batch"]["smallest"], smallest["batch"]["largest_category"]
        out.append(make_diagnostic(
            "plan_does_not_fit", "training_plan",
            f"no policy fits the budget of {byte_size(budget.bytes)} even at batch 1: the smallest peak is "
            f"{byte_size(point['peak_bytes'])} ({smallest['policy']['name']}), largest {category['category'].replace('_', ' ')} "
            f"{byte_size(category['bytes'])}."))
    return out


def plan_training(
    build: Callable[[], Any], *, train: Any = None, plan: Any = None, memory_budget: Any = None,
    input_shape: Any = None, input_dtype: Any = None, device: str | None = None, custom_mapping: Any = None,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Plan the training of the model ``build()`` returns (see the module docstring).

    Args:
        build: the zero-argument factory (:mod:`.step`); called once per policy, under fake tensors.
        train: the ``train={...}`` options (the optimizer's keyword arguments, the default optimizer).
        plan: ``True`` or the ``plan={...}`` options (:func:`~torchscan_lsp.contract.plan.parse_plan_options`).
        memory_budget: the budget when ``plan`` names none (``train_memory``: a size or a device name);
            without either, :data:`~torchscan_lsp.contract.plan.DEFAULT_BUDGET`.
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        device: the device the step is for when the budget names none (``cuda``: the CUDA
            allocator's derived peak and foreach); a named GPU budget is a CUDA device.
        custom_mapping: extra FLOP formulas.
        on_progress: ``on_progress(message, fraction done)`` before each policy and estimate.

    Returns:
        ``{"schema_version", "kind": "training_plan", "context", "options", "budget", "compared",
        "policies": [...], "diagnostics", "estimates", "elapsed_s"}``; each policy has ``policy``,
        ``status`` (``complete``, ``partial``, ``unavailable``, ``not_applicable``), ``reason``,
        ``method``, ``blocks``, ``batch`` and ``sequence`` (the axis records of docs/report-schema.md),
        ``sharding`` and ``elapsed_s``.

    Raises:
        TypeError, ValueError: bad ``train``, ``plan`` or budget options (before anything runs).
        PlanOptionError: a ``sequence`` the factory's inputs do not have (once it returned them).
        PlanError: every policy failed (the factory raised, the model fails on its inputs, or
            reads tensor values): the first failure's reason, with its traceback.
    """
    options = parse_train_options(train)
    plan_options = parse_plan_options(plan)
    budget, source = _budget(plan_options, memory_budget)
    target = device or options.device or "cpu"
    cuda = budget.device is not None or str(target).startswith("cuda")
    progress = on_progress or (lambda message, done: None)
    policies = plan_options.policies(options.optimizer)
    planner = _Planner(build, options, plan_options, budget, cuda=cuda, input_shape=input_shape,
                       input_dtype=input_dtype, custom_mapping=custom_mapping, progress=progress)
    started = time.perf_counter()
    sharded = any(policy.sharding == "fsdp" for policy in policies)
    processes = processes_for(len(policies))
    with (fake_process_group(plan_options.ranks) if sharded else contextlib.nullcontext()) as mesh:

        def run_one(index: int, note: Callable[[str], None]) -> tuple[dict[str, Any], int]:
            planner.progress, before = (lambda message, done: note(message)), planner.count
            return planner.policy(policies[index], mesh), planner.count - before

        def noted(index: int, message: str, finished: int) -> None:
            progress(message, finished / len(policies))

        ended: set[int] = set()

        def died(index: int, how: str) -> dict[str, Any]:
            ended.add(index)
            return _empty_record(policies[index], f"the process that estimated this policy ended ({how}).")

        found = run_policies(run_one, _costliest_first(policies), processes, noted, died)
        records = [found[index][0] for index in range(len(policies))]
        planner.count = sum(estimates for _, estimates in found.values())
        refused = [record.pop("option_error") for record in records if "option_error" in record]
        if refused:
            raise PlanOptionError(refused[0])
        if all(record["status"] == "unavailable" for record in records):
            # the model fails whatever the policy: an error, not a table of blanks (where it raised);
            # a policy that failed in another process runs again here, to raise with its traceback
            failed = [index for index in range(len(policies)) if index not in ended]
            if not planner.failures and failed:
                planner.progress = lambda message, done: None
                planner.policy(policies[failed[0]], mesh)
            if planner.failures:
                error, reason = planner.failures[0]
                raise PlanError(reason).with_traceback(error.__traceback__) from error
    progress("done", 1.0)
    compared = "CUDA allocated peak (derived)" if cuda else "tensor bytes at the peak"
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "training_plan",
        "context": measurement_context(),
        "options": {**plan_options.as_dict(), "train": options.as_dict(), "device": "cuda" if cuda else str(target)},
        "budget": {"bytes": budget.bytes, "device": budget.device, "text": budget.text, "source": source},
        "compared": compared,
        "policies": records,
        "diagnostics": _diagnostics(records, budget),
        "estimates": planner.count,
        "elapsed_s": round(time.perf_counter() - started, 3),
    }
