"""What every front end must show for the example gallery (``expected.py``): the same assertions
for ``torchscan-lsp check`` and for headless Neovim, over what each of them received.

The expectations are the hand counts of ``expected.py``; the exact MACs come from ``scan --format
json``'s ``totals.operator_macs`` (the number the label rounds), the labels from the front end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gallery.expected import BUILT, GALLERY, HOVERS, LINES, MIXER, MIXER_UNCOUNTED, Expected
from workspace_files import line_of

REPO = Path(__file__).resolve().parents[2]
FILES = sorted({e.file for e in GALLERY})
LOWER_BOUND = "≥"

#: The only lines of the gallery that may show a lower bound: the mixer whose QR has no formula, the
#: class of that mixer, and MixerNet's own target line.
MIXER_LINES = ("class OrthogonalMixer", "self.mix = OrthogonalMixer(16)", "class MixerNet")


@dataclass
class Shown:
    """What one front end showed for the gallery's files.

    Attributes:
        hints: inlay-hint labels by (workspace-relative file, 1-based line).
        diagnostics: ``(file, 1-based line, severity, message)``, severity ``error``, ``warning``
            or ``info``.
        hovers: the hover markdown of the lines :func:`hover_lines` names, where the front end has hovers.
    """

    hints: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    diagnostics: list[tuple[str, int, str, str]] = field(default_factory=list)
    hovers: dict[tuple[str, int], str] = field(default_factory=dict)

    def add_hint(self, file: str, line: int, label: str) -> None:
        self.hints.setdefault((file, line), []).append(label)

    def of(self, file: str, severity: str) -> list[tuple[int, str]]:
        return [(line, message) for f, line, sev, message in self.diagnostics if f == file and sev == severity]


_CHECK_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):\d+: (?P<severity>error|warning|info|hint): (?P<message>.*)$")


def parse_check(stdout: str) -> Shown:
    """``torchscan-lsp check`` output as :class:`Shown`."""
    shown = Shown()
    for text in stdout.splitlines():
        found = _CHECK_LINE.match(text)
        assert found, f"not a check line: {text!r}"
        file, line, severity, message = found["file"], int(found["line"]), found["severity"], found["message"]
        if severity == "hint":
            shown.add_hint(file, line, message)
        else:
            shown.diagnostics.append((file, line, severity, message))
    return shown


def texts() -> dict[str, str]:
    return {file: (REPO / file).read_text(encoding="utf-8") for file in FILES}


def target_line(text: str, target: str) -> int:
    """The 1-based ``def``/``class`` line of a target (where its totals hint stands)."""
    found = re.search(rf"^(def|class) {re.escape(target)}\b", text, re.MULTILINE)
    assert found, target
    return text.count("\n", 0, found.start()) + 1


def check_target(shown: Shown, expected: Expected, totals: dict) -> None:
    """One gallery target: a complete headline with the hand-counted MACs, hints on its child lines,
    no warning and at most one information."""
    text = texts()[expected.file]
    line = target_line(text, expected.target)
    (label,) = shown.hints[(expected.file, line)]
    assert LOWER_BOUND not in label, label
    params, macs, flops = label.split(" · ")
    assert macs == expected.label, label
    assert totals["operator_macs"]["status"] == "complete"
    assert totals["operator_macs"]["value"] == expected.macs
    for needle in expected.children:
        labels = shown.hints.get((expected.file, line_of(text, needle)), [])
        assert labels, f"{expected.target}: no hint on {needle!r}"
        assert not [lab for lab in labels if LOWER_BOUND in lab], (needle, labels)
    if expected.shared:
        assert any("shared with" in lab for lab in shown.hints[(expected.file, line_of(text, expected.shared))])
    assert len([1 for at, _ in shown.of(expected.file, "info") if at == line]) <= 1


def check_mixer(shown: Shown, totals: dict) -> None:
    """MixerNet: exactly one warning, on the line that ran ``torch.linalg.qr``, with the known lower
    bound; a lower-bound headline with the MACs that were counted."""
    text = texts()[MIXER.file]
    qr = line_of(text, MIXER_UNCOUNTED)
    (warning,) = shown.of(MIXER.file, "warning")
    assert warning[0] == qr
    assert "aten.linalg_qr" in warning[1] and MIXER.label in warning[1], warning
    (label,) = shown.hints[(MIXER.file, target_line(text, MIXER.target))]
    assert label.split(" · ")[1] == MIXER.label, label
    assert totals["operator_macs"] == {**totals["operator_macs"], "status": "partial", "known_value": MIXER.macs}
    for needle in MIXER.children:
        assert shown.hints.get((MIXER.file, line_of(text, needle))), needle
    assert len([1 for at, _ in shown.of(MIXER.file, "info") if at == target_line(text, MIXER.target)]) <= 1


def check_files(shown: Shown) -> None:
    """Across the gallery's files: no error, no warning but MixerNet's, informations only on target
    lines, and no lower bound but on the mixer's lines (one status rule in what is shown)."""
    sources = texts()
    mixer = {line_of(sources[MIXER.file], needle) for needle in MIXER_LINES}
    for file in FILES:
        assert shown.of(file, "error") == [], file
        warnings = shown.of(file, "warning")
        assert [line for line, _ in warnings] == ([line_of(sources[file], MIXER_UNCOUNTED)] if file == MIXER.file else []), \
            (file, warnings)
        targets = {target_line(sources[file], e.target) for e in [*GALLERY, MIXER] if e.file == file}
        targets |= {target_line(sources[file], "TinyConvNet")} if file == "examples/cnn.py" else set()
        assert {line for line, _ in shown.of(file, "info")} <= targets, (file, shown.of(file, "info"))
        bounded = {line for (f, line), labels in shown.hints.items() if f == file and any(LOWER_BOUND in x for x in labels)}
        assert bounded <= (mixer if file == MIXER.file else set()), (file, sorted(bounded))


