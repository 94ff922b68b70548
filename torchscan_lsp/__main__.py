"""``python -m torchscan_lsp`` is the ``torchscan-lsp`` command."""

import sys

from torchscan_lsp.cli import main

sys.exit(main())
