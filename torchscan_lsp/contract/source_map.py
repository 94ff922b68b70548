"""The worker's attribution of a report to source lines, as it crosses the process boundary: the
source map's entry types (docs/architecture.md, "Source map"), re-exported by
:mod:`torchscan_lsp.contract.messages` with the jobs and results that carry them."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["Site", "ModuleSite", "OperatorSite", "LineOutput", "ShapeRange", "AssignedName", "ClassSite", "UnregisteredSite",
           "UncalledSite", "ParameterSite", "SourceMap", "holds_tensor", "is_library"]


class Site(TypedDict):
    """A file and a 1-based line. The file is workspace-relative (``/`` separators), or the absolute
    path of a *library file*: installed model code that defines a module class of the model (a
    ``transformers`` modeling file); :func:`is_library` tells them apart."""

    file: str
    line: int


def is_library(file: str) -> bool:
    """Whether a source-map file name is a library file's (absolute) rather than a workspace file's."""
    return file.startswith("/") or file[1:3] == ":/"


class ModuleSite(TypedDict):
    """Where one module call of the report was built and called. ``layer`` is its record's index
    in ``report["layers"]``; ``defined_at`` / ``called_at`` the innermost workspace lines (``None``:
    no workspace frame), ``library_defined_at`` / ``library_called_at`` the innermost line of each
    library file inside them, innermost first."""

    layer: int
    defined_at: Site | None
    called_at: Site | None
    library_defined_at: list[Site]
    library_called_at: list[Site]


class OperatorSite(TypedDict):
    """Operators one line dispatched while one layer record was the innermost: ``flops`` is the
    engine's count (``None`` for an operator without a formula), ``ignored`` the reason one needs
    none, ``layer`` the innermost record's index (``None`` outside every call). In the source map's
    ``under``, the operators that ran under a plain function the line called (a helper, a method):
    the line's frame was on the stack between the operator and the module call's ``forward``."""

    file: str
    line: int
    operator: str
    calls: int
    flops: int | None
    ignored: str | None
    layer: int | None


class ShapeRange(TypedDict):
    """How the shapes of a line's runs (or of a name it assigned) varied: ``distinct`` shapes, and
    for tensors of one rank the smallest and largest size of each dimension (else None)."""

    distinct: int
    min: list[int] | None
    max: list[int] | None


class AssignedName(TypedDict):
    """A name a line assigned (``xq`` of ``xq, xk = apply_rotary_emb(...)``): its value's metadata
    after the line's first run, and ``range`` (None when every run gave one shape)."""

    name: str
    output: dict[str, Any]
    range: ShapeRange | None


class LineOutput(TypedDict, total=False):
    """What one line computed in its first run, while record ``layer``'s ``forward`` ran the line:
    ``output``, the value metadata of the last thing it did, an operator it dispatched (``operator``,
    ``call`` None) or a module call it made (``call``, the module's path, and its record's output;
    ``operator`` None), whichever came last: the line's result (None when only ``targets`` are
    known). A line that returns a display of several values (``return out, weights``) has for
    ``output`` the value it returned and ``returned`` True (``returned`` False, ``output`` None: what it
    returned could not be read, and its last operator's output is not its result). ``targets``: the local names the line assigned, in the order written, with their
    values. ``runs`` and ``range`` only for a line that ran more than once: how many times, and how
    the shapes of its results varied (None: they did not)."""

    file: str
    line: int
    layer: int | None
    operator: str | None
    call: str | None
    output: dict[str, Any] | None
    returned: bool
    targets: list[AssignedName]
    runs: int
    range: ShapeRange | None


class ClassSite(TypedDict):
    """The ``class`` line of one module class of the model, and the paths of its instances."""

    file: str
    line: int
    name: str
    paths: list[str]


class _UncalledTensors(TypedDict, total=False):
    """The keys of :class:`UncalledSite` that results of earlier versions lack (``total=False``:
    ``NotRequired`` is not read from postponed annotations on Python 3.11)."""

    ran: bool
    parameters: dict[str, Any]
    buffers: dict[str, int]


class UncalledSite(_UncalledTensors):
    """A module that was never called itself, by its path, as no layer record stands for it: a
    container whose children's calls have records (``ran``), or a module that never ran. Where it
    was built; the tensors only it holds (``parameters``: ``trainable``, ``frozen`` elements,
    ``bytes``, and the ``shared_elements`` of its own parameters that modules at ``shared_with``
    hold and counted; ``buffers``: ``elements``, ``bytes``): ``worker/uncalled.py``."""

    path: str
    type: str
    defined_at: Site | None
    library_defined_at: list[Site]


class UnregisteredSite(TypedDict):
    """Modules held in a plain list, tuple or dict (``container``; attribute ``attribute`` of the
    module at ``path``), which PyTorch does not register: how many, their parameter ``elements``
    (``parameters``), none of them counted by the report, and the line that built them
    (``worker/unregistered.py``)."""

    path: str
    attribute: str
    container: str
    modules: int
    parameters: int
    defined_at: Site | None


class ParameterSite(TypedDict):
    """A parameter that model code assigned itself (``self.cls_token = nn.Parameter(...)``): its
    line, the path of the module that holds it and its ``name`` there, its ``shape``, ``numel``
    (elements) and whether it is ``trainable``."""

    file: str
    line: int
    path: str
    name: str
    shape: list[int]
    numel: int
    trainable: bool


class _SourceMapExtras(TypedDict, total=False):
    """The keys of :class:`SourceMap` that results of earlier versions lack (see
    :class:`_UncalledTensors`)."""

    unregistered: list[UnregisteredSite]


class SourceMap(_SourceMapExtras):
    """The worker's attribution of a report to source lines; every entry names the report layer it
    belongs to by index, or (``parameters``, ``uncalled``) a module by path (docs/architecture.md,
    "Source map")."""

    modules: list[ModuleSite]
    operators: list[OperatorSite]
    under: list[OperatorSite]
    outputs: list[LineOutput]
    classes: list[ClassSite]
    uncalled: list[UncalledSite]
    parameters: list[ParameterSite]


def holds_tensor(meta: Any) -> bool:
    """Whether a value's metadata (the engine's ``value_meta``) holds a tensor: a tensor, or a
    tuple, list or mapping with one inside."""
    if not isinstance(meta, dict):
        return False
    kind = meta.get("kind")
    if kind == "tensor":
        return True
    if kind == "mapping":
        return any(isinstance(item, dict) and holds_tensor(item.get("value")) for item in meta.get("items") or ())
    return kind in ("tuple", "list") and any(holds_tensor(item) for item in meta.get("items") or ())