def check_lines(shown: Shown) -> None:
    """The hand-derived hints of lines written like public repositories' code (``LINES``): the names
    a line assigned, the results of plain-function calls, the first run of a loop's line and how
    its shapes varied, the work of a module called through ``.forward``; the model's building line
    (``BUILT``) with the target's parameters and FLOPs; a ModuleList comprehension's hint on its
    element's line, none on its bracket's."""
    sources = texts()
    for expected in LINES:
        labels = shown.hints.get((expected.file, line_of(sources[expected.file], expected.needle)), [])
        if expected.prefix:
            assert any(label.startswith(expected.label) for label in labels), (expected.needle, labels)
        else:
            assert expected.label in labels, (expected.needle, labels)
    for file, target, needle in BUILT:
        (totals,) = shown.hints[(file, target_line(sources[file], target))]
        params, _, flops = totals.split(" · ")
        assert shown.hints.get((file, line_of(sources[file], needle))) == [f"{params} · {flops}"], needle
    text = sources["examples/whisper.py"]
    bracket = line_of(text, "ResidualAttentionBlock(n_state, n_head, cross_attention=True)") - 1
    assert text.splitlines()[bracket - 1].strip() == "[" and (("examples/whisper.py", bracket) not in shown.hints)


def hover_lines() -> dict[str, list[int]]:
    """The 1-based lines whose hovers :func:`check_hovers` reads, by file."""
    sources = texts()
    found: dict[str, list[int]] = {}
    for file, needle, _, _ in HOVERS:
        found.setdefault(file, []).append(line_of(sources[file], needle))
    return found


def check_hovers(shown: Shown) -> None:
    """The hovers of ``HOVERS``: what each must say and must not."""
    sources = texts()
    for file, needle, says, never in HOVERS:
        text = shown.hovers.get((file, line_of(sources[file], needle)), "")
        for part in says:
            assert part in text, (needle, part, text)
        for part in never:
            assert part not in text, (needle, part, text)

