"""Edits that keep a unit as its author wrote it: comments, quoting, key order, indentation and
document markers survive, and only the edited fields change (ruamel.yaml's round trip).

Only the top-level entries an edit changes (a document's `metadata:` or `spec:`, from its key
line to the next) go through the round trip, each as a text of its own; every other line is
kept as written (`_by_region`). Where a stream is not one that splits so, or the edit adds,
removes or moves a top-level entry, the whole text goes through it (`_round_trip`).

Bulk reads stay on libyaml (`yamlio`): this path is for the few units an edit touches (hub
functions, link writes). Its answer is trusted only where it means what `yamlio` reads:

- before the edit, the round-trip documents must equal `yamlio.load_docs` of the same text (a
  scalar YAML 1.2 reads otherwise than Kubernetes, such as `yes` or `0755`, would not);
- after it, `yamlio.load_docs` of the written text must equal the edited documents.

Where either fails, the edit runs on `yamlio`'s documents and the unit is written in eksinf's one
style (`yamldump.dump_docs`): its meaning is always right; only its layout may be lost.

ruamel does not keep how a scalar was folded over lines: it writes each on one line. The units
eksinf writes never fold, so their round trip with no edit is their own text. Those that keep a
pinned manifest's text (Argo CD's upstream folds long descriptions and commands at 80 columns)
do not, and there an edit's round trip would unfold every such scalar. So where the text holds a
scalar over several lines (seen while ruamel reads it), the unedited documents are written too
(R0), and the line diff from R0 to the edited text (R1) is applied to the original text instead:
each hunk only where the original's lines are exactly R0's, so the lines an edit did not touch
stay as written. That result is kept only when `yamlio.load_docs` reads it exactly as it reads R1
(key order and types included); a hunk that cannot be placed, or any other reading, gives R1.
"""

from __future__ import annotations

import copy
import io
import re
from collections.abc import Callable
from typing import Any

from eksinf.core import kubeyaml
from eksinf.core.kubeyaml import same_tree
from eksinf.core.textdiff import opcodes
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


def _yaml(text: str, layout: str) -> Any:
    """ruamel's round trip for `text`, writing new blocks indented as `layout` (the whole unit)
    indents its own."""
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import RoundTripConstructor

    class Constructor(RoundTripConstructor):
        folded = False  # whether a plain or quoted scalar spans lines (ruamel writes it on one)

        def construct_scalar(self, node: Any) -> Any:
            if node.style not in ("|", ">") and node.start_mark.line != node.end_mark.line:
                self.folded = True
            return super().construct_scalar(node)

    yaml = YAML(typ="rt")
    yaml.Constructor = Constructor
    yaml.preserve_quotes = True
    yaml.width = 1 << 30  # never fold a long line the author did not fold
    mapping, offset = _indents(layout)
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
    # costs one libyaml read and no ruamel parse.
    if not edit(plain):
        return None
    before = load_docs(text, label)  # the edit changed `plain` in place
    return _by_region(text, before, plain, label) or _round_trip(text, edit, label)


def write_onto(text: str, docs: list[Any], label: str = "unit") -> str:
    """`docs` written in the layout of `text` (a unit they were made from, such as a merge's
    new upload): the top-level entries that differ go through the round trip, the rest of
    `text` is kept as written; where `text` and `docs` do not match document for document, the
    one writer's style."""
    if not docs:
        return ""
    before = load_docs(text, label)
    if same_tree(before, docs):
        return text
    written = _by_region(text, before, docs, label)
    if written is None and len(before) == len(docs):
        written = _round_trip(text, _all_become(docs), label)
    return written if written is not None else dump_docs(docs)


def _all_become(targets: list[Any]) -> Edit:
    """An edit that makes each mapping document equal to its target (`_becomes`, for every
    document of a stream)."""

    def edit(docs: list[Any]) -> bool:
        if len(docs) != len(targets):
            return False
        if not all(
            isinstance(d, dict) and type(t) is dict for d, t in zip(docs, targets, strict=True)
        ):
            return False
        return any([_assign(doc, target) for doc, target in zip(docs, targets, strict=True)])

    return edit


