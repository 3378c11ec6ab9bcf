"""YAML in and out.

Two readers over one parser (libyaml; plain scalars read as Kubernetes and Helm read them,
kubeyaml.kube_scalar, so timestamps stay text):
- `load_source` parses files people write (values, handwritten resources, components.yaml)
  strictly: tabs in indentation, duplicate keys and syntax errors are errors naming
  `file:line:col`;
- `load_docs` parses text we produced ourselves (Helm output, committed units), which is already
  known to be well formed, without the extra checks.

One writer, `yamldump.dump_docs`, so the same documents always give the same bytes.

Both `load_docs` and `dump_docs` are pure, and most of what a command reads or writes (committed
units, a pinned upstream manifest, a chart's output) is the same text run after run, so large
inputs go through the content-addressed cache (eksinf.core.cache): a parse is looked up by the text,
a serialisation by the documents' repr, which names them exactly (types, key order, escapes).

Both readers are bounded, so a hostile document (a "billion laughs" alias bomb, a deeply nested
or huge file) is a clear error, never a hang in a later walk: at most MAX_TEXT characters per
file, MAX_DEPTH levels of nesting, and MAX_NODES nodes per file counted with every alias
expanded (the count is linear in the composed graph, which aliases keep small). Hand-written
units refuse anchors and aliases outright: they do not survive flattening (docs/flattening.md).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import yaml

from eksinf.core import cache, inside, kubeyaml
from eksinf.core.types import Docs
from eksinf.errors import CONTRACT, EksinfError

_TAB_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)


MAX_TEXT = inside.MAX_FILE_BYTES
MAX_DEPTH = 200  # the deepest real unit (a CRD schema) nests ~25 levels
MAX_NODES = 1_000_000  # the largest real unit file has ~10 000 nodes
CACHED_TEXT = 2 << 10  # below this a parse or dump costs less than a cache lookup
# from this size on a machine-written text may go to the fast reader (yamlfast): below it, its
# gate costs about what it saves
FAST_TEXT = 4 << 10
# what a cached entry depends on besides its input: this module's output, the YAML library, and
# the interpreter
CACHE_FORMAT = f"yamlio-3 json pyyaml-{yaml.__version__} {sys.version}".encode()


def _location(path: str, mark: Any) -> str:
    if mark is None:
        return path
    return f"{path}:{mark.line + 1}:{mark.column + 1}"


class MemoResolver:
    """Resolving a plain scalar's type runs Python regexes for every scalar, on the way in (the
    loader) and on the way out (the emitter asks twice per scalar). CRD schemas repeat the same
    few hundred values thousands of times, so short values are resolved once per class."""

    _resolved: dict[tuple[str, Any], str]

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode or len(value) > 64:
            # PyYAML's resolver answers a tag
            return cast(str, super().resolve(kind, value, implicit))  # type: ignore[misc]
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if len(self._resolved) < 100_000:
                self._resolved[key] = tag
        return tag


_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class _Loader(MemoResolver, yaml.CSafeLoader):
    """libyaml, with plain scalars read as Kubernetes reads them (kubeyaml.kube_scalar): `n` is
    false, `1e3` is 1000, `1:30` and dates stay text (a date in a label must not turn into a
    datetime)."""

    _resolved = {}

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return _kube_tag(value)
        return super().resolve(kind, value, implicit)


@functools.lru_cache(maxsize=65536)
def _kube_tag(text: str) -> str:
    if text == kubeyaml.MERGE:
        return _MERGE
    value = kubeyaml.kube_scalar(text)
    if value is None:
        return _NULL
    return {bool: _BOOL, int: _INT, float: _FLOAT}.get(type(value), _STR)


def _construct_kube(loader: _Loader, node: yaml.ScalarNode) -> Any:
    """A bool, int or float scalar (plain, or with its tag written out) as Kubernetes reads it."""
    value = kubeyaml.kube_scalar(loader.construct_scalar(node))
    if node.tag == _FLOAT and type(value) is int:
        return float(value)
    want = {_BOOL: bool, _INT: int, _FLOAT: float}[node.tag]
    if type(value) is not want:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value!r} is not a {node.tag.rsplit(':', 1)[-1]}", node.start_mark
        )
    return value


for _tag in (_BOOL, _INT, _FLOAT):
    _Loader.add_constructor(_tag, _construct_kube)


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _StrictLoader(_Loader):
    """Refuses duplicate keys, which YAML parsers otherwise resolve silently (last one wins)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Keys are compared as Kubernetes and Helm keep them, JSON object keys: `on` and `true`,
        # or `0x10` and `16`, are one key there (and in a Python dict), and only one survives.
        seen: dict[str, yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                continue
            key = kubeyaml.json_key(self.construct_object(key_node))
            first = seen.get(key)
            if first is not None:
                same = "" if first.value == key_node.value else f" (both are the key {key!r})"
                raise _DuplicateKey(
                    context="first defined",
                    context_mark=first.start_mark,
                    problem=f'duplicate key "{key_node.value}"{same}',
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
def gc_paused() -> Iterator[None]:
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


# The tags of JSON-shaped YAML, all Kubernetes and Helm keep (sigs.k8s.io/yaml converts to JSON).
# Any other (`!!binary`, `!!set`, `!!timestamp`, `!!python/object`, `!foo`) is refused, never
# built into a Python object that the writer would publish as something else.
_KNOWN_TAGS = frozenset(
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "merge")
)


def _unknown_tag(name: str, node: yaml.Node) -> EksinfError:
    return EksinfError(
        f"{_location(name, node.start_mark)}: unknown YAML tag {node.tag!r}",
        hint="Remove the tag: units, values and profiles hold plain YAML (text, numbers, "
        "booleans, null, mappings and lists); quote the value to keep it as text.",
        exit_code=CONTRACT,
    )


def _node_error(name: str, node: yaml.Node, what: str, hint: str) -> EksinfError:
    return _too_big(_location(name, node.start_mark), what, hint)


def _too_deep(name: str, node: yaml.Node) -> EksinfError:
    return _node_error(
        name,
        node,
        f"nested deeper than {MAX_DEPTH} levels",
        "Flatten the structure; no real unit nests this deep.",
    )


def _reused(name: str, node: yaml.Node) -> EksinfError:
    return EksinfError(
        f"{_location(name, node.start_mark)}: YAML anchor used by an alias; units "
        "must not use anchors and aliases",
        hint="Write the value out in full: units are flattened to plain per-file YAML, "
        "and shared anchors do not survive that (docs/flattening.md).",
        exit_code=CONTRACT,
    )


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

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise _too_deep(name, node)
        if node.tag not in _KNOWN_TAGS:
            raise _unknown_tag(name, node)
        if type(node) is yaml.ScalarNode:
            if scalars is not None:
                if id(node) in scalars:
                    raise _reused(name, node)
                scalars.add(id(node))
            return 1, 1
        key = id(node)
        if key in open_:
            raise _node_error(
                name,
                node,
                "a YAML alias refers to the node that contains it (a recursive document)",
                "Remove the anchor and alias.",
            )
        memo = done.get(key)
        if memo is not None:  # an alias of a node already walked
            if not aliases:
                raise _reused(name, node)
            if depth + memo[1] - 1 > MAX_DEPTH:
                raise _too_deep(name, node)
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
            raise _node_error(
                name,
                node,
                f"expands to more than {MAX_NODES} YAML nodes in one file (aliases repeat "
                "what they point to: an alias bomb?)",
                "Write the content out without anchors and aliases.",
            )
        open_.discard(key)
        done[key] = (size, height)
        return size, height

    budget[0] -= walk(root, 1)[0]


def _refuse_ambiguous(root: yaml.Node, name: str) -> None:
    """Refuse a plain scalar (value or key) whose meaning depends on the YAML reader: eksinf
    would otherwise pick one meaning silently, and a reviewer may read another."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, field = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            if not node.style and node.tag == _kube_tag(node.value):
                how = kubeyaml.ambiguity(node.value)
                if how is not None:
                    raise _ambiguous(name, node, field, how)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = f"{field}.{key.value}" if field else str(key.value)
                stack.append((value, sub))
                if isinstance(key, yaml.ScalarNode):
                    stack.append((key, f"{sub} (the key)"))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{field}[{i}]") for i, item in enumerate(node.value))


def _ambiguous(name: str, node: yaml.ScalarNode, field: str, how: str) -> EksinfError:
    kube = kubeyaml.shown(kubeyaml.kube_scalar(node.value))
    return EksinfError(
        f"{_location(name, node.start_mark)}: {field or 'document'}: plain `{node.value}` "
        f"means different things to different YAML readers ({how})",
        hint=f"Quote it to mean the text ({json.dumps(node.value)}), or write {kube} for what "
        "Kubernetes reads; eksinf never picks a meaning for you here.",
        exit_code=CONTRACT,
    )


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
    path: Path,
    text: str | None = None,
    *,
    label: str | None = None,
    aliases: bool = True,
    ambiguous: bool = True,
) -> list[Any]:
    """Parse a hand-written YAML file strictly; return its non-empty documents.

    Raises EksinfError (exit 3) naming `file:line:col` for tabs, duplicate keys (as Kubernetes
    compares them), syntax errors, documents over the size, depth or node bounds (aliases
    expanded), when `aliases` is False (as for units) any anchor used by an alias, and when
    `ambiguous` is False (units, the profile) any plain scalar that Kubernetes, YAML 1.2 and
    YAML 1.1 readers read differently (`y`, `on`, `0755`, `1e3`, `1:30`: kubeyaml.ambiguity).
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
    kind = b"load_source" + (b" aliases" if aliases else b" no-aliases")
    kind += b" ambiguous" if ambiguous else b" unambiguous"
    return _through_cache(kind, text, lambda: (_load_source(text, name, aliases, ambiguous), False))


def _load_source(text: str, name: str, aliases: bool, ambiguous: bool) -> list[Any]:
    with gc_paused():
        return _load_source_docs(text, name, aliases, ambiguous)


def _load_source_docs(text: str, name: str, aliases: bool, ambiguous: bool) -> list[Any]:
    loader = _StrictLoader(text)
    budget = [MAX_NODES]
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                _bound(node, name, aliases, budget)
                if not ambiguous:
                    _refuse_ambiguous(node, name)
                docs.append(_construct_strict(loader, node, name))
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


def _construct_strict(loader: _StrictLoader, node: yaml.Node, name: str) -> Any:
    """The document under `node`, as the strict constructor makes it: built straight from the
    node tree (`_build`, several times quicker) when that can, which it cannot for a merge key,
    keys that collide as JSON keys, or a scalar the constructor refuses; those go to the
    constructor, which says what is wrong exactly as it always has (duplicates by their two
    places, checked before the values)."""
    try:
        return _build(node, loader, {}, name)
    except (_NeedsConstructor, EksinfError, yaml.YAMLError, TypeError):  # TypeError: unhashable
        return _constructed(loader, node)


def _constructed(loader: _Loader, node: yaml.Node) -> Any:
    """The document under `node` as PyYAML's constructor makes it (or refuses it), where
    `_build` gave up on it. A failed build leaves nodes marked as being built: they are not
    recursive."""
    loader.constructed_objects.clear()
    loader.recursive_objects.clear()
    return loader.construct_document(node)


def load_mapping_docs(
    path: Path,
    text: str | None = None,
    *,
    label: str | None = None,
    aliases: bool = True,
    ambiguous: bool = True,
) -> Docs:
    """Like `load_source`, but every document must be a mapping (a Kubernetes-style object)."""
    name = label or str(path)
    if text is None:
        text = read_source_text(path, name)
    docs = load_source(path, text, label=label, aliases=aliases, ambiguous=ambiguous)
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


def load_docs(
    text: str, label: str = "YAML input", *, unique_keys: bool = False, cached: bool = True
) -> list[Any]:
    """Parse machine-written multi-document YAML; empty documents are dropped.

    Bounded like every read (MAX_TEXT, MAX_DEPTH, MAX_NODES with aliases expanded): this text may
    come from a bundle, a pull, the hub or cub. `label` names it in those errors.

    Same result as `yaml.load_all` with our loader, built straight from libyaml's node tree:
    strings and containers need none of the generic constructor's bookkeeping, which is most of
    the parse time for large CRDs. Other scalars (ints, bools, nulls, ...) and documents with
    merge keys go through the standard constructor. `cached=False` keeps the parse out of the
    derived-data cache.

    With `unique_keys`, two keys of one mapping that Kubernetes would keep as one JSON key
    (`a` twice, `on` and `true`, `16` and `0x10`) are refused naming both places.
    """
    _check_text(text, label)
    if not cached:  # a text naming credentials (a kubeconfig) is never stored in the cache
        return _load_docs(text, label, unique_keys)[0]
    kind = b"load_docs unique" if unique_keys else b"load_docs"
    return _through_cache(kind, text, lambda: _load_docs(text, label, unique_keys))


def load_docs_uncached(text: str, label: str = "YAML input") -> tuple[list[Any], bool]:
    """`load_docs` kept out of the derived-data cache, for a caller that keeps the documents in
    a record of its own (a chart's output, in its render's): the documents, and whether they
    are known to be JSON-exact (the fast reader's are; others may be: `json_exact`)."""
    _check_text(text, label)
    return _load_docs(text, label)


def docs_json(value: Any) -> bytes:
    """Parsed documents (or a record holding them) as a cache entry's JSON, written by orjson:
    over a cold render's parses (Argo CD's manifest, each chart's output) ~1 ms against ~9.7 ms
    for the standard library's encoder. It refuses (TypeError) what JSON would not give back
    exactly, where the standard encoder would write something else: a non-string key, an
    integer past 64 bits; callers keep only documents `json_exact` passes, so NaN, which orjson
    writes as null, never reaches it. Imported here: only a run that writes to the cache uses
    it."""
    import orjson

    return orjson.dumps(value)


def load_objects(text: str, label: str, hint: str = "Fix the YAML at that position.") -> Docs:
    """`load_docs` for units (a bundle's, a hub upload's, configs/): every document must be a
    mapping, a Kubernetes object. A list or a bare scalar is refused (exit 3) naming
    `label:line:col`, never dropped: a dropped document is content that silently vanishes."""
    try:
        docs = load_docs(text, label, unique_keys=True)
    except yaml.MarkedYAMLError as exc:
        raise EksinfError(
            f"{_location(label, exc.problem_mark)}: not valid YAML ({exc.problem})",
            hint=hint,
            exit_code=CONTRACT,
        ) from exc
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise EksinfError(
                f"{_non_mapping_location(label, text)}: document {index + 1} is a "
                f"{type(doc).__name__}, not a mapping",
                hint="Each YAML document of a unit must be a Kubernetes object (a mapping).",
                exit_code=CONTRACT,
            )
    return docs


def _through_cache(
    kind: bytes, text: str, parse: Callable[[], tuple[list[Any], bool]]
) -> list[Any]:
    """`parse()` of `text` (the documents, and whether they are known to be JSON-exact), from the
    derived-data cache when it was parsed before. Only a successful parse is stored, so a text
    that fails (syntax, bounds) fails every time. Entries are JSON, and only documents JSON holds
    exactly are stored (below), so a served parse equals a fresh one, types included."""
    if len(text) < CACHED_TEXT or not cache.enabled():
        return parse()[0]
    entry = cache.key(CACHE_FORMAT, kind, text.encode())
    hit = cache.get("yaml", entry)
    if hit is not None:
        with contextlib.suppress(ValueError, RecursionError):
            docs = json.loads(hit)
            if isinstance(docs, list):
                return docs
    docs, exact = parse()
    if exact or json_exact(docs):
        with contextlib.suppress(ValueError, TypeError, RecursionError):  # see docs_json
            cache.put("yaml", entry, docs_json(docs))
    return docs


_JSON_SCALARS = (str, int, bool, type(None))


def json_exact(docs: list[Any]) -> bool:
    """Whether JSON (`docs_json`) gives back exactly these documents, so that they may be kept
    in the cache: string keys only, finite floats, and no
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


def _load_docs(text: str, label: str, unique_keys: bool = False) -> tuple[list[Any], bool]:
    """The documents, and whether they are known to be JSON-exact (the fast reader's are)."""
    with gc_paused():
        if len(text) >= FAST_TEXT:
            # a large text nothing in which reads differently goes to the fast reader
            from eksinf.core import yamlfast

            fast = yamlfast.read(text, MAX_DEPTH, MAX_NODES)
            if fast is not None:
                return fast, True
        return _load_machine_docs(text, label, unique_keys), False


def _load_machine_docs(text: str, label: str, unique_keys: bool = False) -> list[Any]:
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
                doc = _build(node, loader, {}, label if unique_keys else None)
            except (_NeedsConstructor, TypeError):  # a merge key; a key no dict can hold
                # the constructor builds it, or refuses it as a YAML error ("found unhashable
                # key") that callers report, never a traceback
                doc = _constructed(loader, node)
            if doc is not None:
                docs.append(doc)
        return docs
    finally:
        loader.dispose()


class _NeedsConstructor(Exception):
    pass


def _build(node: yaml.Node, loader: _Loader, built: dict[int, Any], unique: str | None) -> Any:
    """The document under `node`; with `unique` (the label), a mapping whose keys collide as
    JSON keys is refused."""
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _STR else loader.construct_object(node)
    if id(node) in built:  # an alias: the same object, as the standard constructor gives
        return built[id(node)]
    if isinstance(node, yaml.MappingNode):
        mapping: dict[Any, Any] = {}
        built[id(node)] = mapping
        plain = True
        for key, value in node.value:
            if key.tag == _MERGE:
                raise _NeedsConstructor
            built_key = _build(key, loader, built, unique)
            plain = plain and type(built_key) is str
            mapping[built_key] = _build(value, loader, built, unique)
        # only a lost key or a non-string one can collide: the common case costs one compare
        if unique is not None and (len(mapping) != len(node.value) or not plain):
            _refuse_colliding_keys(node, loader, unique)
        return mapping
    sequence: list[Any] = []
    built[id(node)] = sequence
    sequence.extend(_build(item, loader, built, unique) for item in node.value)
    return sequence


def _refuse_colliding_keys(node: yaml.MappingNode, loader: _Loader, label: str) -> None:
    seen: dict[str, yaml.Node] = {}
    for key, _ in node.value:
        name = kubeyaml.json_key(_build(key, loader, {}, None))
        first = seen.setdefault(name, key)
        if first is not key:
            raise EksinfError(
                f"{_location(label, key.start_mark)}: duplicate key {key.value!r} (the key "
                f"{name!r}, first defined at {_location(label, first.start_mark)})",
                hint="Remove one of the two keys: Kubernetes keeps only one of them.",
                exit_code=CONTRACT,
            )


def load_input_docs(data: bytes, label: str) -> Docs:
    """`load_objects` of a file handed to eksinf (a bundle's, a pull's or a folder's unit): text
    that is not UTF-8, not valid YAML (an unknown tag included) or not Kubernetes objects is an
    input error naming `label:line:col`, never a traceback."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EksinfError(
            f"{label}: not UTF-8 text (byte {exc.start})",
            hint="Units are UTF-8 YAML.",
            exit_code=CONTRACT,
        ) from exc
    try:
        return load_objects(
            text,
            label,
            hint="Fix the YAML at that position (tags other than YAML's own are not read).",
        )
    except yaml.YAMLError as exc:
        raise EksinfError(
            f"{label}: not valid YAML ({str(exc).splitlines()[0]})", exit_code=CONTRACT
        ) from exc
