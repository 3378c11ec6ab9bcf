"""YAML in and out.

Two readers over one parser (libyaml, YAML 1.1 like Helm's own parser, timestamps kept as text):
- `load_source` parses files people write (values, handwritten resources, components.yaml)
  strictly: tabs in indentation, duplicate keys and syntax errors are errors naming
  `file:line:col`;
- `load_docs` parses text we produced ourselves (Helm output, committed units), which is already
  known to be well formed, without the extra checks.

One writer, `dump_docs`, so the same documents always give the same bytes.

Both `load_docs` and `dump_docs` are pure, and most of what a command reads or writes (committed
units, a pinned upstream manifest, a chart's output) is the same text run after run, so large
inputs go through the content-addressed cache (eksinf.cache): a parse is looked up by the text,
a serialisation by the documents' repr, which names them exactly (types, key order, escapes).

Both readers are bounded, so a hostile document (a "billion laughs" alias bomb, a deeply nested
or huge file) is a clear error, never a hang in a later walk: at most MAX_TEXT characters per
file, MAX_DEPTH levels of nesting, and MAX_NODES nodes per file counted with every alias
expanded (the count is linear in the composed graph, which aliases keep small). Hand-written
units refuse anchors and aliases outright: they do not survive flattening (docs/flattening.md).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from . import cache, inside
from .errors import CONTRACT, EksinfError

_TAB_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)


MAX_TEXT = inside.MAX_FILE_BYTES
MAX_DEPTH = 200  # the deepest real unit (a CRD schema) nests ~25 levels
MAX_NODES = 1_000_000  # the largest real unit file has ~10 000 nodes
CACHED_TEXT = 2 << 10  # below this a parse or dump costs less than a cache lookup
# what a cached entry depends on besides its input: this module's output, the YAML library, and
# the interpreter
_CACHE_FORMAT = f"yamlio-2 json pyyaml-{yaml.__version__} {sys.version}".encode()


def _location(path: str, mark: Any) -> str:
    if mark is None:
        return path
    return f"{path}:{mark.line + 1}:{mark.column + 1}"


class _MemoResolver:
    """Resolving a plain scalar's type runs Python regexes for every scalar, on the way in (the
    loader) and on the way out (the emitter asks twice per scalar). CRD schemas repeat the same
    few hundred values thousands of times, so short values are resolved once per class."""

    _resolved: dict[tuple[str, Any], str]

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode or len(value) > 64:
            return super().resolve(kind, value, implicit)  # type: ignore[misc]
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if len(self._resolved) < 100_000:
                self._resolved[key] = tag
        return tag


# libyaml loader that keeps timestamps as strings: a date in a label must not turn into a datetime.
class _Loader(_MemoResolver, yaml.CSafeLoader):
    _resolved = {}


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _StrictLoader(_Loader):
    """Refuses duplicate keys, which YAML parsers otherwise resolve silently (last one wins)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key_node, _ in node.value:
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise _DuplicateKey(
                    context="first defined",
                    context_mark=seen[key].start_mark,
                    problem=f'duplicate key "{key_node.value}"',
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _too_big(name: str, what: str, hint: str) -> EksinfError:
    return EksinfError(f"{name}: {what}", hint=hint, exit_code=CONTRACT)


def _check_text(text: str, name: str) -> None:
    if len(text) > MAX_TEXT:
        raise _too_big(
            name,
            f"{len(text)} characters, over the {MAX_TEXT >> 20} MiB limit for one YAML file",
            "Split the file; no unit or values file of a real stack comes near this size.",
        )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a parse or dump allocates: a large document
    makes tens of thousands of containers, each allocation counts towards a collection pass
    over all of them, and none of them can be garbage before the parse ends. This more than
    halves the parse of a large CRD file."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _bound(root: yaml.Node, name: str, aliases: bool, budget: list[int]) -> None:
    """Refuse a document that nests deeper than MAX_DEPTH, reuses a node (an alias) when
    `aliases` is False, refers to itself, or expands beyond the file's remaining node budget
    (`budget[0]`, shared by the documents of one file). Memoised per node, so linear in the
    composed graph however large the expansion; recursion stops at MAX_DEPTH, so a hostile depth
    never reaches Python's stack limit."""
    # id(container) -> (size with aliases expanded, height), once it is walked; an id in `open_`
    # is being walked, so meeting it again is a recursive alias
    done: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    # scalars are leaves (size and height 1); they are tracked only to refuse a reused one
    scalars: set[int] | None = None if aliases else set()

    def fail(node: yaml.Node, what: str, hint: str) -> EksinfError:
        return _too_big(_location(name, node.start_mark), what, hint)

    def too_deep(node: yaml.Node) -> EksinfError:
        return fail(
            node,
            f"nested deeper than {MAX_DEPTH} levels",
            "Flatten the structure; no real unit nests this deep.",
        )

    def reused(node: yaml.Node) -> EksinfError:
        return EksinfError(
            f"{_location(name, node.start_mark)}: YAML anchor used by an alias; units "
            "must not use anchors and aliases",
            hint="Write the value out in full: units are flattened to plain per-file YAML, "
            "and shared anchors do not survive that (docs/flattening.md).",
            exit_code=CONTRACT,
        )

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise too_deep(node)
        if type(node) is yaml.ScalarNode:
            if scalars is not None:
                if id(node) in scalars:
                    raise reused(node)
                scalars.add(id(node))
            return 1, 1
        key = id(node)
        if key in open_:
            raise fail(
                node,
                "a YAML alias refers to the node that contains it (a recursive document)",
                "Remove the anchor and alias.",
            )
        memo = done.get(key)
        if memo is not None:  # an alias of a node already walked
            if not aliases:
                raise reused(node)
            if depth + memo[1] - 1 > MAX_DEPTH:
                raise too_deep(node)
            return memo
        open_.add(key)
        children = (
            [n for pair in node.value for n in pair]
            if type(node) is yaml.MappingNode
            else node.value
        )
        size, height = 1, 1
        for child in children:
            child_size, child_height = walk(child, depth + 1)
            size += child_size
            if child_height >= height:
                height = child_height + 1
        if size > budget[0]:
            raise fail(
                node,
                f"expands to more than {MAX_NODES} YAML nodes in one file (aliases repeat "
                "what they point to: an alias bomb?)",
                "Write the content out without anchors and aliases.",
            )
        open_.discard(key)
        done[key] = (size, height)
        return size, height

    budget[0] -= walk(root, 1)[0]


def read_source_text(
    path: Path, label: str | None = None, *, folder: Path | None = None, base: Path | None = None
) -> str:
    """Read a hand-written source file as UTF-8 with LF line endings; a file that is not UTF-8
    is an input error naming the file, line and byte (a raw UnicodeDecodeError would reach the
    user as a traceback).

    The file must be a regular file inside `folder` (default: its own folder) with no link on
    the way, and of bounded size (inside.read_bytes); `base` shortens names in those errors.
    """
    full = Path(os.path.abspath(path))
    data = inside.read_bytes(full, folder if folder is not None else full.parent, base)
    try:
        # CRLF (and lone CR) become LF: a unit copied with CR bytes would look identical in
        # every diff line yet never match, and YAML and Helm read both the same way
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise EksinfError(
            f"{label or path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}: {exc.reason})",
            hint="Save the file as UTF-8 (YAML and versions.env sources must be UTF-8 text).",
            exit_code=CONTRACT,
        ) from exc


def load_source(
    path: Path, text: str | None = None, *, label: str | None = None, aliases: bool = True
) -> list[Any]:
    """Parse a hand-written YAML file strictly; return its non-empty documents.

    Raises EksinfError (exit 3) naming `file:line:col` for tabs, duplicate keys, syntax errors,
    documents over the size, depth or node bounds (aliases expanded), and - when `aliases` is
    False, as for units - any anchor used by an alias.
    """
    name = label or str(path)
    if text is None:
        text = read_source_text(path, name)
    _check_text(text, name)
    tab = _TAB_INDENT.search(text)
    if tab:
        line = text.count("\n", 0, tab.start()) + 1
        col = tab.end() - tab.start()
        raise EksinfError(
            f"{name}:{line}:{col}: tab character in indentation",
            hint="YAML indentation must use spaces; replace the tab with spaces.",
            exit_code=CONTRACT,
        )
    kind = b"load_source aliases" if aliases else b"load_source no-aliases"
    return _through_cache(kind, text, lambda: _load_source(text, name, aliases))


def _load_source(text: str, name: str, aliases: bool) -> list[Any]:
    with _gc_paused():
        return _load_source_docs(text, name, aliases)


def _load_source_docs(text: str, name: str, aliases: bool) -> list[Any]:
    loader = _StrictLoader(text)
    budget = [MAX_NODES]
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                _bound(node, name, aliases, budget)
            docs.append(loader.construct_document(node))
    except _DuplicateKey as exc:
        raise EksinfError(
            f"{_location(name, exc.problem_mark)}: {exc.problem}, "
            f"first defined at {_location(name, exc.context_mark)}",
            hint="Remove one of the two keys: YAML parsers silently keep only one of them.",
            exit_code=CONTRACT,
        ) from exc
    except yaml.MarkedYAMLError as exc:
        raise EksinfError(
            f"{_location(name, exc.problem_mark)}: YAML syntax error: {exc.problem}",
            hint="Fix the YAML syntax at that position.",
            exit_code=CONTRACT,
        ) from exc
    except yaml.YAMLError as exc:  # errors without a position, e.g. an unknown tag
        raise EksinfError(f"{name}: YAML error: {exc}", exit_code=CONTRACT) from exc
    finally:
        loader.dispose()
    return [d for d in docs if d is not None]


def load_mapping_docs(
    path: Path, text: str | None = None, *, label: str | None = None, aliases: bool = True
) -> list[dict]:
    """Like `load_source`, but every document must be a mapping (a Kubernetes-style object)."""
    name = label or str(path)
    if text is None:
        text = read_source_text(path, name)
    docs = load_source(path, text, label=label, aliases=aliases)
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise EksinfError(
                f"{_non_mapping_location(name, text)}: document {index + 1} is a "
                f"{type(doc).__name__}, not a mapping",
                hint="Each YAML document must be a mapping such as a Kubernetes resource.",
                exit_code=CONTRACT,
            )
    return docs


def _non_mapping_location(name: str, text: str) -> str:
    """`file:line:col` of the first non-empty document that is not a mapping."""
    for node in yaml.compose_all(text, Loader=_Loader):
        if node is None or node.tag == "tag:yaml.org,2002:null":
            continue
        if node.tag != "tag:yaml.org,2002:map":
            return _location(name, node.start_mark)
    return name


def load_docs(text: str, label: str = "YAML input") -> list[Any]:
    """Parse machine-written multi-document YAML; empty documents are dropped.

    Bounded like every read (MAX_TEXT, MAX_DEPTH, MAX_NODES with aliases expanded): this text may
    come from a bundle, a pull, the hub or cub. `label` names it in those errors.

    Same result as `yaml.load_all` with our loader, built straight from libyaml's node tree:
    strings and containers need none of the generic constructor's bookkeeping, which is most of
    the parse time for large CRDs. Other scalars (ints, bools, nulls, ...) and documents with
    merge keys go through the standard constructor.
    """
    _check_text(text, label)
    return _through_cache(b"load_docs", text, lambda: _load_docs(text, label))


def _through_cache(kind: bytes, text: str, parse: Callable[[], list[Any]]) -> list[Any]:
    """`parse()` of `text`, from the derived-data cache when it was parsed before. Only a
    successful parse is stored, so a text that fails (syntax, bounds) fails every time. Entries
    are JSON, and only documents JSON holds exactly are stored (below), so a served parse equals
    a fresh one, types included."""
    if len(text) < CACHED_TEXT:
        return parse()
    entry = cache.key(_CACHE_FORMAT, kind, text.encode())
    hit = cache.get("yaml", entry)
    if hit is not None:
        with contextlib.suppress(ValueError, RecursionError):
            docs = json.loads(hit)
            if isinstance(docs, list):
                return docs
    docs = parse()
    if _json_exact(docs):
        with contextlib.suppress(ValueError, RecursionError):
            cache.put("yaml", entry, json.dumps(docs, ensure_ascii=False).encode())
    return docs


_JSON_SCALARS = (str, int, bool, type(None))


def _json_exact(docs: list[Any]) -> bool:
    """Whether JSON gives back exactly these documents: string keys only, finite floats, and no
    other types (a YAML int key, a NaN, a timestamp object or bytes are parsed afresh each
    time). Iterative, over a tree that is already bounded."""
    stack: list[Any] = [docs]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            if any(type(k) is not str for k in node):
                return False
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is float:
            if not math.isfinite(node):
                return False
        elif kind not in _JSON_SCALARS:
            return False
    return True


def _load_docs(text: str, label: str) -> list[Any]:
    with _gc_paused():
        return _load_machine_docs(text, label)


def _load_machine_docs(text: str, label: str) -> list[Any]:
    loader = _Loader(text)
    budget = [MAX_NODES]
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # check_node() said there is one
                break
            _bound(node, label, True, budget)
            try:
                doc = _build(node, loader, {})
            except _NeedsConstructor:
                doc = loader.construct_document(node)
            if doc is not None:
                docs.append(doc)
        return docs
    finally:
        loader.dispose()


class _NeedsConstructor(Exception):
    pass


_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"


def _build(node: yaml.Node, loader: _Loader, built: dict[int, Any]) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _STR else loader.construct_object(node)
    if id(node) in built:  # an alias: the same object, as the standard constructor gives
        return built[id(node)]
    if isinstance(node, yaml.MappingNode):
        mapping: dict = {}
        built[id(node)] = mapping
        for key, value in node.value:
            if key.tag == _MERGE:
                raise _NeedsConstructor
            mapping[_build(key, loader, built)] = _build(value, loader, built)
        return mapping
    sequence: list = []
    built[id(node)] = sequence
    sequence.extend(_build(item, loader, built) for item in node.value)
    return sequence


_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Shared(Exception):
    """A document holds the same container twice: the generic representer writes it once with an
    anchor and aliases after, which the fast path below does not."""


class _Dumper(_MemoResolver, yaml.CSafeDumper):
    _resolved = {}

    def represent(self, data: Any) -> None:
        # Documents are dicts, lists and strings all the way down; building their nodes directly
        # gives the generic representer's nodes (block style, as default_flow_style=False asks)
        # without its per-object bookkeeping, most of a dump's time. Other scalars go through
        # the representer.
        try:
            node = self._node(data, set())
        except _Shared:
            super().represent(data)
            return
        self.serialize(node)

    def _node(self, data: Any, seen: set[int]) -> yaml.Node:
        kind = type(data)
        if kind is str:
            return _str_node(data)
        if kind is dict or kind is list:
            if id(data) in seen:
                raise _Shared
            seen.add(id(data))
            if kind is dict:
                pairs = [(self._node(k, seen), self._node(v, seen)) for k, v in data.items()]
                return yaml.MappingNode(_MAP, pairs, flow_style=False)
            items = [self._node(item, seen) for item in data]
            return yaml.SequenceNode(_SEQ, items, flow_style=False)
        node = self.represent_data(data)
        self.represented_objects.clear()
        return node


def _str_node(value: str) -> yaml.ScalarNode:
    # Block style keeps long descriptions (CRD schemas) readable and diffable line by line.
    return yaml.ScalarNode(_STR, value, style="|" if "\n" in value else None)


def _represent_str(dumper: Any, value: str) -> yaml.Node:
    return _str_node(value)


_Dumper.add_representer(str, _represent_str)


def dump_docs(docs: list[Any]) -> str:
    """Serialise documents deterministically: key order kept, no line folding, `---` before each."""
    shown = repr(docs)
    if len(shown) < CACHED_TEXT:
        return _dump_docs(docs)
    dump_key = cache.key(_CACHE_FORMAT, b"dump_docs", shown.encode())
    hit = cache.get("yaml", dump_key)
    if hit is not None:
        with contextlib.suppress(UnicodeDecodeError):
            return hit.decode()
    text = _dump_docs(docs)
    cache.put("yaml", dump_key, text.encode())
    return text


# key order kept, block style, `---` before each document, no line folding
DUMP_OPTIONS: dict[str, Any] = {
    "sort_keys": False,
    "default_flow_style": False,
    "explicit_start": True,
    "allow_unicode": True,
    "width": 1 << 30,
}


def _dump_docs(docs: list[Any]) -> str:
    with _gc_paused():
        return yaml.dump_all(docs, Dumper=_Dumper, **DUMP_OPTIONS)
