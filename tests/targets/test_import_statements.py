"""What an annotated file's import statements name, as the warm worker's preload entries.

Each expected list is written from the source in the test, statement by statement, in source order.
"""

from __future__ import annotations

import textwrap

from torchscan_lsp.targets import find_targets

SOURCE = textwrap.dedent('''
    from __future__ import annotations
    import os, torch.nn as nn
    from transformers import GPT2Config, GPT2LMHeadModel as Head
    from .blocks import Block
    from einops.layers.torch import *
    import torch.nn


    # torchscan: input_shape=(4,)
    def build():
        from timm.layers import DropPath
        import os
        return nn.Linear(4, 2)
''')


def test_each_statement_names_its_modules_and_the_names_it_takes_in_source_order():
    # import os, torch.nn -> two modules; from transformers import A, B as Head -> one entry per
    # name taken (the name in the module, not the alias); relative and __future__ imports are the
    # file's own; `import *` takes the module; the factory's import counts, a repeat once
    assert find_targets(SOURCE).imports == [
        "os", "torch.nn", "transformers:GPT2Config", "transformers:GPT2LMHeadModel", "einops.layers.torch",
        "timm.layers:DropPath",
    ]


def test_a_file_without_targets_names_nothing():
    assert find_targets("import transformers\n\ndef build():\n    pass\n").imports == []