def _by_region(text: str, before: list[Any], edited: list[Any], label: str) -> str | None:
    """`text` (whose documents are `before`) with only the top-level entries that differ in
    `edited` written again, each through its own round trip, and every other line as it was;
    None when the stream or the edit is not one this handles (the whole text's round trip then
    answers).

    ruamel reads ~0.25 MB a second: a label set on a unit of Argo CD's three CRDs (1.8 MB) took
    ~7 s through the whole text, and its `metadata:` blocks are a few hundred bytes. Handled: a
    stream `yamlsplice.documents` splits exactly, whose documents are mappings that keep their
    top-level keys, in order, each a `key:` line at column 0. The result must read exactly as
    the edited documents do (key order and types included)."""
    if len(before) != len(edited):
        return None
    from eksinf.core.yamlsplice import documents  # only an edit that writes

    found = documents(text, len(before))
    if found is None:
        return None
    out: list[str] = []
    cursor = 0
    for doc, old, new in zip(found, before, edited, strict=True):
        if same_tree(old, new):
            continue
        keys = [key for key, _ in doc.keys]
        if type(old) is not dict or type(new) is not dict or doc.other or keys != list(old):
            return None
        if list(new) != keys:
            return None  # a top-level key added, removed or moved
        ends = [at for _, at in doc.keys[1:]] + [doc.end]
        for (key, begin), end in zip(doc.keys, ends, strict=True):
            if same_tree(old[key], new[key]):
                continue
            # the entry, then a last line that stays: an entry appended at the end of the
            # region is placed before a line the original and the round trip share, as within
            # the whole text (see `_placed`)
            region = text[begin:end]
            if not region.endswith("\n"):
                return None
            target = {key: new[key], _REGION_END: True}
            try:
                written = _round_trip(
                    region + f"{_REGION_END}: true\n", _becomes(target), label, layout=text
                )
            except Exception:  # noqa: BLE001 - not read alone (an alias of another entry's anchor)
                return None
            if written is None or not written.endswith(f"\n{_REGION_END}: true\n"):
                return None
            # (the one writer, where the round trip is not trusted, starts with `---`)
            out += [text[cursor:begin], written[: -len(_REGION_END) - 7].removeprefix("---\n")]
            cursor = end
    out.append(text[cursor:])
    result = "".join(out)
    try:
        reading = load_docs(result, label, cached=False)
    except Exception:  # noqa: BLE001 - any doubt: the whole text's round trip
        return None
    return result if same_tree(reading, edited) else None


_REGION_END = "eksinf-region-end"


def _becomes(target: dict[str, Any]) -> Edit:
    """An edit that makes a one-document stream's mapping equal to `target`, changing only what
    differs, so the round trip keeps the rest as written."""

    def edit(docs: list[Any]) -> bool:
        return len(docs) == 1 and isinstance(docs[0], dict) and _assign(docs[0], target)

    return edit


def _assign(mapping: Any, target: dict[str, Any]) -> bool:
    """Make `mapping` (a plain or a round-trip mapping) equal to `target` in place: entries
    target lacks removed, differing ones replaced (a mapping, or a list of the same length,
    changed within), new ones appended. Whether anything changed."""
    changed = False
    for key in [key for key in mapping if key not in target]:
        del mapping[key]
        changed = True
    for key, value in target.items():
        if key in mapping and not same_tree(_plain(mapping[key]), value):
            changed |= _replace(mapping, key, value)
        elif key not in mapping:
            mapping[key] = copy.deepcopy(value)
            changed = True
    return changed


