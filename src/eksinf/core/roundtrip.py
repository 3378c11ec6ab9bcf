"""Edits that keep a unit as its author wrote it: comments, quoting, key order, indentation and
document markers survive, and only the edited fields change (ruamel.yaml's round trip).

Bulk reads stay on libyaml (`yamlio`): this path is for the few units an edit touches (hub
functions, link writes). Its answer is trusted only where it means what `yamlio` reads:

- before the edit, the round-trip documents must equal `yamlio.load_docs` of the same text (a
  scalar YAML 1.2 reads otherwise than Kubernetes, such as `yes` or `0755`, would not);
- after it, `yamlio.load_docs` of the written text must equal the edited documents.

Where either fails, the edit runs on `yamlio`'s documents and the unit is written in eksinf's one
style (`yamldump.dump_docs`): its meaning is always right; only its layout may be lost.

ruamel does not keep how a plain scalar was folded over lines: it writes each on one line. The
units eksinf writes never fold; those that keep a pinned manifest's own text (Argo CD's, whose
upstream folds long descriptions and commands at 80 columns) have such scalars written on one
line by any edit that writes them, with the same meaning.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

from eksinf.core import kubeyaml
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs

Edit = Callable[[list[Any]], bool]
# comment lines before a first `---`: ruamel drops them, so they are kept aside as written
_HEAD = re.compile(r"(?:[ \t]*(?:#[^\n]*)?\n)*(?=---(?:[ \t]|\n|$))")

_STR_TAG = "tag:yaml.org,2002:str"


def _indents(text: str) -> tuple[int, int]:
    """(mapping indent, offset of a sequence's dash from its key), as the text writes them: the
    first line nested under a `key:` line decides each; else 2 and 0 (yamldump.dump_docs's)."""
    mapping = offset = None
    opener: int | None = None  # the column of the key that opened a block on the previous line
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip(" "))
        dash = stripped.startswith("- ")
        if opener is not None:
            if dash and offset is None and indent >= opener:
                offset = indent - opener
            elif not dash and mapping is None and indent > opener:
                mapping = indent - opener
        if mapping is not None and offset is not None:
            break
        opener = (indent + 2 if dash else indent) if stripped.endswith(":") else None
    return mapping or 2, offset or 0


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 30  # never fold a long line the author did not fold
    mapping, offset = _indents(text)
    yaml.indent(mapping=mapping, sequence=mapping + offset, offset=offset)
    yaml.explicit_start = text.lstrip().startswith("---")
    representer = yaml.representer

    def plain_or_quoted(dumper: Any, value: str) -> Any:
        # a new string is written plain only where Kubernetes reads it back as this text
        # (a value "on" or "1e3" is quoted), as yamlio's writer does
        style = None if kubeyaml.plain_is_text(value) else "'"
        if "\n" in value:
            style = "|"
        return dumper.represent_scalar(_STR_TAG, value, style=style)

    def null(dumper: Any, _value: None) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:null", "null")  # not an empty value

    representer.add_representer(str, plain_or_quoted)
    representer.add_representer(type(None), null)
    return yaml


def _plain_docs(docs: list[Any]) -> list[Any]:
    return [d for d in docs if d is not None]  # yamlio drops empty documents


def edit_text(text: str, edit: Edit, label: str = "unit") -> str | None:
    """Run `edit` on the documents of `text`; the new text, or None when it changed nothing."""
    plain = load_docs(text, label)  # bounded and checked, as every read
    # The edit decides "changed" by value, which both readers agree on (checked below before a
    # round-trip answer is trusted): an edit that changes nothing, the usual case of a rerun,
    # costs one libyaml read and no ruamel parse. Its documents were edited, so read afresh.
    if not edit(plain):
        return None
    plain = load_docs(text, label)
    from ruamel.yaml import YAMLError  # loaded only for an edit that writes

    head_match = _HEAD.match(text)
    head = head_match.group(0) if head_match else ""
    try:
        yaml = _yaml(text)
        docs = _plain_docs(list(yaml.load_all(text[len(head) :])))
        same = docs == plain
    except (YAMLError, RecursionError, ValueError):
        same = False
    if same:
        if not edit(docs):
            return None
        out = io.StringIO()
        yaml.dump_all(docs, out)
        written = _keep_trailer(text, head + out.getvalue())
        try:
            if load_docs(written, label, cached=False) == docs:
                return written
        except Exception:  # noqa: BLE001 - any doubt: the canonical writer below
            pass
        plain = load_docs(text, label)  # the edit ran on the round-trip copy; start again
    if not edit(plain):
        return None
    return dump_docs(plain)


def _keep_trailer(before: str, after: str) -> str:
    """The final newline as the original had it."""
    if before.endswith("\n") and not after.endswith("\n"):
        return after + "\n"
    return after
