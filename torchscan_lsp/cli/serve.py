"""``torchscan-lsp serve``: run the language server over stdio (default) or TCP.

This module and everything it imports must not import torch.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``serve`` subcommand to ``subparsers``."""
    parser = subparsers.add_parser("serve", help="run the language server (stdio by default)")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    transport.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT (for debugging)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Start the server with the chosen transport; returns the exit code."""
    from torchscan_lsp.session.preloading import start_warm_worker_early

    start_warm_worker_early()  # the warm worker imports torch while the server imports pygls
    from torchscan_lsp.server.app import main

    if args.tcp is not None:
        return main("tcp", args.tcp)
    return main("stdio")
