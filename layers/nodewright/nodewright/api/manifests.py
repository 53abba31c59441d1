"""Load manifest files and validate them document by document (used by the CLIs and the demo).

- ``load_files(paths) -> list[LoadedDocument]``: every YAML document of every file (multi-document
  files allowed). A file that cannot be read or parsed gives one ``LoadedDocument`` with ``doc=None``
  and the error as a finding; the other files still load. Empty documents are skipped; a file with
  no document at all is reported as such.

Loading is bounded, because a manifest is untrusted input: YAML aliases may expand to at most
``MAX_EXPANDED_NODES`` values (a "billion laughs" document is refused instead of filling memory),
nesting deeper than Python can walk is refused, and so is a number too long to convert (Python's
4,300-digit limit); each is one finding naming the file.
- ``validate_files(paths) -> Report``: for each document, its findings and its v1 form
  (``DocumentReport.v1``: the converted documents, the document itself when it is not a Karpenter kind).
  ``Report.ok`` is False when any document has an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodewright.api.convert import convert_document
from nodewright.api.findings import Finding, error
from nodewright.api.validation import validate_conversion


@dataclass
class LoadedDocument:
    """One YAML document: ``file``, its 0-based ``index`` there, the parsed ``doc`` (None: unreadable)."""

    file: str
    index: int
    doc: Any
    findings: list[Finding] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``file#index kind/name`` for messages."""
        where = f"{self.file}#{self.index}"
        if isinstance(self.doc, dict):
            name = (
                (self.doc.get("metadata") or {}).get("name")
                if isinstance(self.doc.get("metadata"), dict)
                else None
            )
            return f"{where} {self.doc.get('kind', '?')}/{name or '?'}"
        return where


@dataclass
class DocumentReport:
    source: LoadedDocument
    v1: list[dict[str, Any]]
    findings: list[Finding]
    partial: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)


@dataclass
class Report:
    documents: list[DocumentReport]

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.documents)

    @property
    def errors(self) -> int:
        return sum(1 for d in self.documents for f in d.findings if f.is_error)

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.documents for f in d.findings if not f.is_error)


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"not valid YAML{where}: {problem}; fix the syntax (the other documents were still checked)"


# How many values a document may hold once its aliases are expanded. Karpenter manifests hold a
# few hundred; a thousand times that is still instant, and a billion laughs is refused early.
MAX_EXPANDED_NODES = 200_000


class ManifestTooLarge(ValueError):
    """A document whose aliases expand beyond ``MAX_EXPANDED_NODES`` values."""


class ManifestTooDeep(ValueError):
    """A document nested past libyaml's limit (1,000 levels): PyYAML's pure-Python loader would
    scan it in quadratic time (seconds for 12 KB of ``[``) before its recursion gives up anyway."""


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Values the node stands for once every alias is expanded (shared nodes counted each time)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a recursive alias counts once: the constructor refuses it anyway
    if isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    else:
        total = 1
    sizes[id(node)] = min(total, MAX_EXPANDED_NODES + 1)
    return sizes[id(node)]


# The largest manifest file read. The API server takes at most 3 MiB per request, so no object is
# larger; a bundle of hundreds of NodePools, NodeClasses and workloads is a few hundred KiB. Split
# anything larger into several files (each is checked on its own).
MAX_MANIFEST_BYTES = 4 * 2**20
# libyaml's event parser when PyYAML has it (the counting pass reads 4 MiB in well under a second).
_EVENT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _count_values(text: str) -> None:
    """Refuse a document of more than ``MAX_EXPANDED_NODES`` values before any of it is built: a
    flat list of millions of scalars needs gigabytes as YAML nodes, minutes to build."""
    values, index = 0, 0
    try:
        for event in yaml.parse(text, Loader=_EVENT_LOADER):
            if isinstance(event, yaml.DocumentStartEvent):
                values = 0
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
                values += 1
                if values > MAX_EXPANDED_NODES:
                    raise ManifestTooLarge(
                        f"document {index + 1} holds more than {MAX_EXPANDED_NODES:,} values; no manifest"
                        " needs that many"
                    )
            elif isinstance(event, yaml.DocumentEndEvent):
                index += 1
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise ManifestTooDeep(str(exc)) from exc
        return  # the loader reads as far and says what is wrong in its words


