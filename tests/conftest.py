"""What every test shares: the user's cache folder is never touched.

Servers the tests start inherit this process's environment, so the results they keep on disk
(``torchscan.cacheResults``) and the reports they write land in a folder of this run's own.
"""

import os
import tempfile

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="torchscan-lsp-tests-cache-")