def _replace(container: Any, at: Any, value: Any) -> bool:
    current = container[at]
    if isinstance(current, dict) and type(value) is dict:
        return _assign(current, value)
    if isinstance(current, list) and type(value) is list and len(current) == len(value):
        return any([_replace(current, i, item) for i, item in enumerate(value)])
    if same_tree(_plain(current), value):
        return False
    container[at] = copy.deepcopy(value)
    return True


def _plain(node: Any) -> Any:
    """A round-trip node as plain data (ruamel's mappings, lists and scalar strings are
    subclasses), for `same_tree`, which compares exact types."""
    if isinstance(node, dict):
        return {_plain(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _round_trip(text: str, edit: Edit, label: str, layout: str | None = None) -> str | None:
    """`edit` through ruamel's round trip of the whole of `text` (see the module docstring);
    `layout`: the unit `text` is a part of, whose indentation new blocks follow (a part's parse
    is not kept in the cache: no other run reads that text)."""
    plain = load_docs(text, label, cached=layout is None)
    from ruamel.yaml import YAMLError  # loaded only for an edit that writes

    head_match = _HEAD.match(text)
    head = head_match.group(0) if head_match else ""
    try:
        yaml = _yaml(text, layout or text)
        docs = _plain_docs(list(yaml.load_all(text[len(head) :])))
        same = docs == plain
    except (YAMLError, RecursionError, ValueError):
        same = False
    if same:
        # the unedited round trip, only where it is known not to be the text itself
        unedited = _dump(yaml, docs, text, head) if yaml.constructor.folded else text
        if not edit(docs):
            return None
        written = _dump(yaml, docs, text, head)
        try:
            meaning = load_docs(written, label, cached=False)
            if meaning == docs:
                if unedited == text:
                    return written
                return _placed(text, unedited, written, meaning, label) or written
        except Exception:  # noqa: BLE001 - any doubt: the canonical writer below
            pass
        plain = load_docs(
            text, label, cached=layout is None
        )  # the edit ran on the round-trip copy; start again
    if not edit(plain):
        return None
    return dump_docs(plain)


def _dump(yaml: Any, docs: list[Any], text: str, head: str) -> str:
    out = io.StringIO()
    yaml.dump_all(docs, out)
    return _keep_trailer(text, head + out.getvalue())


def _placed(original: str, unedited: str, edited: str, meaning: Any, label: str) -> str | None:
    """The edit (the line diff `unedited` -> `edited`) applied to `original`, where the round
    trip `unedited` differs from it; None when a hunk falls where the two differ, or the result
    does not read exactly as `meaning` (the reading of `edited`)."""
    o_lines = original.splitlines(keepends=True)
    r0_lines = unedited.splitlines(keepends=True)
    r1_lines = edited.splitlines(keepends=True)
    # the runs where the original and R0 agree, as (start in R0, end in R0, start in original)
    agree = [
        (j1, j2, i1)
        for tag, i1, _i2, j1, j2 in opcodes(o_lines, r0_lines, autojunk=False)
        if tag == "equal"
    ]
    out: list[str] = []
    cursor = 0  # the original's lines up to here are written
    run = 0
    for tag, i1, i2, j1, j2 in opcodes(r0_lines, r1_lines, autojunk=False):
        if tag == "equal":
            continue
        while run < len(agree) and agree[run][1] < i2:
            run += 1
        if run == len(agree) or not agree[run][0] <= i1:
            return None  # the hunk touches lines the round trip changed
        start = agree[run][2] + i1 - agree[run][0]
        out += o_lines[cursor:start]
        out += r1_lines[j1:j2]
        cursor = start + i2 - i1
    out += o_lines[cursor:]
    result = "".join(out)
    try:
        reading = load_docs(result, label, cached=False)
    except Exception:  # noqa: BLE001 - not read as YAML: the round trip's text
        return None
    return result if kubeyaml.same_tree(reading, meaning) else None


def _keep_trailer(before: str, after: str) -> str:
    """The final newline as the original had it."""
    if before.endswith("\n") and not after.endswith("\n"):
        return after + "\n"
    return after
