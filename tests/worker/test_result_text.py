"""Results read in pieces (``worker/result_text.py``): the value is the one ``json.loads`` gives,
every item below the outer levels is one call of the C decoder, and a result written again copies
the text of each member that is unchanged."""

import json

import pytest

from torchscan_lsp.worker import result_text
from torchscan_lsp.worker.child import write_result
from torchscan_lsp.worker.result_text import TextObject, dumps, loads
from torchscan_lsp.worker.supervisor import outcome

# every kind of JSON value, escapes and numbers in all their spellings, an empty object and list, a
# key given twice (the last value wins, at the first one's place, as in a dict), and whitespace
DOCUMENT = """ {"ok": true, "target": "build\\u00e9\\n", "none": null, "no": false,
  "report": {"layers": [{"path": "", "metrics": {"flops": -1.5e3}}, {"path": "0", "metrics": {}}],
             "totals": {}, "diagnostics": []},
  "source_map": {"modules": [1, 2.0, "3", [4]], "classes": []},
  "twice": 1, "library_stamps": {"/lib/a.py": 12345678901234567890}, "twice": [2] } \n"""

AS_PYTHON = {
    "ok": True, "target": "buildé\n", "none": None, "no": False,
    "report": {"layers": [{"path": "", "metrics": {"flops": -1500.0}}, {"path": "0", "metrics": {}}],
               "totals": {}, "diagnostics": []},
    "source_map": {"modules": [1, 2.0, "3", [4]], "classes": []},
    "twice": [2], "library_stamps": {"/lib/a.py": 12345678901234567890},
}


@pytest.mark.parametrize("levels", [0, 1, 2, 3, 4, 9])
def test_the_value_read_in_pieces_is_the_document_s(levels):
    value = loads(DOCUMENT, levels)
    assert value == AS_PYTHON
    assert list(value) == list(AS_PYTHON)                             # the keys' order too
    assert isinstance(value["report"]["layers"][0]["metrics"]["flops"], float)
    assert isinstance(value["library_stamps"]["/lib/a.py"], int)      # no float rounding


def test_objects_of_the_outer_levels_are_text_objects_and_those_below_plain_dicts():
    value = loads(DOCUMENT, 2)
    assert isinstance(value, TextObject) and isinstance(value["report"], TextObject)
    assert type(value["report"]["layers"][0]) is dict                 # level 3: one piece
    assert type(loads(DOCUMENT, 0)) is dict                           # all of it in one piece
    assert type(dict(value)) is dict                                  # a copy is a plain dict


def test_each_item_below_the_levels_is_decoded_by_one_call(monkeypatch):
    decoded = []

    class Recording(json.JSONDecoder):
        def raw_decode(self, s, idx=0):
            value, end = super().raw_decode(s, idx)
            decoded.append(value)
            return value, end

    monkeypatch.setattr(result_text, "_DECODER", Recording())
    assert loads('{"layers": [{"a": [1]}, {"b": 2}], "n": 3}', 2) == {"layers": [{"a": [1]}, {"b": 2}], "n": 3}
    assert decoded == [{"a": [1]}, {"b": 2}, 3]                       # the two layers, then the number


@pytest.mark.parametrize("text", ["", " ", '{"a": 1', '{"a": 1,}', '{"a" 1}', '{"a": 1 "b": 2}', "{a: 1}",
                                  '[1, 2', "[1,]", "[1 2]", '{"a": 1} x', '{"a": [1, 2]] ', '{"a": tr}',
                                  '{"a": "unterminated}'])
@pytest.mark.parametrize("levels", [0, 1, 3])
def test_text_that_is_not_one_document_raises_value_error_as_json_loads_does(text, levels):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text, levels)


def test_members_are_written_from_their_text_while_unchanged():
    # an indented document: a member copied from its text keeps the indentation; one encoded anew
    # is compact, so the written text shows which was which
    text = json.dumps({"report": {"layers": [1, 2]}, "source_map": {"modules": []}, "n": 1}, indent=1)
    value = loads(text, 3)
    assert value.member_text("report") == '{\n  "layers": [\n   1,\n   2\n  ]\n }'
    assert dumps(value) == ('{"report":{\n  "layers": [\n   1,\n   2\n  ]\n },'
                            '"source_map":{\n  "modules": []\n },"n":1}')

    value["log_tail"] = "printed\n"                                   # added by the server
    value["n"] = 2                                                    # replaced
    del value["source_map"]
    assert value.member_text("n") is None and value.member_text("log_tail") is None
    assert value.member_text("source_map") is None
    written = dumps(value)
    assert json.loads(written) == {"report": {"layers": [1, 2]}, "n": 2, "log_tail": "printed\n"}
    assert '[\n   1,\n   2\n  ]' in written                             # the report still copied


def test_values_read_otherwise_are_encoded_compactly():
    value = {"ok": True, "report": {"layers": [{"path": "é"}]}}
    assert dumps(value) == json.dumps(value, separators=(",", ":"))
    assert dumps([1, {"a": None}]) == '[1,{"a":null}]'


def test_a_job_s_result_file_reads_back_as_written_with_its_output_added(tmp_path):
    written = {"ok": True, "target": "build", "report": {"layers": [{"path": ""}, {"path": "0"}]},
               "source_map": {"modules": [{"layer": 1}]}, "imported_files": ["net.py"], "library_stamps": {}}
    write_result(str(tmp_path / "result.json"), written)
    (tmp_path / "log.txt").write_text("hello from the model\n")
    result = outcome({"target": "build", "workspace_root": str(tmp_path)}, 0, None, result_path=tmp_path / "result.json",
                     log_path=tmp_path / "log.txt", timeout_s=60, memory_mb=None)
    assert result == {**written, "log_tail": "hello from the model\n"}
    file_text = (tmp_path / "result.json").read_text()
    assert dumps(result) == file_text[:-1] + ',"log_tail":"hello from the model\\n"}'
