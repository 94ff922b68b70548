"""A worker result, indexed by source line.

The worker returns the engine report plus a source map (see docs/architecture.md): which lines
defined and which lines called each module call, which operators each line ran, what each line
computed, and where the model's classes are, every entry naming its report layer by index.
:class:`ResultView` joins the two once, so that inlay hints, hovers and diagnostics for any line of
any file the model ran through (workspace files by relative path, library files by absolute path)
are dictionary look-ups.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from torchscan_lsp.contract.messages import is_library
from torchscan_lsp.session.line_operators import Site, operators_by_line
from torchscan_lsp.session.module_sums import held, shared
from torchscan_lsp.contract.report import (
    MODULE_FORMULA_METRICS,
    OPERATOR_METRICS,
    ancestors,
    inclusive_total,
    subtree_layers,
    subtree_total,
)

LayerKey = tuple[str, int]
"""A layer's identity in a report: ``(path, call_index)``."""

LISTED_OPERATOR = re.compile(r"([A-Za-z_][\w.]*) x(\d+)")
"""An ``aten.add x2`` item (the operator, its calls) of the operator list a ``container_work``
message ends with."""


@dataclass
class LineInfo:
    """Everything one result says about one source line.

    Attributes:
        defined: module paths whose instance was built on this line, in call order, each once.
        called: layer keys of the module calls made from this line, in call order.
        operators: source-map operator entries for this line (``operator``, ``calls``, ``flops``),
            one per operator (the worker's entries per innermost module summed).
        under: the same for the operators that ran under the plain functions this line called
            (``xq, xk = apply_rotary_emb(...)``: the helper's operators), outside module calls.
        diagnostics: report diagnostics attributed to this line.
        output: what the line computed in its first run, its result: the output of the last
            operator it dispatched or module call it made (the source map's ``outputs`` entry:
            ``output`` metadata, ``operator`` or ``call``, ``layer``, the names it assigned
            (``targets``), ``runs`` and ``range`` for a line that ran more than once, and ``path``,
            the module whose ``forward`` ran the line), or None.
        instances: on a ``class`` line, the module paths of the class's instances in the model.
        parameters: the source map's ``parameters`` entries of this line: parameters that model
            code assigned here (``path``, ``name``, ``shape``, ``numel``, ``trainable``).
    """

    defined: list[str] = field(default_factory=list)
    called: list[LayerKey] = field(default_factory=list)
    operators: list[dict] = field(default_factory=list)
    under: list[dict] = field(default_factory=list)
    diagnostics: list[dict] = field(default_factory=list)
    output: dict | None = None
    instances: list[str] = field(default_factory=list)
    parameters: list[dict] = field(default_factory=list)


