"""The settings table of docs/server.md is the Python ``Settings`` (the VS Code extension's test
checks the same table against its package.json)."""

import dataclasses
import json
import re
from pathlib import Path

from torchscan_lsp.session.settings import SECTION, InlayHintSettings, Settings

SERVER_MD = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def documented() -> dict[str, tuple[str, object]]:
    text = SERVER_MD.read_text(encoding="utf-8")
    table = text.split("## Settings (section `torchscan`)")[1].split("\n## ")[0]
    rows = {}
    for name, kind, default in re.findall(r"^\| `(torchscan\.[\w.]+)` \| ([^|]+) \| ([^|]+) \|", table, re.MULTILINE):
        cell = default.strip().strip("`")
        value = json.loads(cell) if re.fullmatch(r'true|false|\d+(\.\d+)?|".*"', cell) else None
        rows[name] = (kind.strip(), value)
    return rows


def python_settings() -> dict[str, object]:
    settings = {}
    for field in dataclasses.fields(Settings):
        if field.name == "inlayHints":
            for hint in dataclasses.fields(InlayHintSettings):
                settings[f"{SECTION}.inlayHints.{hint.name}"] = hint.default
        else:
            settings[f"{SECTION}.{field.name}"] = field.default
    return settings


def test_the_table_lists_every_setting_with_its_default():
    rows, python = documented(), python_settings()
    assert sorted(rows) == sorted(python)
    for name, default in python.items():
        kind, written = rows[name]
        assert written == default, name  # None: a default in words ("the server's interpreter")
        expected = "bool" if isinstance(default, bool) else "number" if isinstance(default, (int, float)) else "string"
        assert kind.startswith(expected), (name, kind)


def test_the_headline_takes_one_of_its_words_and_names_the_setting_otherwise():
    from torchscan_lsp.session.settings import merge

    assert Settings().headline == "operators" and Settings().receptiveFieldNotes is False
    settings, problems = merge(Settings(), {"headline": "modules", "receptive_field_notes": True})
    assert (settings.headline, settings.receptiveFieldNotes, problems) == ("modules", True, [])
    settings, problems = merge(Settings(), {"headline": "formulas"})
    assert settings.headline == "operators"
    assert problems == ['setting torchscan.headline must be "operators" or "modules", got \'formulas\'']


def test_keep_warm_minutes_may_be_zero_but_not_negative():
    from torchscan_lsp.session.settings import merge

    assert merge(Settings(), {"keepWarmMinutes": 0}) == (dataclasses.replace(Settings(), keepWarmMinutes=0.0), [])
    settings, problems = merge(Settings(), {"keepWarmMinutes": -1})
    assert settings.keepWarmMinutes == 10.0
    assert problems == [f"setting {SECTION}.keepWarmMinutes must be a number, 0 or more, got -1"]
