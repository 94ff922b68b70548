"""The server's own log (stderr, the editor's output panel): what it leaves out."""

import logging

from torchscan_lsp.server.app import LateCancelFilter


def _record(message, *args):
    return logging.LogRecord("pygls.protocol.json_rpc", logging.WARNING, "json_rpc.py", 347, message, args, None)


def test_late_cancellations_are_not_logged_but_other_warnings_are():
    late = LateCancelFilter()
    # pygls's words for a $/cancelRequest that arrived after the answer
    assert not late.filter(_record('Cancel notification for unknown message id "%s"', 3))
    assert late.filter(_record("Ignoring notification for unknown method %r", "foo/bar"))
