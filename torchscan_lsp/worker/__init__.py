"""The worker: runs the user's code for one analysis job.

* :mod:`.runner` (imports torch): ``run_job(job) -> result``: import, build, analyse, attribute.
* :mod:`.attribution` (imports torch): module definition/call sites and operator sites.
* :mod:`.child`: ``python -m torchscan_lsp.worker``, the sandboxed process entry point.
* :mod:`.client` (never imports torch): the server's side: spawn, limits, cancellation.

Importing this package imports nothing heavy; the server imports :mod:`.client` only.
"""
