"""The terminal table's diagnostics are cut at a word boundary, never in the middle of a name."""

from torchscan_lsp.engine.table import format_diagnostics


def test_a_long_message_is_cut_before_the_name_it_would_split():
    name = "aten._scaled_dot_product_flash_attention_for_cpu"
    diag = {"code": "uncounted_operator", "severity": "warning", "metric": "flops", "operator": name,
            "message": f"{name} was observed 12 time(s), but no FLOP formula is registered."}
    lines = format_diagnostics([diag], width=60)
    body = lines[1]
    # the message is 108 characters: the 48-character name, " was observed 12 time(s), ...".
    # Cut to 60, the cut (after character 59) falls inside "observed" (characters 54-61): it moves
    # back to the space before that word, so the line ends "... was…" and the name stays whole
    message = body.split("[flops]: ", 1)[1]
    assert message == f"{name} was…"
    assert len(message) <= 60
