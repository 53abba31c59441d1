"""Load manifest files and validate them document by document (used by the CLIs and the demo).

- ``load_files(paths) -> list[LoadedDocument]``: every YAML document of every file (multi-document
  files allowed). A file that cannot be read or parsed gives one ``LoadedDocument`` with ``doc=None``
  and the error as a finding; the other files still load. Empty documents are skipped.
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


def load_files(paths: Iterable[str | Path]) -> list[LoadedDocument]:
    """Every document of every file; unreadable files and YAML errors become findings, not exceptions."""
    loaded: list[LoadedDocument] = []
    for path in paths:
        name = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            loaded.append(LoadedDocument(name, 0, None, [error("", f"cannot read the file: {exc}")]))
            continue
        index = 0
        try:
            for doc in yaml.safe_load_all(text):
                if doc is not None:
                    loaded.append(LoadedDocument(name, index, doc))
                index += 1
        except yaml.YAMLError as exc:
            loaded.append(LoadedDocument(name, index, None, [error("", _describe_yaml_error(exc))]))
    return loaded


def validate_loaded(document: LoadedDocument) -> DocumentReport:
    """Findings and v1 form of one loaded document."""
    if document.doc is None:
        return DocumentReport(document, [], list(document.findings))
    conversion = convert_document(document.doc)
    findings = list(document.findings) + validate_conversion(conversion)
    return DocumentReport(document, conversion.documents, findings, list(conversion.partial))


def validate_files(paths: Iterable[str | Path]) -> Report:
    """Validate every document of ``paths``; one bad document never stops the others."""
    return Report([validate_loaded(d) for d in load_files(paths)])
