"""Libraries the warm parent learns from its jobs and imports ahead of the next ones.

A job's child reports (:func:`write_report`) the modules it imported whose code lies outside the
workspace: installed packages (``transformers``, ``timm``, ``einops``, ...), the standard library,
extension modules. The warm parent (:mod:`.zygote`) tries them first in a probe child
(:func:`probe`), which imports them in order and stops at the first one that started a thread or
initialised CUDA (neither survives a fork, so the parent must never hold them); what imported
cleanly is then imported into the parent (:func:`import_one`), so later children start with
it. A module that raises on import is skipped; both kinds are logged and never tried again.

Workspace modules are never preloaded (:func:`is_library_file`): a file under the workspace root
belongs to the workspace unless it lies in a ``site-packages``/``dist-packages`` folder or in the
interpreter's prefix (a virtual environment inside the workspace), so an editable install whose
source is inside the workspace is imported afresh by every job. A preloaded file that changes on
disk (an editable install elsewhere, an upgrade) makes the parent stale (:class:`Stamps`), and a
child drops every imported package that a workspace file now shadows (:func:`drop_shadowed`), a
preloaded library's own imports too (:func:`loaded_packages`).

Never imports torch itself: :func:`cuda_initialized` looks only at a torch that is already loaded.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Collection, Iterable

_LIBRARY_PARTS = {"site-packages", "dist-packages"}
_NEVER = ("__main__", "__mp_main__", "_torchscan_target_")


def is_library_file(path: str, root: str | None) -> bool:
    """Whether ``path`` is installed code rather than the workspace's at ``root``: it lies outside
    the root, or inside it in a site-packages/dist-packages folder or the interpreter's prefix."""
    if not root:
        return True
    real, base = os.path.realpath(path), os.path.realpath(root)
    if not real.startswith(base.rstrip(os.sep) + os.sep):
        return True
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        prefix = os.path.realpath(prefix)
        if prefix != base and real.startswith(prefix + os.sep):
            return True
    return any(part in _LIBRARY_PARTS for part in Path(real).parts)


def _is_library_module(name: str, module: Any, root: str | None) -> bool:
    if name.startswith(_NEVER):
        return False
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        return is_library_file(file, root)
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.origin in ("built-in", "frozen"):
        return True
    paths = list(getattr(module, "__path__", None) or [])  # a namespace package
    return bool(paths) and all(isinstance(p, str) and is_library_file(p, root) for p in paths)


def library_modules(before: Collection[str], root: str | None) -> list[str]:
    """Names of the modules in ``sys.modules`` that are not in ``before`` and whose code is not the
    workspace's, in the order they were imported (modules created without a file are left out:
    they are made again by whatever made them)."""
    return [name for name, module in list(sys.modules.items())
            if name not in before and _is_library_module(name, module, root)]


def write_report(path: str, before: Collection[str], root: str | None) -> None:
    """Write the child's report to ``path``: ``{"root": root, "modules": [...]}`` (see
    :func:`library_modules`), atomically."""
    temporary = f"{path}.partial"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"root": root, "modules": library_modules(before, root)}, handle)
    os.replace(temporary, path)


def read_json(path: str) -> dict[str, Any] | None:
    """The JSON object at ``path`` (then removed), or ``None`` when it is absent or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return data if isinstance(data, dict) else None


def thread_count() -> int:
    """Threads of this process: the kernel's count (native threads included) where ``/proc``
    exists, else Python's."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def cuda_initialized() -> bool:
    """Whether an already imported torch has initialised CUDA (importing nothing)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch too broken to answer cannot be forked from either
        return True


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:300]


def _skipped_package(name: str, skipped: Collection[str]) -> str | None:
    parts = name.split(".")
    for end in range(1, len(parts)):
        if ".".join(parts[:end]) in skipped:
            return ".".join(parts[:end])
    return None


def probe(candidates: Iterable[tuple[str, str | None]]) -> dict[str, Any]:
    """Import the modules of ``candidates`` (``(name, workspace root or None)``) in order in this
    process (a throw-away child of the warm parent).

    Returns ``{"accepted": [...], "failed": {name: message}, "refused": {name: reason},
    "rest": [[name, root], ...]}``: ``accepted`` imported cleanly (or were already imported);
    ``failed`` raised, resolved to a file of their workspace, or belong to a package that failed;
    ``refused`` holds the first module whose import started a thread or initialised CUDA, after
    which probing stops (this process is no longer like the parent) and the candidates not tried
    are ``rest``.
    """
    accepted: list[str] = []
    failed: dict[str, str] = {}
    candidates = [(name, root) for name, root in candidates]
    for index, (name, root) in enumerate(candidates):
        package = _skipped_package(name, failed)
        if package is not None:
            failed[name] = f"its package {package} was skipped"
            continue
        threads, cuda = thread_count(), cuda_initialized()
        try:
            module = importlib.import_module(name)
        except BaseException as error:  # noqa: BLE001 - SystemExit and the like are a failure too
            failed[name] = _error(error)
            continue
        reason = None
        if thread_count() > threads:
            reason = "importing it started a thread"
        elif cuda_initialized() and not cuda:
            reason = "importing it initialised CUDA"
        if reason is not None:
            return {"accepted": accepted, "failed": failed, "refused": {name: reason},
                    "rest": [list(candidate) for candidate in candidates[index + 1:]]}
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and not is_library_file(file, root):
            failed[name] = f"it resolves to the workspace file {file}"
            continue
        accepted.append(name)
    return {"accepted": accepted, "failed": failed, "refused": {}, "rest": []}


class Contaminated(RuntimeError):
    """Preloading into the warm parent started a thread or initialised CUDA after all."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


