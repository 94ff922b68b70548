"""The installed version of this package, looked up on every call (never cached: docs/report-schema.md, `context`)."""

from importlib import metadata

PACKAGE_NAME = "torchscan-lsp"


def package_version() -> str:
    """Return the installed ``torchscan-lsp`` version, or ``"unknown"`` without package metadata."""
    try:
        return metadata.version(PACKAGE_NAME)
    except metadata.PackageNotFoundError:
        return "unknown"