def safe_load_documents(text: str) -> list[Any]:
    """Every document of a YAML stream, like ``yaml.safe_load_all`` with the bounds of this module."""
    _count_values(text)
    documents = []
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None and _expanded_size(node, {}) > MAX_EXPANDED_NODES:
                raise ManifestTooLarge(
                    f"YAML aliases expand to more than {MAX_EXPANDED_NODES:,} values; write the document "
                    "out without aliases (manifests never need that many)"
                )
            documents.append(loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()
    return documents


def _load_problem(exc: Exception) -> str:
    if isinstance(exc, yaml.YAMLError):
        return _describe_yaml_error(exc)
    if isinstance(exc, (RecursionError, ManifestTooDeep)):
        return "the YAML is nested too deeply to read; no manifest needs that depth"
    if isinstance(exc, ManifestTooLarge):
        return str(exc)
    if "integer string conversion" in str(exc):
        return "a number in it has more than 4,300 digits; no manifest field takes such a number"
    return f"cannot read the YAML: {exc}"


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # JSON is YAML too


def manifest_paths(paths: Iterable[str | Path]) -> list[Path]:
    """The files to read: a directory stands for its *.yaml/*.yml/*.json files (sorted, not recursive)."""
    out: list[Path] = []
    for path in paths:
        folder = Path(path)
        files = (
            sorted(f for f in folder.iterdir() if f.suffix in MANIFEST_SUFFIXES and f.is_file())
            if folder.is_dir()
            else []
        )
        out.extend(files or [folder])  # an empty directory stays, to be reported as such
    return out


def load_files(paths: Iterable[str | Path]) -> list[LoadedDocument]:
    """Every document of every file; unreadable files and YAML errors become findings, not exceptions."""
    loaded: list[LoadedDocument] = []
    for path in paths:
        name = str(path)
        if Path(path).is_dir():
            loaded.append(
                LoadedDocument(
                    name, 0, None, [error("", "is a directory with no *.yaml, *.yml or *.json file")]
                )
            )
            continue
        try:
            size = Path(path).stat().st_size
            if size > MAX_MANIFEST_BYTES:
                problem = (
                    f"the file is {size / 2**20:.1f} MiB; manifest files over"
                    f" {MAX_MANIFEST_BYTES // 2**20} MiB are not read (the API server takes at most"
                    " 3 MiB per object): split it into smaller files"
                )
                loaded.append(LoadedDocument(name, 0, None, [error("", problem)]))
                continue
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            loaded.append(LoadedDocument(name, 0, None, [error("", f"cannot read the file: {exc}")]))
            continue
        try:
            documents = safe_load_documents(text)
        except (yaml.YAMLError, RecursionError, MemoryError, ValueError) as exc:
            # ValueError: ManifestTooLarge, ManifestTooDeep, and int() past Python's 4,300-digit limit.
            loaded.append(LoadedDocument(name, 0, None, [error("", _load_problem(exc))]))
            continue
        found = [LoadedDocument(name, index, doc) for index, doc in enumerate(documents) if doc is not None]
        if not found:
            found = [LoadedDocument(name, 0, None, [error("", "holds no YAML document: nothing to check")])]
        loaded.extend(found)
    return loaded


def validate_loaded(document: LoadedDocument) -> DocumentReport:
    """Findings and v1 form of one loaded document."""
    if document.doc is None:
        return DocumentReport(document, [], list(document.findings))
    try:
        conversion = convert_document(document.doc)
        findings = list(document.findings) + validate_conversion(conversion)
    except RecursionError:
        problem = "the document is nested too deeply to check; no manifest needs that depth"
        return DocumentReport(document, [], [*document.findings, error("", problem)])
    return DocumentReport(document, conversion.documents, findings, list(conversion.partial))


def validate_files(paths: Iterable[str | Path]) -> Report:
    """Validate every document of ``paths`` (directories: their YAML files); one bad document never
    stops the others."""
    return Report([validate_loaded(d) for d in load_files(manifest_paths(paths))])
