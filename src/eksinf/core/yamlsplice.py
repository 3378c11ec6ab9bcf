"""Stamps spliced into a machine-written YAML text, instead of parsing and re-emitting it.

A pinned upstream manifest (Argo CD's install.yaml: 1.9 MB, most of it three CRDs) is parsed to
know each object, and gains only a few metadata entries (its namespace, a sync wave). Writing
every document again to add them costs more than reading it; here each document keeps its own
text and the new entries are written into its `metadata:` block.

Meaning never changes. `documents` answers a stream's documents only when it can tell exactly
where each begins and ends (`---` lines, a leading `---`, `...` end markers, a BOM; no
directives, no content on a marker line, no line break but LF) and they are as many as the parse
found. `splice` writes into one document only when every line with content at column 0 is one
of its top-level keys, in order (so `metadata:` is its metadata key, and the lines up to the
next key are its value), that value holds no anchor, and the stamps only add entries, to
`metadata` or to a mapping in it. Its new `metadata:` block is then parsed on its own and must
give exactly the stamped metadata (key order and types included; `verify` does that for a
batch in one parse). Anything else answers None, and the caller writes that document with the
one writer (yamldump), as it writes every other output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from eksinf.core.kubeyaml import same_tree
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.errors import EksinfError

# A line with content at column 0, after its line break: a top-level key, an item of a list that
# is a key's value (`rules:` then `- apiGroups: ...`), a marker, or something this does not handle.
# (Anchored on the break, not `^`: a tenth of the time over 1.9 MB.)
_TOP = re.compile(r"\n[^ \n#][^\n]*")
_ITEM = re.compile(r"-(?: |$)")
# A top-level key as Kubernetes objects write theirs: a plain word, then `:` and a space or the
# line's end.
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9]*):(?: |$)")
_MARKER_REST = re.compile(r"[ \t]*(?:#.*)?")  # what may follow `---` or `...` on its line
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")
_HAS_CONTENT = re.compile(r"^[ \t]*[^ \t\n#]", re.MULTILINE)


@dataclass(frozen=True)
class DocText:
    """One document of a stream: its text is `stream[start:end]` (whole lines, without its
    `---`; kept as offsets, so a large document is not copied until it is written), and its
    top-level key lines, each the key and the line's offset in `stream`."""

    stream: str
    start: int
    end: int
    keys: tuple[tuple[str, int], ...]
    other: bool  # a line at column 0 that is neither a plain `key:` line nor a list item


def documents(text: str, count: int) -> list[DocText] | None:
    """The text of each non-empty document of `text`, in order; None when the stream is not one
    this splits exactly or does not hold `count` documents."""
    # YAML breaks lines at CR, NEL, LS and PS too: lines here are cut at LF only
    if any(brk in text for brk in _OTHER_BREAKS):
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    docs: list[DocText] = []
    start = 0  # where the current document's text begins
    keys: list[tuple[str, int]] = []
    other = False
    ended = False  # after `...`: nothing but comments until the next `---`

    def close(end: int) -> None:
        if keys or other or _HAS_CONTENT.search(text, start, end):
            docs.append(DocText(text, start, end, tuple(keys), other))

    # a line break before the text, so its first line is found like the others; offsets below
    # are in `text`
    for line in _TOP.finditer("\n" + text):
        value = line.group()[1:]
        line_start, line_end = line.start(), line.end() - 1
        if value.startswith(("---", "...")) and _MARKER_REST.fullmatch(value, 3):
            if value[0] == "-" or not ended:
                close(line_start)
            start, keys, other = line_end + 1, [], False
            ended = value[0] == "."
            continue
        if ended or value.startswith("%"):  # content after `...`; a directive
            return None
        key = _KEY.match(value)
        if key is not None:
            keys.append((key.group(1), line_start))
        elif not _ITEM.match(value):
            other = True
    if not ended:
        close(len(text))
    return docs if len(docs) == count else None


@dataclass(frozen=True)
class Splice:
    """A document's text with its stamps written in (`pieces`, to be joined), and the
    `metadata:` block it now has (what `verify` parses)."""

    pieces: tuple[str, str, str]
    block: str
    metadata: dict[str, Any]


def metadata_copy(doc: Any) -> dict[str, Any] | None:
    """What `splice` compares the stamped metadata with: a copy of `doc`'s metadata two levels
    deep (the levels stamps add to), taken before stamping. None when it is not a mapping."""
    meta = doc.get("metadata") if type(doc) is dict else None
    if type(meta) is not dict:
        return None
    return {k: dict(v) if type(v) is dict else v for k, v in meta.items()}


