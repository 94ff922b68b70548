"""A fake installed library whose import fails deep in its own modules, as ``diffusers``' did when a
``torchvision`` operator was missing: the package's ``__getattr__`` imports a submodule lazily and
re-raises what stopped it ``from`` the original error, with "look up to see its traceback" in the
message and the traceback itself nowhere. Written into a ``site-packages`` folder outside the
workspace and put on the job's path through ``PYTHONPATH``."""

from __future__ import annotations

from pathlib import Path

from workspace_files import line_of, write

__all__ = ["FAKEDIFF", "install", "frame", "fakediff_frames", "FAKEDIFF_MESSAGE"]

FAKEDIFF = {
    "fakediff/__init__.py": """
        import importlib


        def __getattr__(name):
            try:
                module = importlib.import_module(".unet", __name__)
            except Exception as e:
                raise RuntimeError(
                    f"Failed to import {__name__}.unet because of the following error (look up to see its traceback):\\n{e}"
                ) from e
            return getattr(module, name)
    """,
    "fakediff/unet.py": """
        from fakediff import ops


        class UNet:
            pass
    """,
    "fakediff/ops.py": """
        def register(name):
            raise RuntimeError(f"operator {name} does not exist")


        register("fakevision::nms")
    """,
}

FAKEDIFF_MESSAGE = ("Failed to import fakediff.unet because of the following error (look up to see its traceback): "
                    "operator fakevision::nms does not exist")
"""The error's message, its line break read as a space (as every one-line view shows it)."""


def install(folder: Path, files: dict[str, str] | None = None) -> dict[str, str]:
    """Write the library (``files``, by default :data:`FAKEDIFF`) into ``folder`` (a
    ``.../site-packages``); returns the texts as written, by path."""
    return write(folder, files or FAKEDIFF)


def frame(library: dict[str, str], file: str, needle: str, function: str) -> dict:
    """The traceback frame of the line holding ``needle`` in the library's ``file``, as a result
    carries it."""
    source = library[file]
    line = line_of(source, needle)
    return {"file": file, "line": line, "function": function, "source": source.splitlines()[line - 1].strip()}


def fakediff_frames(library: dict[str, str]) -> list[dict]:
    """The innermost frames of the failed ``from fakediff import UNet``: the error made from the
    original one, from the lazy import down to the raise, the standard library's importlib and its
    frozen bootstrap left out, four at most."""
    return [
        frame(library, "fakediff/__init__.py", "importlib.import_module", "__getattr__"),
        frame(library, "fakediff/unet.py", "from fakediff import ops", "<module>"),
        frame(library, "fakediff/ops.py", 'register("fakevision::nms")', "<module>"),
        frame(library, "fakediff/ops.py", "raise RuntimeError", "register"),
    ]
