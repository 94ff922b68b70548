"""A plan job: ``plan_training`` on the target's factory, with its progress written as it runs.

A job ``{"kind": "plan", ...}`` (the **Plan training** code lens, ``scan --plan``, or a target with
``plan`` options once its analysis is done) imports the module and calls the factory only under the
plan's fake tensors: the model is never built for real (a 7B-parameter model costs nothing), and no
analysis runs. Its options are the target's (``plan``, ``train``, ``train_memory``, ``input_shape``,
``dtype``, ``device``); ``plan`` unset means the plan's defaults.

While it runs, each step (a policy built, an estimate made) is one JSON line ``{"message": str,
"done": float}`` appended to the job's ``progress`` file, which the server side follows
(:func:`torchscan_lsp.worker.client.run`'s ``on_progress``) to report progress to the editor. An
error of the model in every policy is the job's ``forward`` error at the line that raised; a plan
option the factory's inputs contradict (a ``sequence`` naming no input) its ``options`` error at the
target's annotation, as the options checked before anything runs are.
"""

from __future__ import annotations

import json
import time
from typing import Any

from torchscan_lsp.contract.plan import PlanOptionError
from torchscan_lsp.worker.errors import Blame
from torchscan_lsp.worker.options import torch_dtype

__all__ = ["ProgressFile", "run_plan"]


class ProgressFile:
    """Appends progress lines to ``path`` (nothing without one), at most one per ``interval_s``
    seconds besides the first and the last."""

    def __init__(self, path: str | None, interval_s: float = 0.25) -> None:
        self.path, self.interval_s, self._last = path, interval_s, 0.0

    def __call__(self, message: str, done: float) -> None:
        now = time.monotonic()
        if self.path is None or (now - self._last < self.interval_s and 0.0 < done < 1.0):
            return
        self._last = now
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"message": message, "done": round(done, 4)}) + "\n")


def run_plan(factory: Any, options: dict[str, Any], *, blame: Blame, progress: str | None) -> dict[str, Any]:
    """The plan report of the target ``factory`` under the job's ``options``.

    Raises:
        JobError: of kind ``forward`` when the model failed in every policy (at the innermost
            workspace frame of its first error); of kind ``options`` at the annotation when the
            factory's inputs contradict a plan option.
    """
    from torchscan_lsp.engine.training import plan_training

    train = {key: value for key, value in (options.get("train") or {}).items() if value is not None}
    shape, dtype = options.get("input_shape"), options.get("dtype")
    plan = options.get("plan")
    try:
        return plan_training(
            factory, train=train, plan=None if plan is True else plan, memory_budget=options.get("train_memory"),
            input_shape=shape, input_dtype=torch_dtype(dtype) if dtype is not None and shape is not None else None,
            device=train.get("device") or options.get("device"), on_progress=ProgressFile(progress),
        )
    except PlanOptionError as error:
        raise blame.options_error(str(error)) from None
    except Exception as error:  # noqa: BLE001 - located at the line of the model that raised
        raise blame.error_from("forward", error) from None