def splice(doc: DocText, parsed: dict[str, Any], before: dict[str, Any] | None) -> Splice | None:
    """`doc`'s text with the entries `parsed["metadata"]` gained since `before` (its copy from
    `metadata_copy`) written into its `metadata:` block; None when its shape is not one this
    handles. Not yet verified: see `verify`."""
    after = parsed.get("metadata")
    if doc.other or before is None or type(after) is not dict:
        return None
    if doc.end <= doc.start or doc.stream[doc.end - 1] != "\n":
        return None
    names = [name for name, _ in doc.keys]
    if names != list(parsed) or len(after) < len(before):
        return None
    index = names.index("metadata")
    begin = doc.keys[index][1]
    end = doc.keys[index + 1][1] if index + 1 < len(doc.keys) else doc.end
    region = doc.stream[begin:end]
    if "&" in region or not region.endswith("\n"):
        return None
    lines = region.split("\n")[:-1]
    if lines[0].rstrip(" ") != "metadata:":
        return None
    before_keys = list(before)
    if list(after)[: len(before_keys)] != before_keys:
        return None
    for key in before_keys:  # entries may only be added, to metadata or a mapping in it
        old, new = before[key], after[key]
        if type(old) is dict and type(new) is dict and list(new)[: len(old)] == list(old):
            added = {k: new[k] for k in list(new)[len(old) :]}
            if any(not same_tree(old[k], new[k]) for k in old):
                return None
            if added and not _append_into(lines, key, added):
                return None
        elif not same_tree(old, new):
            return None
    added = {k: after[k] for k in list(after)[len(before_keys) :]}
    if added:
        indent = _child_indent(lines, 0, len(lines), 0)
        if indent is None:
            return None
        at = _last_content(lines, 0, len(lines)) + 1
        lines[at:at] = _entries(added, indent)
    block = "\n".join(lines) + "\n"
    return Splice((doc.stream[doc.start : begin], block, doc.stream[end : doc.end]), block, after)


def verify(splices: list[Splice | None]) -> list[Splice | None]:
    """`splices` with None for each whose `metadata:` block does not parse on its own to exactly
    its stamped metadata. One parse for all of them; one each only when that one fails."""
    made = [s for s in splices if s is not None]
    if not made:
        return splices
    try:
        parsed = load_docs("".join("---\n" + s.block for s in made), cached=False)
    except (yaml.YAMLError, EksinfError):
        parsed = []
    if len(parsed) != len(made):
        parsed = [_parse_alone(s.block) for s in made]
    good = {
        id(s)
        for s, got in zip(made, parsed, strict=True)
        if same_tree(got, {"metadata": s.metadata})
    }
    return [s if s is not None and id(s) in good else None for s in splices]


def _parse_alone(block: str) -> Any:
    try:
        docs = load_docs(block, cached=False)
    except (yaml.YAMLError, EksinfError):
        return None
    return docs[0] if len(docs) == 1 else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.lstrip(" ")
    return bool(stripped) and not stripped.startswith("#")


def _last_content(lines: list[str], start: int, end: int) -> int:
    return max(i for i in range(start, end) if _is_content(lines[i]))


def _child_indent(lines: list[str], start: int, end: int, parent: int) -> int | None:
    """The indentation of the first entry under the line `start`, deeper than `parent`."""
    for i in range(start + 1, end):
        if _is_content(lines[i]):
            indent = _indent(lines[i])
            return indent if indent > parent else None
    return None


def _append_into(lines: list[str], key: str, added: dict[str, Any]) -> bool:
    """Append `added` to the block mapping under `key:` (a direct entry of the metadata block)."""
    outer = _child_indent(lines, 0, len(lines), 0)
    if outer is None:
        return False
    head = " " * outer + key + ":"
    at = [i for i, line in enumerate(lines) if line.rstrip(" ") == head]
    if len(at) != 1:
        return False
    start = at[0]
    end = start + 1
    while end < len(lines) and (not lines[end].strip(" ") or _indent(lines[end]) > outer):
        end += 1
    inner = _child_indent(lines, start, end, outer)
    if inner is None:
        return False
    last = _last_content(lines, start, end) + 1
    lines[last:last] = _entries(added, inner)
    return True


def _entries(added: dict[str, Any], indent: int) -> list[str]:
    """`added` as block mapping lines at `indent`, in the one writer's style."""
    text = dump_docs([added])
    pad = " " * indent
    return [pad + line if line else line for line in text.removeprefix("---\n").split("\n")[:-1]]
