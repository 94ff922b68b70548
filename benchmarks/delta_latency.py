"""What a delta costs on the save-to-hint path, once the baseline is known (issue 22).

Two language servers (``torchscan-lsp serve`` over stdio, each with its warm worker) watch two
copies of one git repository whose committed model is a Conv2d(3, 8, 3) on 3×32×32: one with
``torchscan.compareWith: "off"`` (the plain save-to-hint), one with ``"HEAD"``. Round after round
the same edit is saved in both (the convolution widened to 9, 10, 11... channels: a new analysis
each time, never a cached result) and the time from the save to the inlay hint that shows the new
numbers is taken: the parameter count alone (``off``), and with its delta against HEAD
(``+28·(c − 8)`` parameters, derived by hand: 27 weights and a bias per channel). The first round
of ``HEAD`` analyses the baseline and is left out; from then on the baseline is known, and the
delta costs one ``git rev-parse`` and one comparison after each analysis. Printed: the medians
side by side, their ratio, and the difference against the goal of 0.1 s.

Run: ``python benchmarks/delta_latency.py`` (``--rounds 10``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[1]

MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, {channels}, 3)

    def forward(self, x):
        return self.conv(x)


# torchscan: input_shape=(3, 32, 32)
def build():
    return Net()
"""
TARGET_LINE = 13  # 0-based: "def build():"
GOAL_S = 0.1


class Server:
    """One ``torchscan-lsp serve`` with ``compareWith`` set, on the workspace ``root``."""

    def __init__(self, root: Path, compare_with: str) -> None:
        self.root, self.path = root, root / "model.py"
        self.uri = self.path.as_uri()
        self.client = LanguageClient("torchscan-bench", "0")
        settings = {"compareWith": compare_with, "allowExecution": True, "cacheResults": False}

        @self.client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params):
            return [settings] * len(params.items)

        for method in (types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_CODE_LENS_REFRESH,
                       types.WINDOW_WORK_DONE_PROGRESS_CREATE, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
                       types.PROGRESS, "torchscan/status", types.WINDOW_LOG_MESSAGE):
            self.client.feature(method)(lambda params: None)

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "torchscan_lsp", "serve", cwd=str(REPO))
        capabilities = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
            configuration=True, inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)))
        await self.client.initialize_async(types.InitializeParams(capabilities=capabilities,
                                                                  root_uri=self.root.as_uri()))
        self.client.initialized(types.InitializedParams())
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=self.uri, language_id="python", version=1, text=self.path.read_text())))

    async def label(self) -> str:
        hints = await self.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=40, character=0))))
        return next((str(h.label) for h in hints or [] if h.position.line == TARGET_LINE), "")

    async def save_until(self, text: str, version: int, wanted: str, timeout_s: float = 300) -> float:
        """Save ``text`` and return the seconds until the target's hint starts with ``wanted``."""
        self.path.write_text(text)
        started = time.perf_counter()
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri)))
        while not (await self.label()).startswith(wanted):
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"no hint {wanted!r} after {timeout_s} s: {await self.label()!r}")
            await asyncio.sleep(0.005)
        return time.perf_counter() - started

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def repository(folder: Path) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[project]\nname = "bench"\n')
    (folder / "model.py").write_text(MODEL.format(channels=8))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "model"]):
        subprocess.run(["git", "-C", str(folder), "-c", "user.name=b", "-c", "user.email=b@example.org", *args],
                       check=True, capture_output=True)
    return folder


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchscan-delta-bench-") as scratch:
        plain = Server(repository(Path(scratch) / "plain"), "off")
        delta = Server(repository(Path(scratch) / "delta"), "HEAD")
        for server in (plain, delta):
            await server.start()
        times: dict[str, list[float]] = {"off": [], "HEAD": []}
        try:
            for round_ in range(args.rounds + 1):
                channels = 9 + round_
                params = 28 * channels
                text = MODEL.format(channels=channels)
                off = await plain.save_until(text, round_ + 2, f"{params} params ·")
                head = await delta.save_until(text, round_ + 2, f"{params} params (+{params - 28 * 8}) ·")
                if round_:  # the first round analysed the baseline
                    times["off"].append(off)
                    times["HEAD"].append(head)
        finally:
            for server in (plain, delta):
                await server.stop()
    off, head = statistics.median(times["off"]), statistics.median(times["HEAD"])
    print(f"save to hint, median of {args.rounds} saves (the baseline known):")
    print(f"  compareWith off : {off * 1000:7.1f} ms (the plain save-to-hint)")
    print(f"  compareWith HEAD: {head * 1000:7.1f} ms (the hint with its delta)")
    print(f"  ratio {head / off:.2f}; the delta adds {1000 * (head - off):+.1f} ms "
          f"(goal: at most +{1000 * GOAL_S:.0f} ms) -> {'met' if head - off <= GOAL_S else 'NOT met'}")
    pairs = [h - o for o, h in zip(times["off"], times["HEAD"])]
    print(f"  per-save difference: median {1000 * statistics.median(pairs):+.1f} ms, "
          f"max {1000 * max(pairs):+.1f} ms")
    print("  each save, off / HEAD (ms): " + ", ".join(f"{1000 * o:.0f}/{1000 * h:.0f}"
                                                      for o, h in zip(times["off"], times["HEAD"])))


if __name__ == "__main__":
    asyncio.run(main())
