"""FLOP formulas for the operators that PyTorch's ``FlopCounterMode`` leaves uncounted (spec A.3).

``DEFAULT_FORMULAS`` maps operator packets (``torch.ops.aten.relu``) to callables that follow
``FlopCounterMode``'s shape-based formula contract; ``measure_flops`` and ``crawl_module`` use them by
default, and a caller's ``custom_mapping`` wins over them.
"""

DEFAULT_FORMULAS: dict = {}
