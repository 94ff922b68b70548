"""The HTML report opened in headless Chromium: the totals render and nothing is fetched.

Needs Debian's ``chromium`` (``scripts/install-test-tools.sh`` installs it); skipped, with the reason,
only when no Chromium binary is on PATH.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from torchscan_lsp.engine.reporting.html import render_report

CHROMIUM = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class _TextOf(HTMLParser):
    """Collects the text inside the element with a given id, and the document title."""

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self.element_id, self.depth, self.parts, self.title, self._in_title = element_id, 0, [], "", False

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += 1
        elif dict(attrs).get("id") == self.element_id:
            self.depth = 1
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
        self._in_title = False

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)
        if self._in_title:
            self.title += data


def _open(path, tmp_path):
    netlog = tmp_path / "netlog.json"
    result = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--log-net-log={netlog}", "--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, json.loads(netlog.read_text(encoding="utf-8"))


def _page_requests(netlog) -> set[str]:
    """URLs the page asked for: requests whose isolation key is the file:// document.

    Chromium's own background traffic (update checks) has another isolation key and is ignored.
    """
    urls = set()
    for event in netlog.get("events", []):
        params = event.get("params") or {}
        key = f"{params.get('network_isolation_key', '')} {params.get('site_for_cookies', '')}"
        if "url" in params and "file://" in key:
            urls.add(params["url"])
    return urls


def test_chromium_renders_the_totals_and_fetches_nothing(tmp_path, conv_report):
    path = render_report(conv_report, tmp_path / "report.html")
    dom, netlog = _open(path, tmp_path)
    parser = _TextOf("totals")
    parser.feed(dom)
    totals = " ".join(" ".join(parser.parts).split())
    assert parser.title == "Analysis of torch.nn.modules.conv.Conv2d"
    for snippet in ("parameters complete 224 elements", "module_flops complete 388,800 FLOPs", "macs complete 194,400 MACs", "dmas complete 201,824 DMAs"):
        assert snippet in totals
    assert _page_requests(netlog) == set()


def test_chromium_runs_no_model_markup(tmp_path, evil_report, evil_text):
    """The escaped model strings stay text: no element, no request to the URL they contain."""
    path = render_report(evil_report, tmp_path / "evil.html")
    dom, netlog = _open(path, tmp_path)
    assert "<img" not in dom and "<script" not in dom.lower()
    parser = _TextOf("title")
    parser.feed(dom)
    assert "".join(parser.parts) == f"Analysis of models.{evil_text}"
    assert _page_requests(netlog) == set()


def test_the_request_check_sees_a_page_fetch(tmp_path):
    """Guards the check above: a page that does fetch is caught by _page_requests."""
    page = tmp_path / "fetching.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"></body></html>', encoding="utf-8")
    _dom, netlog = _open(page, tmp_path)
    assert _page_requests(netlog) == {"http://127.0.0.1:9/x.png"}


class _Chart(HTMLParser):
    """The roofline chart's ``<svg>`` attributes and its circles, as Chromium laid out the page."""

    def __init__(self) -> None:
        super().__init__()
        self.svg, self.circles, self.layer, self.roof = None, [], None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and attrs.get("id") == "roofline-chart":
            self.svg = attrs
        elif tag == "g" and "data-layer" in attrs:
            self.layer = attrs["data-layer"]
        elif tag == "circle" and self.svg is not None:
            self.circles.append((self.layer, attrs["class"], float(attrs["cx"]), float(attrs["cy"])))
        elif tag == "path" and attrs.get("id") == "roofline-roof":
            self.roof = attrs["d"]


def test_chromium_draws_the_roofline_chart(tmp_path):
    """Conv2d(3, 8, 3) then ReLU on a 1 x 3 x 32 x 32 input, on the H100 SXM (67 TFLOP/s, 3.35 TB/s):
    the convolution at 388,800 FLOPs over 41,984 B, the ReLU at 7,200 FLOPs over 57,600 B (derived
    in tests/cli/test_scan_roofline.py), both memory-bound, so each sits on the bandwidth's slope at
    intensity x 3.35e12 FLOP/s; the convolution timed at 100 µs is a dot at 388,800 / 1e-4 FLOP/s."""
    import math

    import torch
    from torch import nn

    from torchscan_lsp import crawl_module
    from torchscan_lsp.engine.reporting.roofline import measured_ceilings, roofline_report, table_ceilings

    torch.manual_seed(0)
    report = crawl_module(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()), (3, 32, 32))
    roofline = roofline_report(report, table_ceilings("H100-SXM", "float32"))
    path = render_report(report, tmp_path / "roofline.html", roofline=roofline)
    dom, netlog = _open(path, tmp_path)
    chart = _Chart()
    chart.feed(dom)
    assert chart.svg is not None and _page_requests(netlog) == set()
    box = {key: float(chart.svg[f"data-{key}"]) for key in ("left", "top", "width", "height", "x-min", "x-max", "y-min", "y-max")}

    def at(intensity, flops_per_second):
        share_x = (math.log10(intensity) - math.log10(box["x-min"])) / (math.log10(box["x-max"]) - math.log10(box["x-min"]))
        share_y = (math.log10(flops_per_second) - math.log10(box["y-min"])) / (math.log10(box["y-max"]) - math.log10(box["y-min"]))
        return box["left"] + box["width"] * share_x, box["top"] + box["height"] * (1 - share_y)

    expected = {"0#0": at(388800 / 41984, 388800 / 41984 * 3.35e12), "1#0": at(7200 / 57600, 7200 / 57600 * 3.35e12)}
    drawn = {layer: (x, y) for layer, kind, x, y in chart.circles if kind == "roof"}
    assert drawn.keys() == expected.keys()
    for layer, (x, y) in expected.items():
        assert drawn[layer] == (pytest.approx(x, abs=0.01), pytest.approx(y, abs=0.01)), layer
    # the roof bends at the ridge, 67e12 / 3.35e12 = 20 FLOPs per byte, at the peak
    ridge = at(20.0, 67e12)
    assert f"L{ridge[0]:.1f},{ridge[1]:.1f}" in chart.roof

    # measured on this machine: a filled dot where the call's achieved FLOP/s puts it
    machine = {"kind": "ceilings", "device": "cpu", "device_name": "a CPU", "dtype": "float32", "threads": 2,
               "last_level_cache": {"bytes": 32 << 20},
               "peak_flops": {"status": "complete", "value": 1e11, "known_value": 1e11, "unit": "FLOP/s",
                              "scope": "device", "method": "m"},
               "bandwidth": {"status": "complete", "value": 1e10, "known_value": 1e10, "unit": "bytes/s",
                             "scope": "device", "method": "m", "pattern": "copy"}}
    latency = {"status": "complete", "value": 1e-4, "known_value": 1e-4, "unit": "seconds", "scope": "module_call",
               "method": "torch.utils.benchmark.Timer"}
    timed = roofline_report(report, measured_ceilings(machine),
                            layer_latency={"device": "cpu", "layers": [{"path": "0", "call_index": 0,
                                                                        "metrics": {"latency": latency}}]})
    dom, _ = _open(render_report(report, tmp_path / "timed.html", roofline=timed), tmp_path)
    chart = _Chart()
    chart.feed(dom)
    box = {key: float(chart.svg[f"data-{key}"]) for key in ("left", "top", "width", "height", "x-min", "x-max", "y-min", "y-max")}
    (dot,) = [(x, y) for layer, kind, x, y in chart.circles if kind == "achieved"]
    assert dot == tuple(pytest.approx(v, abs=0.01) for v in at(388800 / 41984, 388800 / 1e-4))
