"""The torchscan language server (pygls). It never imports torch: analyses run in worker
processes. Entry point: :func:`torchscan_lsp.server.app.main`."""
