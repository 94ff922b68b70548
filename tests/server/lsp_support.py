"""Helpers for the end-to-end tests: a workspace of small models, and a client that records
``torchscan/status`` notifications so a test can wait for an analysis to finish."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from torchscan_lsp.session.estimates import ESTIMATING

ANALYSIS_TIMEOUT_S = 120


class StatusLog:
    """Records ``torchscan/status`` notifications; :meth:`wait` waits for one about a file."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.changed = asyncio.Event()

    def __call__(self, params) -> None:
        self.events.append((params.uri, params.state, params.message))
        self.changed.set()

    def mark(self) -> int:
        """Index after the events seen so far (wait only for later ones)."""
        return len(self.events)

    async def wait(self, uri: str, states: set[str], since: int = 0, *, estimated: bool = False) -> tuple[str, str]:
        """The first status for ``uri`` with a state in ``states`` at or after index ``since``
        (with ``estimated``, one whose message no longer says a training estimate runs)."""
        async def look():
            index = since
            while True:
                for event_uri, state, message in self.events[index:]:
                    if event_uri == uri and state in states and not (estimated and ESTIMATING in message):
                        return state, message
                index = len(self.events)
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(look(), ANALYSIS_TIMEOUT_S)


def attach(client) -> StatusLog:
    """Give the test client handlers for the server's status and refresh requests."""
    log = StatusLog()
    client.feature("torchscan/status")(log)
    for method in (types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_CODE_LENS_REFRESH):
        client.feature(method)(lambda params: None)
    return log


def write(root: Path, name: str, source: str) -> Path:
    """Write a dedented source file into the workspace; returns its path."""
    path = root / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, marker: str) -> int:
    """The 1-based line of the first line of ``path`` containing ``marker``."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if marker in text:
            return number
    raise AssertionError(f"{marker!r} not in {path}")


def open_document(client, path: Path) -> str:
    """Send ``didOpen`` for ``path``; returns its URI."""
    uri = from_fs_path(str(path))
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_text(encoding="utf-8"))))
    return uri


async def analysed(client, log: StatusLog, path: Path, states=frozenset({"done", "failed"}), *,
                   estimated: bool = False) -> str:
    """Open ``path`` (once per session) and wait until its analysis ends (with ``estimated``, its
    training estimate too); returns the URI."""
    uri = from_fs_path(str(path))
    if any(event[0] == uri for event in log.events):
        await log.wait(uri, set(states), 0, estimated=estimated)
        return uri
    since = log.mark()
    open_document(client, path)
    await log.wait(uri, set(states), since, estimated=estimated)
    return uri


async def hints(client, uri: str, lines: int = 200) -> list[types.InlayHint]:
    """All inlay hints of the first ``lines`` lines."""
    result = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0))))
    return result or []


def labels_by_line(found: list[types.InlayHint]) -> dict[int, list[str]]:
    """Hint labels by 1-based line."""
    out: dict[int, list[str]] = {}
    for hint in found:
        out.setdefault(hint.position.line + 1, []).append(hint.label)
    return out


MODELS = {
    # Hand-derived numbers are in the tests that use each file.
    "conv.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(3, 32, 32)
        def build_conv():
            return nn.Conv2d(3, 8, 3)
    ''',
    "net.py": '''
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x)


        # torchscan: input_shape=(3, 8, 8)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1)
                self.flat = nn.Flatten()
                self.head = nn.Linear(256, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(3)])

            def forward(self, x):
                x = self.flat(self.conv(x))
                x = self.head(x)
                for block in self.blocks:
                    x = block(x)
                return x
    ''',
    "factory_raises.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(3,)
        def build_broken():
            layers = [nn.Linear(3, 3)]
            raise ValueError("no model for you")
    ''',
    "bad_shape.py": '''
        import torch.nn as nn


        class Mlp(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 4)

            def forward(self, x):
                return self.fc(x)


        # torchscan: input_shape=(3,)
        def build_mlp():
            return Mlp()
    ''',
    "bad_import.py": '''
        import torch.nn as nn
        import not_a_real_module_for_torchscan


        # torchscan: input_shape=(3,)
        def build():
            return nn.Linear(3, 3)
    ''',
    "bad_pragma.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(3,), colour="red"
        def build():
            return nn.Linear(3, 3)
    ''',
    "syntax.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(3,)
        def build(:
            return nn.Linear(3, 3)
    ''',
    "stale.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build_small():
            return nn.Linear(4, 2)
    ''',
    "blocks.py": '''
        import torch.nn as nn


        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "uses_blocks.py": '''
        import torch.nn as nn
        from blocks import Pair


        # torchscan: input_shape=(4,)
        def build_pairs():
            return nn.Sequential(Pair(), Pair())
    ''',
    "slow.py": '''
        import time

        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build_slow():
            time.sleep(90)
            return nn.Linear(4, 2)
    ''',
    "moved.py": '''
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 20)

            def forward(self, x):
                return self.fc(x)


        # torchscan: input_shape=(10,)
        def build_head():
            return Head()
    ''',
    "residual_blocks.py": '''
        import torch
        import torch.nn as nn


        class Res(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                out = self.fc(x)
                return torch.relu(out + x)
    ''',
    "uses_residual.py": '''
        import torch.nn as nn
        from residual_blocks import Res


        # torchscan: input_shape=(4,)
        def build_residual():
            return nn.Sequential(Res(), Res())
    ''',
    "pragma_edit.py": '''
        import torch.nn as nn


        # torchscan: input_shape=(4,)
        def build_small():
            return nn.Linear(4, 2)
    ''',
}


def make_workspace(root: Path) -> Path:
    """Write :data:`MODELS` into ``root``; returns ``root``."""
    for name, source in MODELS.items():
        write(root, name, source)
    return root
