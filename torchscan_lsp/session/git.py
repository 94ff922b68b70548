"""Reading a workspace's files as a git revision holds them, without blocking the event loop.

Every call is one ``git`` process started with :func:`asyncio.create_subprocess_exec` and awaited,
killed when the awaiting task is cancelled or when it runs past :data:`GIT_TIMEOUT_S`. Nothing here
writes to the repository: ``GIT_OPTIONAL_LOCKS=0`` keeps git from refreshing the index while an
editor's own git integration may hold it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

__all__ = ["GIT_TIMEOUT_S", "Revision", "NoRevision", "resolve", "read_files"]

GIT_TIMEOUT_S = 10.0
"""How long one git call may take before it is killed (a repository on a stalled network drive)."""


@dataclass(frozen=True)
class Revision:
    """A commit of the repository a workspace lies in.

    Attributes:
        ref: the ref as written (``"HEAD"``, ``"main"``).
        commit: its commit's full hash.
        prefix: the workspace root relative to the repository's top folder (``""`` or ``"models/"``),
            so that a workspace-relative path names the file in the commit as ``prefix + path``.
    """

    ref: str
    commit: str
    prefix: str

    @property
    def short(self) -> str:
        """The commit's hash abbreviated to seven characters, as git prints it."""
        return self.commit[:7]


@dataclass(frozen=True)
class NoRevision:
    """Why a workspace has no such revision: ``reason``, one sentence for a hover; ``unknown``: the
    repository has commits, but none that this ref names (a misspelt branch, say)."""

    reason: str
    unknown: bool = False


async def _git(root: str, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """``git -C root ARGS``: its exit status, output and error output; ``(127, b"", ...)`` when
    git is not installed."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    try:
        process = await asyncio.create_subprocess_exec(
            "git", "-C", root, *args, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    except FileNotFoundError:
        return 127, b"", b"git is not installed"
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), GIT_TIMEOUT_S)
    except (asyncio.CancelledError, asyncio.TimeoutError):
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    return int(process.returncode or 0), out, err


async def resolve(root: str, ref: str) -> Revision | NoRevision:
    """The commit ``ref`` names in the repository that holds workspace ``root``, or why there is
    none: git is not installed, ``root`` is in no repository, the repository has no commit yet, or
    it has no such ref. ``ref`` must be spelled as a ref (:func:`~torchscan_lsp.targets.budgets.check_compare_with`)."""
    try:  # one call: the prefix, then the commit
        status, out, err = await _git(root, "rev-parse", "--show-prefix", "--verify", "--quiet", f"{ref}^{{commit}}")
    except asyncio.TimeoutError:
        return NoRevision(f"git did not answer within {GIT_TIMEOUT_S:g} s")
    if status == 127:
        return NoRevision("git is not installed")
    lines = out.decode("utf-8", "replace").splitlines()
    if status != 0 and not lines:
        return NoRevision("the workspace is not in a git repository")
    if status != 0 or len(lines) < 2:
        if ref == "HEAD":
            return NoRevision("the repository has no commit yet")
        return NoRevision(f"the repository has no commit named {ref!r}", unknown=True)
    return Revision(ref, lines[1].strip(), lines[0].strip())


async def read_files(root: str, revision: Revision, paths: list[str]) -> dict[str, str | None]:
    """The text of each workspace-relative path in ``revision`` (``None``: not in it, or not text),
    read by one ``git cat-file --batch``."""
    if not paths:
        return {}
    request = "".join(f"{revision.commit}:{revision.prefix}{path}\n" for path in paths).encode("utf-8")
    status, out, _ = await _git(root, "cat-file", "--batch", stdin=request)
    found: dict[str, str | None] = dict.fromkeys(paths)
    if status != 0:
        return found
    position = 0
    for path in paths:
        end = out.index(b"\n", position)
        header = out[position:end].split()
        position = end + 1
        if len(header) != 3:  # "<name> missing"
            continue
        size = int(header[2])
        blob = out[position:position + size]
        position += size + 1  # the object, then a newline
        if header[1] == b"blob":  # (not a folder)
            with contextlib.suppress(UnicodeDecodeError):
                found[path] = blob.decode("utf-8")
    return found
