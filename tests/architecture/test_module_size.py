"""Small modules with one job each: no module of the package is over 400 lines."""

import import_graph

LIMIT = 400


def test_no_module_over_the_limit():
    long = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in import_graph.module_files().items()}
    assert {name: lines for name, lines in long.items() if lines > LIMIT} == {}
