"""``python -m torchscan_lsp.worker``: run one job in this process (see :mod:`.child`)."""

import sys

from torchscan_lsp.worker.child import main

sys.exit(main())
