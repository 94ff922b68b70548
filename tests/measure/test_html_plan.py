"""The HTML of a training plan: a table of policies, and each policy's memory against the batch,
drawn as inline SVG -- the estimates as bars stacked by category, the fitted peak as a dashed line,
the budget as a red line -- opened in headless Chromium, which fetches nothing.

The geometry is checked against the plan's own numbers: each bar stack's top lies where its
estimate's peak falls on the y axis, and the answer's stack stands below the budget line while the
stack of the batch one above it reaches over it."""

from __future__ import annotations

import re
import shutil

import pytest
from torch import nn

from torchscan_lsp.engine.reporting.html import render_report
from torchscan_lsp.engine.reporting.html.plan import _BOTTOM, _HEIGHT, _TOP
from torchscan_lsp.engine.training import plan_training

CHROMIUM = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def plan_report():
    def mlp():
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))

    return plan_training(mlp, plan={"precision": ["float32", "bfloat16"], "checkpointing": ["none", "blocks"]},
                         memory_budget="1 MiB", input_shape=(64,))


def _stacks(svg: str) -> dict[int, float]:
    """The top (smallest y) of each batch's stacked bars, by the batch named in the bars' titles."""
    tops: dict[int, float] = {}
    for y, batch in re.findall(r'<rect class="category [\w]+" x="[\d.]+" y="([\d.]+)"[^>]*><title>[^<]* at batch (\d+)</title>', svg):
        tops[int(batch)] = min(tops.get(int(batch), float("inf")), float(y))
    return tops


def test_each_policy_with_estimates_gets_a_chart_whose_bars_and_budget_line_match_the_plan(tmp_path, plan_report):
    page = render_report(plan_report, tmp_path / "plan.html").read_text(encoding="utf-8")
    assert page.count('<svg class="plan-chart"') == 2  # the two checkpointed policies say why instead
    assert page.count("the model has no repeated block to checkpoint") == 2
    budget = plan_report["budget"]["bytes"]
    for policy, svg in zip([p for p in plan_report["policies"] if p["batch"]], page.split('<svg class="plan-chart"')[1:]):
        batch = policy["batch"]
        points = batch["estimates"]
        top = max(budget, *(p["peak_bytes"] for p in points)) * 1.08
        plot = _HEIGHT - _BOTTOM - _TOP

        def y_of(size: float) -> float:
            return _TOP + plot * (1 - size / top)

        stacks = _stacks(svg.split("</svg>")[0])
        assert set(stacks) == {p["batch"] for p in points}
        for point in points:
            # a CPU step is held against its tensor bytes: the categories at the peak sum to it
            assert sum(point["by_category"].values()) == point["peak_bytes"]
            assert stacks[point["batch"]] == pytest.approx(y_of(point["peak_bytes"]), abs=0.2)
        line = float(re.search(r'<line class="budget" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)[1])
        assert line == pytest.approx(y_of(budget), abs=0.1)
        largest = batch["largest"]["value"]
        peaks = {p["batch"]: p["peak_bytes"] for p in points}
        assert peaks[largest] <= budget < peaks[largest + 1]
        # a sample is about a kilobyte, a fifth of a pixel here: the two stacks meet the line within
        # the 0.1 px the page rounds to, the answer's no higher, the next one's no lower (y grows down)
        assert stacks[largest] >= line - 0.1 and stacks[largest + 1] <= line + 0.1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_draws_the_plan_and_fetches_nothing(tmp_path, plan_report):
    from test_html_chromium import _open, _page_requests

    analysis_free = render_report(plan_report, tmp_path / "plan.html")
    dom, netlog = _open(analysis_free, tmp_path)
    assert dom.count("<svg") == 2 and 'class="budget"' in dom and 'class="fit"' in dom
    assert "<title>Training plan</title>" in dom or "Training plan" in dom
    assert _page_requests(netlog) == set()
