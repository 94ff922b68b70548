"""The HTML of a training step: a page of its own, or a section of the analysis page.

The step is ``nn.Linear(4, 2)`` under SGD on a batch of 2, estimated only: its peak of 136 bytes
holds parameters 40, temporaries 40, inputs 32 and activations 24 (tests/server/test_server_training.py
derives them), so the bars are 40 / 136 = 29.4 %, 32 / 136 = 23.5 % and 24 / 136 = 17.6 % of it.
"""

from __future__ import annotations

import pytest
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.engine.reporting.html import render_report, report_kind
from torchscan_lsp.engine.training import analyse_training_step


class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleDict({"<b>fc</b>": nn.Linear(4, 2)})

    def forward(self, x):
        return self.layers["<b>fc</b>"](x)


@pytest.fixture(scope="module")
def report():
    return analyse_training_step(Named, train={"optimizer": "sgd", "batch": 2}, input_shape=(4,), measure=False,
                                 memory_budget="100 B")


def test_a_training_page(report, tmp_path):
    assert report_kind(report) == "training_step"
    page = render_report(report, tmp_path / "train.html").read_text(encoding="utf-8")
    assert "<title>Training step</title>" in page
    section = page[page.index('<section id="training">'):page.index("</section>")]
    for category, share in (("parameters", "29.4%"), ("temporaries", "29.4%"), ("inputs", "23.5%"), ("activations", "17.6%")):
        row = section[section.index(f"<code>{category}</code>"):]
        assert row[:row.index("</tr>")].count(share) == 1, category
    assert "<p>Trainable parameters: 10 of 10</p>" in section  # Linear(4, 2): 4 * 2 + 2, none frozen
    assert "136 B" in section and "backward" in section  # the peak and its phase
    assert "not requested" in section  # the measured method did not run
    assert "training_memory_over_budget" in section
    # a module name from the model is escaped, never markup
    assert "&lt;b&gt;fc&lt;/b&gt;" in section and "<b>fc</b>" not in section


def test_attached_to_the_analysis_page(report, tmp_path):
    analysis = crawl_module(Named(), (4,))
    page = render_report(analysis, tmp_path / "analysis.html", training=report).read_text(encoding="utf-8")
    assert page.index('id="totals"') < page.index('<section id="training">')
    with pytest.raises(ValueError, match="training= must be a training_step report"):
        render_report(analysis, tmp_path / "bad.html", training=analysis)
    with pytest.raises(ValueError, match="training= can only be attached to an analysis report"):
        render_report(report, tmp_path / "bad.html", training=report)