def workspace_origin(entry: str, root: str | None) -> str | None:
    """The file of the workspace at ``root`` that the preload entry ``entry`` (``MODULE`` or
    ``MODULE:NAME``, :func:`torchscan_lsp.targets.imports.imported_names`) would import, found
    without running any of its code (the spec of its top-level package), else ``None``: a
    library's, one already imported, or one that cannot be found (its import will say so)."""
    top = entry.partition(":")[0].split(".", 1)[0]
    if not top:
        return None
    if root:  # the job has the root first on its path; this process, in "/", has not
        for place in (os.path.join(root, f"{top}.py"), os.path.join(root, top)):
            if os.path.isfile(place) or os.path.isdir(place):
                return place
    if top in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    places = [spec.origin] if spec is not None and spec.origin not in (None, "built-in", "frozen") else []
    places += list(getattr(spec, "submodule_search_locations", None) or []) if spec is not None else []
    return next((place for place in places if isinstance(place, str) and not is_library_file(place, root)), None)


def _take(entry: str) -> None:
    """Do what the statement behind ``entry`` does: import ``MODULE``, and take ``NAME`` from it
    (an attribute, which a lazily importing package loads now, else its submodule ``NAME``)."""
    name, _, attribute = entry.partition(":")
    module = importlib.import_module(name)
    if attribute and not hasattr(module, attribute):
        importlib.import_module(f"{name}.{attribute}")


def import_one(name: str) -> str | None:
    """Import ``name`` (one a probe accepted, or a preload entry ``MODULE:NAME`` of the
    workspace's import statements, see :func:`_take`) into this process, the warm parent;
    returns the error message when it raised, else ``None``.

    Raises:
        Contaminated: the import started a thread or initialised CUDA.
    """
    threads, cuda = thread_count(), cuda_initialized()
    try:
        _take(name)
    except BaseException as error:  # noqa: BLE001 - see probe
        return _error(error)
    if thread_count() > threads:
        raise Contaminated(name, "importing it started a thread in the warm parent")
    if cuda_initialized() and not cuda:
        raise Contaminated(name, "importing it initialised CUDA in the warm parent")
    return None


class Stamps:
    """Modification times of the files of preloaded modules, to tell when one changed on disk."""

    def __init__(self) -> None:
        self._stamps: dict[str, tuple[int, int] | None] = {}

    @staticmethod
    def _stamp(path: str) -> tuple[int, int] | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def add(self, names: Iterable[str]) -> None:
        """Record the files of the modules ``names`` (those that have one)."""
        for name in names:
            file = getattr(sys.modules.get(name), "__file__", None)
            if isinstance(file, str) and file not in self._stamps:
                self._stamps[file] = self._stamp(file)

    def changed(self) -> str | None:
        """The first recorded file that changed (or vanished) since, or ``None``."""
        for path, stamp in self._stamps.items():
            if self._stamp(path) != stamp:
                return path
        return None


def top_level(names: Iterable[str]) -> list[str]:
    """The distinct top-level packages of dotted module ``names``, sorted."""
    return sorted({name.split(".", 1)[0] for name in names})


KEPT_PACKAGES = frozenset({"torch", "torchscan_lsp"})
"""Packages a job never drops: what the job itself runs on."""


def loaded_packages() -> list[str]:
    """The top-level packages this process has imported that a workspace file may shadow: every
    one but the standard library's and :data:`KEPT_PACKAGES` (a preloaded library's own imports
    too: ``transformers`` brings ``regex``, ``yaml``, ``safetensors``), sorted."""
    return sorted({name.partition(".")[0] for name in list(sys.modules)}
                  - set(sys.stdlib_module_names) - KEPT_PACKAGES - {"__main__"})


def drop_shadowed(packages: Iterable[str], folders: Iterable[str]) -> list[str]:
    """Remove from ``sys.modules`` each preloaded top-level package of ``packages`` that a file in
    one of ``folders`` (the workspace root, the target's folder) now shadows (``NAME.py`` or
    ``NAME/__init__.py``), with its submodules, so the job imports the workspace's own. Returns
    the packages dropped."""
    dropped = []
    listed = []  # each folder read once: a job checks hundreds of packages (loaded_packages)
    for folder in dict.fromkeys(f for f in folders if f):
        with contextlib.suppress(OSError):
            listed.append((folder, set(os.listdir(folder))))
    for package in packages:
        if any((f"{package}.py" in names and os.path.isfile(os.path.join(folder, f"{package}.py")))
               or (package in names and os.path.isfile(os.path.join(folder, package, "__init__.py")))
               for folder, names in listed):
            for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
                del sys.modules[name]
            dropped.append(package)
    return dropped
