"""What ``scan`` and ``check`` share on the command line: their paths, the workspace and limit
flags with one help text each, and what a path without targets is told.

A path that does not exist and a limit that is not a positive number are usage errors: argparse
reports them naming the argument (``argument --timeout: ...``) and the exit status is 2, before
anything runs.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from torchscan_lsp.session.settings import Settings

__all__ = ["NO_TARGET", "ROOT_HELP", "add_paths", "add_workspace_arguments", "no_target_message"]

ROOT_HELP = ("workspace root, for imports and the [tool.torchscan-lsp] defaults (default: the nearest folder "
             "at or above the first PATH that holds pyproject.toml or .git, else the current folder when it "
             "holds every PATH, else the first PATH's folder); a PATH outside it is analysed under the root it "
             "has alone")
"""The one rule of :func:`torchscan_lsp.session.workspace.find_root` (and of
:func:`~torchscan_lsp.session.workspace.file_root`), in words."""

NO_TARGET = ("no annotated model found; put '# torchscan: input_shape=(...)' on the line above a "
             "zero-argument model factory or nn.Module class")


def no_target_message(names: list[str], wanted: str | None) -> str:
    """What a file named on the command line is told when none of its targets is analysed: the
    target ``wanted`` is not among its ``names``, or it has none."""
    if wanted and names:
        return f"no target named '{wanted}' (targets here: {', '.join(names)})"
    return NO_TARGET


def _existing_path(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {text!r}")
    return path


def _positive(unit: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a positive number of {unit}, got {text!r}")
        return value

    return parse


def add_paths(parser: argparse.ArgumentParser, help: str) -> None:
    """The ``PATH...`` arguments: files or folders that exist."""
    parser.add_argument("paths", nargs="+", metavar="PATH", type=_existing_path, help=help)


def add_workspace_arguments(parser: argparse.ArgumentParser) -> None:
    """``--root``, ``--python``, ``--timeout`` and ``--memory-limit-mb``: what the editor's settings
    (``torchscan.python``, ``torchscan.timeoutSeconds``, ``torchscan.memoryLimitMb``) mean."""
    parser.add_argument("--root", metavar="DIR", help=ROOT_HELP)
    parser.add_argument("--python", metavar="PYTHON", help="interpreter that runs the analyses (default: this one)")
    parser.add_argument(
        "--timeout", type=_positive("seconds"), metavar="SECONDS",
        help="wall-clock limit of each target's analysis (default: the [tool.torchscan-lsp] timeout, else "
        f"{Settings.timeoutSeconds:g}); a target's own timeout option wins",
    )
    parser.add_argument(
        "--memory-limit-mb", type=_positive("MiB"), metavar="MIB",
        help=f"memory limit of each target's analysis in MiB (default: {Settings.memoryLimitMb:g})",
    )
