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
