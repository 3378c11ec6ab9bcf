"""YAML out: the one writer, `dump_docs`, so the same documents always give the same bytes.

Key order is kept, block style, `---` before each document, no line folding; a string a
Kubernetes or YAML 1.2 reader would read as something else is quoted. Large serialisations go
through the content-addressed cache, keyed by the documents' repr (yamlio's cache format).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, cast

import yaml

from eksinf.core import cache, kubeyaml, yamlwrite
from eksinf.core.yamlio import CACHE_FORMAT, CACHED_TEXT, MemoResolver, gc_paused, load_docs

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Shared(Exception):
    """A document holds the same container twice: the generic representer writes it once with an
    anchor and aliases after, which the fast path below does not."""


_QUOTED = "tag:eksinf.dev,2026:quoted"


class QuoteAmbiguous:
    """The emitter writes a string plain only when resolving the plain form gives str back.
    Its resolver is YAML 1.1's; a string Kubernetes or a YAML 1.2 reader would read as something
    else (`y`, `1e3`, `0o17`, `0b1`, `1_000`) gets another answer here, so it is quoted: a
    profile value "y" must not reach the cluster as true."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        tag: str = super().resolve(kind, value, implicit)  # type: ignore[misc]
        if tag == _STR and implicit[0] and not kubeyaml.plain_is_text(value):
            return _QUOTED
        return tag


class _Dumper(MemoResolver, QuoteAmbiguous, yaml.CSafeDumper):
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
    with gc_paused():
        fast = _fast_writer().dump(docs)
    if fast is not None:  # quicker than the cache's key (the documents' repr)
        return fast
    shown = repr(docs)
    if len(shown) < CACHED_TEXT:
        return _dump_docs(docs)
    dump_key = cache.key(CACHE_FORMAT, b"dump_docs", shown.encode())
    hit = cache.get("yaml", dump_key)
    if hit is not None:
        with contextlib.suppress(UnicodeDecodeError):
            return hit.decode()
    text = _dump_docs(docs)
    cache.put("yaml", dump_key, text.encode())
    return text


def canonical_text(text: str, label: str = "YAML input") -> str:
    """The documents' content in the one style eksinf writes (`dump_docs`): what two texts are
    compared by when only their meaning counts (comments, quoting and indentation do not)."""
    return dump_docs(load_docs(text, label))


# key order kept, block style, `---` before each document, no line folding
DUMP_OPTIONS: dict[str, Any] = {
    "sort_keys": False,
    "default_flow_style": False,
    "explicit_start": True,
    "allow_unicode": True,
    "width": 1 << 30,
}


class _Tags(MemoResolver, QuoteAmbiguous, yaml.resolver.Resolver):
    """The dumper's resolver on its own, for the fast path."""

    _resolved = {}


_TAGS = _Tags()


# First characters of the plain scalars some reader may take for something other than text: the
# resolver's own (YAML 1.1; it has no resolver for any first character) and those of Kubernetes'
# and YAML 1.2's readings (kubeyaml). Any other plain string resolves to str without asking,
# which spares the first sight of each distinct string (a run writes tens of thousands) a
# dozen regexes.
_MAYBE_TYPED = frozenset(
    [k for k in _Tags.yaml_implicit_resolvers if k]
    + list("~.+-0123456789")
    + [word[0] for word in kubeyaml.KUBE_WORDS if word]
)


def _plain_tag(text: str) -> str:
    if text and text[0] not in _MAYBE_TYPED:
        return _STR
    return _TAGS.resolve(yaml.ScalarNode, text, (True, False))


@functools.cache
def _fast_writer() -> yamlwrite.Writer:
    return yamlwrite.Writer(_plain_tag)


def _dump_docs(docs: list[Any]) -> str:
    """The general writer (PyYAML's representer, libyaml's emitter)."""
    with gc_paused():
        # no stream given: PyYAML returns the text
        return cast(str, yaml.dump_all(docs, Dumper=_Dumper, **DUMP_OPTIONS))
