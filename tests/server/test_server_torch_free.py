"""The server process never imports torch: not when it starts, and not while it analyses (the
analyses run in worker processes)."""

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from torchscan_lsp.cli import build_parser
    from torchscan_lsp.server.app import create_server
    from torchscan_lsp.cli.check import check
    from torchscan_lsp.session.workspace import python_files

    build_parser()
    create_server()
    assert "torch" not in sys.modules, "importing the server imported torch"
    root = Path(sys.argv[1])
    lines, errors = asyncio.run(check(python_files([root / "model.py"]), root, python=None, timeout=120, hints=True))
    assert any("model.py" in line for line in lines), lines
    assert "torch" not in sys.modules, "analysing imported torch in the server process"
    print("torch-free")
""")


def test_server_and_analysis_path_never_import_torch(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch.nn as nn

        # torchscan: input_shape=(4,)
        def build():
            return nn.Linear(4, 2)
    """).lstrip(), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch-free"
