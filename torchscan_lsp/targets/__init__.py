"""Reading annotated model factories from source text, with ``ast`` only (never imports torch).

``find_targets(source)`` returns the targets (pragma ``# torchscan: ...`` or decorator
``@torchscan_lsp.target(...)``) and the problems of their annotations; ``load_workspace_defaults``
reads ``[tool.torchscan-lsp]`` from ``pyproject.toml``.
"""

from torchscan_lsp.targets.config import WorkspaceConfigError, load_workspace_defaults
from torchscan_lsp.targets.decorator import target
from torchscan_lsp.targets.discovery import Target, TargetProblem, TargetScan, find_targets
from torchscan_lsp.targets.options import (
    KNOWN_OPTIONS,
    MEASUREMENTS,
    OptionError,
    merge_options,
    validate_option,
    validate_options,
)

__all__ = [
    "KNOWN_OPTIONS",
    "MEASUREMENTS",
    "OptionError",
    "Target",
    "TargetProblem",
    "TargetScan",
    "WorkspaceConfigError",
    "find_targets",
    "load_workspace_defaults",
    "merge_options",
    "target",
    "validate_option",
    "validate_options",
]