class ResultView:
    """An ``ok`` worker result with per-line and per-module indexes.

    Args:
        result: the worker's result object (``ok`` true), with ``report``, ``source_map`` and
            ``imported_files``.
    """

    def __init__(self, result: Mapping[str, Any]):
        self.result = result
        self.report: Mapping[str, Any] = result.get("report") or {}
        self.totals: Mapping[str, Any] = self.report.get("totals") or {}
        self.layers: list[dict] = list(self.report.get("layers") or [])
        self.by_key: dict[LayerKey, dict] = {
            (layer["path"], layer.get("call_index", 0)): layer for layer in self.layers
        }
        self.lines: dict[Site, LineInfo] = defaultdict(LineInfo)
        self.module_entries: dict[LayerKey, dict] = {}
        #: the source map's ``uncalled`` entries by path: containers never called themselves (their
        #: children were) and modules that never ran, with the tensors only they hold
        self.uncalled: dict[str, Mapping[str, Any]] = {}
        self._summaries: dict[tuple[str, ...], dict] = {}
        self._class_files: dict[str, str] = {}
        #: paths of the modules built inside library code (their entries name a library line)
        self._library_built: set[str] = set()
        self._index_source_map(result.get("source_map") or {})
        self._index_diagnostics()

    @functools.cached_property
    def files(self) -> frozenset[str]:
        """Every file this result has something to say about (workspace-relative, or absolute)."""
        return frozenset(site[0] for site in self.lines) | frozenset(self.result.get("imported_files") or [])

    def line(self, file: str, line: int) -> LineInfo | None:
        """The information for ``file`` (as :attr:`files` names it) at 1-based ``line``, or ``None``."""
        return self.lines.get((file, line))

    def lines_in(self, file: str) -> dict[int, LineInfo]:
        """All annotated lines of one file (as :attr:`files` names it), by 1-based line number."""
        return {line: info for (name, line), info in self.lines.items() if name == file}

    def subtree(self, paths: Iterable[str]) -> list[dict]:
        """Layer records of every call of the modules at ``paths`` and of every call below them,
        followed by the records' ``parent`` indexes (:func:`~torchscan_lsp.contract.report.subtree_layers`)."""
        return subtree_layers(self.layers, tuple(paths))  # type: ignore[return-value]

    def module_summary(self, paths: Iterable[str]) -> dict:
        """Parameters and work of the modules at ``paths`` (their whole subtrees).

        Returns ``{"parameters", "trainable", "frozen", "parameter_bytes", "buffer_elements",
        "shared_elements", "shared_with", "ran", "module_flops", "macs", "dmas", "operator_flops",
        "operator_macs"}``: counts are ints (each tensor counted once, as in the report; the
        modules below that never ran count too, :mod:`.module_sums`), ``ran`` whether any of them
        was called; work
        entries are metric objects. The module formulas' are summed over every call in the subtrees
        by the contract's one rule (:func:`~torchscan_lsp.contract.report.subtree_total`), so work
        that ran in a container's own ``forward`` and that no formula counted makes them partial;
        the dispatcher's, inclusive per call, over the outermost calls
        (:func:`~torchscan_lsp.contract.report.inclusive_total`). ``shared_elements`` are the
        parameters of these modules that the report counted under other modules (``shared_with``,
        their paths): a head tied to an embedding has 0 parameters of its own and the embedding's
        elements shared.
        """
        key = tuple(paths)
        if key in self._summaries:
            return self._summaries[key]
        layers = self.subtree(key)
        summary: dict[str, Any] = {**held(layers, self._holding, key), **shared(layers, self._holding, key), "ran": bool(layers)}
        diagnostics = self.report.get("diagnostics") or []
        for name, unit in MODULE_FORMULA_METRICS.items():
            summary[name] = subtree_total(self.layers, diagnostics, name, key, unit=unit)
        for name in OPERATOR_METRICS:
            summary[name] = inclusive_total(self.layers, name, key)
        self._summaries[key] = summary
        return summary

    def hint_paths(self, file: str) -> list[list[str]]:
        """The groups of modules whose summaries the hints and hovers of ``file``'s lines show: for
        each line, the modules it built as they are named (:meth:`line_modules`) and, on a
        ``class`` line, the class's instances."""
        return [paths for info in list(self.lines_in(file).values())
                for paths in (self.line_modules(info.defined), info.instances) if paths]

    def warm(self, file: str) -> None:
        """Compute the module summaries that the hints of ``file``'s lines show (:meth:`hint_paths`)
        now, so that answering its hints is a look-up: the session calls this off the event loop,
        for the target's own file, before the view is shown. A summary costs time in proportion to
        the report's layers, and a line may build hundreds of modules."""
        for paths in self.hint_paths(file):
            self.module_summary(paths)

    @functools.cached_property
    def _holding(self) -> dict[str, Mapping[str, Any]]:
        """The ``uncalled`` entries that hold tensors of their own or share some (most are
        containers that hold none): what every module summary adds over its subtree."""
        return {path: entry for path, entry in self.uncalled.items()
                if any((entry.get(key) or {}).get(count) for key, count in
                       (("parameters", "trainable"), ("parameters", "frozen"), ("parameters", "shared_elements"),
                        ("buffers", "elements")))}

    @functools.cached_property
    def known_paths(self) -> dict[str, None]:
        """Every module path the result names (called or never called itself), in call order."""
        return dict.fromkeys([layer["path"] for layer in self.layers] + list(self.uncalled))

    @functools.cached_property
    def _children(self) -> dict[str, list[str]]:
        """Each module path's direct children, indexed once: every hint asks for the root's."""
        found: dict[str, list[str]] = defaultdict(list)
        for path in self.known_paths:
            if path:
                found[ancestors(path)[-1]].append(path)
        return found

    def children(self, path: str) -> list[str]:
        """The direct children of module ``path`` that the result names, in first-call order."""
        return list(self._children.get(path, ()))

    def line_modules(self, defined: Iterable[str]) -> list[str]:
        """The modules a line built, as it should be summed and named: the outermost of ``defined``
        (a child built inside a module built on the same line is part of it), or the root when the
        line built every child of the root, each inside library code (``model =
        MistralForCausalLM(config)``: the library's constructor ran on that line, and the factory
        returned the model on another)."""
        paths = list(dict.fromkeys(defined))
        members = set(paths)  # a line may build hundreds
        outer = [p for p in paths if not any(above in members for above in ancestors(p))]
        top = self.children("")
        # a container the root holds (diffusers' down_blocks) is named on the line by its children;
        # a line that built one layer deep inside (a LoRA adapter's base layer) did not build the root
        built = [t for t in top if t in members or (self._children.get(t) and set(self._children[t]) <= members)]
        if "" not in outer and top and built == top and set(top) <= self._library_built:
            return [""]
        return outer

    def library_module(self, path: str) -> bool:
        """Whether module ``path``'s class is defined in a library file (installed model code such
        as a ``transformers`` modeling file)."""
        return is_library(self._class_files.get(path, ""))

    def types_of(self, paths: Iterable[str]) -> list[str]:
        """The distinct type names of the modules at ``paths``, sorted (called or not)."""
        wanted = set(paths)
        found = {layer["type"] for (path, _), layer in self.by_key.items() if path in wanted}
        return sorted(found | {str(self.uncalled[p].get("type") or "") for p in wanted if p in self.uncalled})

    def call_sites(self, paths: Iterable[str]) -> list[Site]:
        """The distinct workspace lines that called the modules at ``paths``, in first-call order."""
        wanted = set(paths)
        sites: dict[Site, None] = {}
        for (path, _), entry in self.module_entries.items():
            called = entry.get("called_at")
            if path in wanted and called and called.get("file") and called.get("line"):
                sites[(called["file"], int(called["line"]))] = None
        return list(sites)

    def diagnostics_for_paths(self, paths: Iterable[str]) -> list[dict]:
        """Report diagnostics that name one of the module ``paths`` exactly."""
        wanted = set(paths)
        return [d for d in self.report.get("diagnostics") or [] if d.get("path") in wanted]

    def container_operators(self, path: str, site: Site) -> dict[str, int]:
        """The operators (name → calls) that ran on ``site`` while module ``path``'s own
        ``forward`` was the innermost call, leaving out those that need no formula (views, copies)."""
        found: dict[str, int] = {}
        for where, entry in self._ops_by_module.get(path, []):
            if where == site and not entry.get("ignored"):
                found[entry["operator"]] = found.get(entry["operator"], 0) + int(entry.get("calls") or 0)
        return found

    def own_operators(self, path: str) -> list[str]:
        """The operators that ran in module ``path``'s own ``forward`` (its call the innermost) and
        need a formula (views and copies left out), in the order they first ran."""
        return list(dict.fromkeys(entry["operator"] for _, entry in self._ops_by_module.get(path, [])
                                  if not entry.get("ignored") and entry.get("operator")))

    def operator_calls(self, site: Site, operator: str) -> dict[str, int]:
        """The module calls (innermost path → calls of ``operator``) in which ``site`` ran it."""
        found: dict[str, int] = {}
        for module, entries in self._ops_by_module.items():
            for where, entry in entries:
                if where == site and entry.get("operator") == operator:
                    found[module] = found.get(module, 0) + int(entry.get("calls") or 0)
        return found

    def unattributed_diagnostics(self) -> list[dict]:
        """Report diagnostics with no workspace line (shown on the target's own line)."""
        return list(self._unattributed)

    def _layer_key(self, entry: Mapping[str, Any]) -> LayerKey | None:
        """The report layer a source-map entry names: by its ``layer`` index (or, from a worker
        that predates the index, by ``path`` and ``call_index``); None for a layer not in the report."""
        index = entry.get("layer")
        if isinstance(index, int):
            if 0 <= index < len(self.layers):
                layer = self.layers[index]
                return layer["path"], layer.get("call_index", 0)
            return None
        if "path" in entry:
            return entry["path"], entry.get("call_index", 0)
        return None

    def _index_source_map(self, source_map: Mapping[str, Any]) -> None:
        for entry in source_map.get("modules") or []:
            key = self._layer_key(entry)
            if key is None:
                continue
            self.module_entries[key] = entry
            if entry.get("library_defined_at"):
                self._library_built.add(key[0])
            for defined in [entry.get("defined_at"), *(entry.get("library_defined_at") or [])]:
                if defined and defined.get("file") and defined.get("line"):
                    info = self.lines[(defined["file"], int(defined["line"]))]
                    if key[0] not in info.defined:
                        info.defined.append(key[0])
            if key in self.by_key:
                for called in [entry.get("called_at"), *(entry.get("library_called_at") or [])]:
                    if called and called.get("file") and called.get("line"):
                        self.lines[(called["file"], int(called["line"]))].called.append(key)
        for entry in source_map.get("uncalled") or []:
            path = entry.get("path")
            if not isinstance(path, str):
                continue
            self.uncalled[path] = entry
            if entry.get("library_defined_at"):
                self._library_built.add(path)
            for defined in [entry.get("defined_at"), *(entry.get("library_defined_at") or [])]:
                if defined and defined.get("file") and defined.get("line"):
                    info = self.lines[(defined["file"], int(defined["line"]))]
                    # a line that built the children too says it by them (×3), not by their holder
                    if not any(p.startswith(path + ".") for p in info.defined):
                        info.defined.append(path)
        for entry in source_map.get("outputs") or []:
            if entry.get("file") and entry.get("line") and entry.get("output"):
                owner = self._layer_key(entry)
                self.lines[(entry["file"], int(entry["line"]))].output = {**entry, "path": owner[0] if owner else None}
        for entry in source_map.get("parameters") or []:
            if entry.get("file") and entry.get("line") and isinstance(entry.get("numel"), int):
                self.lines[(entry["file"], int(entry["line"]))].parameters.append(dict(entry))
        for entry in source_map.get("classes") or []:
            if entry.get("file") and entry.get("line") and entry.get("paths"):
                self.lines[(entry["file"], int(entry["line"]))].instances = list(entry["paths"])
                self._class_files.update(dict.fromkeys(entry["paths"], entry["file"]))
        # module path -> the operators that ran while its call was the innermost, with their sites
        self._ops_by_module: dict[str, list[tuple[Site, dict]]] = defaultdict(list)
        for entry in source_map.get("operators") or []:
            if entry.get("file") and entry.get("line"):
                layer = self._layer_key(entry) if "layer" in entry else None
                module = layer[0] if layer is not None else entry.get("module")
                if module is not None:
                    self._ops_by_module[module].append(((entry["file"], int(entry["line"])), entry))
        for name in ("operators", "under"):
            for site, entries in operators_by_line(source_map.get(name) or []).items():
                setattr(self.lines[site], name, entries)

    def _module_site(self, path: str) -> Site | None:
        for (entry_path, _), entry in self.module_entries.items():
            if entry_path != path:
                continue
            for where in ("defined_at", "called_at"):
                site = entry.get(where)
                if site and site.get("file") and site.get("line"):
                    return site["file"], int(site["line"])
        return None

    def _container_sites(self, diagnostic: dict) -> list[Site]:
        """The lines where the work a ``container_work`` diagnostic names ran: those of the
        operators the message lists (of all the container's own work, when it lists none we know)
        while that container's call was the innermost. Empty for a result without that record."""
        own = self._ops_by_module.get(diagnostic["path"], [])
        listed = {name for name, _ in LISTED_OPERATOR.findall(diagnostic.get("message", ""))}
        sites = ([site for site, op in own if op.get("operator") in listed]
                 or [site for site, op in own if not op.get("ignored")])
        return sorted(set(sites))

    def operator_sites(self, operator: str) -> list[Site]:
        """The lines that ran ``operator`` without a formula (else every line that ran it)."""
        sites = [site for site, info in self.lines.items() for op in info.operators if op.get("operator") == operator]
        uncounted = [
            site
            for site, info in self.lines.items()
            for op in info.operators
            if op.get("operator") == operator and op.get("flops") is None
        ]
        return sorted(set(uncounted or sites))

    def _index_diagnostics(self) -> None:
        """Attribute each report diagnostic to the lines it concerns.

        Work in a container's own ``forward`` (``container_work``) goes to the lines where that
        work ran; any other module diagnostic to the line that defined the module (else the line
        that called it), as does ``container_work`` of a result without operator records; an
        operator diagnostic to every line that ran that operator without a formula.
        """
        self._unattributed: list[dict] = []
        for diagnostic in self.report.get("diagnostics") or []:
            sites: list[Site] = []
            if diagnostic.get("path") is not None:
                if diagnostic.get("code") == "container_work":
                    sites = self._container_sites(diagnostic)
                if not sites:
                    site = self._module_site(diagnostic["path"])
                    sites = [site] if site else []
            elif diagnostic.get("operator"):
                sites = self.operator_sites(diagnostic["operator"])
            for site in sites:
                self.lines[site].diagnostics.append(diagnostic)
            if not any(not is_library(file) for file, _ in sites):  # no workspace line shows it
                self._unattributed.append(diagnostic)


def outermost(calls: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The calls (in order) whose module is not inside another module called from the same line:
    ``self.stage1(x)`` also "calls" the children that ``Sequential`` runs, but the line's value is
    ``stage1``'s output."""
    paths = {path for path, _ in calls}
    return [(path, index) for path, index in calls
            if path == "" or not any(path.startswith(other + ".") or other == "" for other in paths if other != path)]
