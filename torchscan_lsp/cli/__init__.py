"""The ``torchscan-lsp`` command line: ``serve``, ``scan`` and ``check``.

Each subcommand lives in its own module and registers its arguments through ``add_parser``; the
modules are imported lazily so that ``serve`` never imports torch.
"""

import argparse
import sys
from importlib import import_module

SUBCOMMANDS = {
    "serve": "torchscan_lsp.cli.serve",
    "scan": "torchscan_lsp.cli.scan",
    "check": "torchscan_lsp.cli.check",
}


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-parser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="torchscan-lsp",
        description="What a PyTorch model costs, in your editor and in your terminal.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        module = import_module(module_name)
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit code."""
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
