"""Go's text/template syntax, as Helm's engine reads a chart's templates: the tree the static
determinism proof (determinism.py) walks.

The lexer follows Go's (lex.go), the parser its grammar (parse.go): actions `{{ ... }}` with
trim markers and comments; pipelines of commands joined by `|` (the value on the left is the
last argument of the command on the right), each command a function or a value with its
arguments; parenthesised pipelines; field chains on the dot, on a variable or on a
parenthesised pipeline; `if`, `with` and `range` with `else`, `else if` and `else with`;
`define`, `block` and `template`. What it cannot read raises ScanError, and the proof then
leaves the chart unproven.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

# A whole action: up to the first `}}` outside a string, a character constant or a comment.
# Possessive, so text that is no action fails at once instead of backtracking.
_ACTION = r"""\{\{((?:[^"`'/}]++|/\*.*?\*/|/(?!\*)|"(?:[^"\\\n]++|\\.)*+"|`[^`]*+`"""
_ACTION += r"""|'(?:[^'\\\n]|\\.)++'|\}(?!\}))*+)\}\}"""
# One token inside an action, as Go's lexer reads it: spaces, a comment, a string, a character,
# a number (before fields: `.5` is a number), a variable, a field chain, a word, punctuation.
_TOKEN = r"""[ \t\r\n]++|/\*.*?\*/|"(?:[^"\\\n]|\\.)*+"|`[^`]*+`|'(?:[^'\\\n]|\\.)++'"""
_TOKEN += r"""|[+-]?(?:\d|\.\d)[\w.]*+(?:[eEpP][+-]\d+)?i?|\$\w*+|(?:\.[^\W\d]\w*+)++|\."""
_TOKEN += r"""|[^\W\d]\w*+|:=|[=|(),]"""


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # compiled on first use: a render served from the cache imports this module, scans nothing
    return re.compile(_ACTION, re.DOTALL), re.compile(_TOKEN, re.DOTALL)


class ScanError(Exception):
    """Text the parser cannot read: `at` is its offset in the template."""

    def __init__(self, at: int, why: str) -> None:
        super().__init__(why)
        self.at = at
        self.why = why


class _Unread(Exception):
    """An action the reader cannot read (its offset is the action's)."""


# -- operands --------------------------------------------------------------------------------


class Field(NamedTuple):
    """`.A.B` on the dot (`names` empty: the dot itself)."""

    names: tuple[str, ...]


class Var(NamedTuple):
    """`$x.A.B`; `$` is the template's data."""

    name: str
    names: tuple[str, ...]


class Ident(NamedTuple):
    """A function's name."""

    name: str


class Literal(NamedTuple):
    """A constant: `text` is a string's value when Go's reading of it is certain (no escapes),
    else None (a number, a character, true, false, nil, or a string with escapes)."""

    text: str | None
    string: bool  # a string constant (with or without escapes)
    raw: str


class Paren(NamedTuple):
    """`(pipeline).A.B`."""

    pipe: Pipe
    names: tuple[str, ...]


Operand = Field | Var | Ident | Literal | Paren


class Command(NamedTuple):
    operands: tuple[Operand, ...]


class Pipe(NamedTuple):
    """`$a, $b := c1 | c2`: `decl` names the variables set (`:=` or `=`)."""

    decl: tuple[str, ...]
    cmds: tuple[Command, ...]


# -- statements ------------------------------------------------------------------------------


class Print(NamedTuple):
    """An action that is a pipeline: it prints its value unless it sets variables."""

    pipe: Pipe
    at: int


class Control(NamedTuple):
    """`if`, `with` or `range` (`word`), its body and its `else` branch (`alt`)."""

    word: str
    pipe: Pipe
    body: tuple[Stmt, ...]
    alt: tuple[Stmt, ...]
    at: int


class Invoke(NamedTuple):
    """`{{ template "name" pipeline }}` (and the call a `block` makes where it stands)."""

    name: str
    pipe: Pipe | None
    at: int


Stmt = Print | Control | Invoke


class Define(NamedTuple):
    """A `define` or `block` body: a template of its own, called by name."""

    name: str
    body: tuple[Stmt, ...]
    at: int


class Parsed(NamedTuple):
    """One template file: its top-level body and the templates it defines."""

    body: tuple[Stmt, ...]
    defines: tuple[Define, ...]


_KEYWORDS = frozenset(("if", "else", "end", "range", "with", "define", "template", "block",
                       "break", "continue"))  # fmt: skip
_Token = tuple[str, str, bool]  # (kind, text, written right after the one before)
# a token's kind by its first character (the rest are words: letters, `_`)
_KINDS = {
    **dict.fromkeys(" \t\r\n", "space"), **dict.fromkeys("\"`", "string"),
    **dict.fromkeys("'0123456789+-", "number"), "$": "var", ".": "field",
    **dict.fromkeys("()|,:=/", "punct"),
}  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _read(inner: str) -> tuple[str, str | None, Pipe | None]:
    """One action's inside (what is between `{{` and `}}`): (keyword or "", the template name
    of define, block or template, the pipeline). Actions repeat across a chart's templates
    (`include "x.labels" .`): each distinct one is read once."""
    if inner.startswith("-") and inner[1:2].isspace():
        inner = inner[1:]  # `{{- `: a trim marker
    if inner.endswith("-") and inner[-2:-1].isspace():
        inner = inner[:-1]  # ` -}}`
    texts = _patterns()[1].findall(inner)
    if sum(map(len, texts)) != len(inner):
        raise _Unread  # a character no token starts with
    tokens: list[_Token] = []
    adjacent = False
    for text in texts:
        kind = _KINDS.get(text[0], "ident")
        if kind == "space" or (kind == "punct" and text.startswith("/*")):
            adjacent = False
            continue
        if kind == "field" and text[1:2].isdigit():
            kind = "number"  # `.5`
        tokens.append((kind, text, adjacent))
        adjacent = True
    if not tokens:
        return "", None, None  # a comment
    kind, head, _ = tokens[0]
    word = head if kind == "ident" and head in _KEYWORDS else ""
    reader = _Reader(tokens, 1 if word else 0)
    name = None
    if word in ("define", "block", "template"):
        name = reader.name()
    if word == "else" and not reader.done():
        nested = reader.take()
        if nested[1] not in ("if", "with"):
            raise _Unread
        word = "else " + nested[1]
    pipe = None if reader.done() else reader.pipe()
    if not reader.done():
        raise _Unread
    return word, name, pipe


class _Reader:
    """A recursive-descent reader of one action's tokens (Go's parse.go, its pipeline part)."""

    def __init__(self, tokens: list[_Token], at: int) -> None:
        self.tokens = tokens
        self.i = at

    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def peek(self) -> str:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else ""

    def take(self) -> _Token:
        if self.i >= len(self.tokens):
            raise _Unread
        self.i += 1
        return self.tokens[self.i - 1]

    def name(self) -> str:
        kind, text, _ = self.take()
        value = _string(text) if kind == "string" else None
        if value is None:
            raise _Unread
        return value

    def pipe(self) -> Pipe:
        names: tuple[str, ...] = ()
        tokens, i = self.tokens, self.i
        if i < len(tokens) and tokens[i][0] == "var":
            after = [text for _, text, _ in tokens[i + 1 : i + 4]]
            if after[:1] in ([":="], ["="]):
                names, self.i = (tokens[i][1],), i + 2
            elif after[:1] == [","] and len(after) == 3 and after[2] in (":=", "="):
                if tokens[i + 2][0] != "var":
                    raise _Unread
                names, self.i = (tokens[i][1], tokens[i + 2][1]), i + 4
        cmds = [self.command()]
        while self.peek() == "|":
            self.i += 1
            cmds.append(self.command())
        return Pipe(names, tuple(cmds))

    def command(self) -> Command:
        operands: list[Operand] = []
        while not self.done() and self.peek() not in ("|", ")"):
            operands.append(self.operand())
        if not operands:
            raise _Unread
        return Command(tuple(operands))

    def operand(self) -> Operand:
        kind, text, _ = self.take()
        term: Operand
        if kind == "field":
            term = Field(_names(text))
        elif kind == "var":
            term = Var(text, self.chain())
        elif kind == "ident":
            if text in ("true", "false", "nil"):
                term = Literal(None, False, text)
            elif text in _KEYWORDS:
                raise _Unread
            else:
                term = Ident(text)
        elif kind == "string":
            term = Literal(_string(text), True, text)
        elif kind == "number":
            term = Literal(None, False, text)
        elif text == "(":
            inner = self.pipe()
            if self.take()[1] != ")":
                raise _Unread
            term = Paren(inner, self.chain())
        else:
            raise _Unread
        if not self.done() and self.tokens[self.i][0] == "field" and self.tokens[self.i][2]:
            raise _Unread  # a field written onto a function or a constant: `f.x`
        return term

    def chain(self) -> tuple[str, ...]:
        """The field chain written right after the term, no space between (`$x.A.B`)."""
        if self.done():
            return ()
        kind, text, adjacent = self.tokens[self.i]
        if kind != "field" or not adjacent:
            return ()
        if text == ".":
            raise _Unread
        self.i += 1
        return _names(text)


def _names(field: str) -> tuple[str, ...]:
    return tuple(field.split(".")[1:]) if field != "." else ()


def _string(token: str) -> str | None:
    """A string constant's value, when it has no escapes (Go's and Python's differ at edges)."""
    if token.startswith("`"):
        return token[1:-1]
    return token[1:-1] if "\\" not in token else None


class _Frame:
    """A structure being read: `word` is top, define, block, if, with or range."""

    __slots__ = ("word", "pipe", "at", "name", "body", "alt", "chained")

    def __init__(
        self, word: str, pipe: Pipe | None, at: int, name: str = "", chained: bool = False
    ) -> None:
        self.word, self.pipe, self.at, self.name = word, pipe, at, name
        self.body: list[Stmt] | None = None
        self.alt: list[Stmt] | None = None
        self.chained = chained  # opened by `else if` / `else with`: closed by its parent's end

    def items(self) -> list[Stmt]:
        if self.alt is not None:
            return self.alt
        if self.body is None:
            self.body = []
        return self.body


def parse(text: str) -> Parsed:
    """The template file `text` as a tree; ScanError when the scan cannot read it."""
    action = _patterns()[0].match
    stack = [_Frame("top", None, 0)]
    defines: list[Define] = []
    at = 0
    while (start := text.find("{{", at)) >= 0:
        whole = action(text, start)
        try:
            if whole is None:
                raise _Unread
            at = whole.end()
            word, name, pipe = _read(whole.group(1))
        except _Unread:
            raise ScanError(start, "an action the scan cannot read") from None
        _place(stack, defines, start, word, name, pipe)
    if len(stack) != 1:
        raise ScanError(stack[-1].at, "a control structure the scan cannot follow (no end)")
    return Parsed(tuple(stack[0].items()), tuple(defines))


def _place(
    stack: list[_Frame],
    defines: list[Define],
    at: int,
    word: str,
    name: str | None,
    pipe: Pipe | None,
) -> None:
    """Put one action into the tree being built."""
    items = stack[-1].items()
    if not word:
        if pipe is not None:
            items.append(Print(pipe, at))
    elif word in ("if", "with", "range"):
        stack.append(_Frame(word, _needed(pipe, at), at))
    elif word.startswith("else"):
        frame = stack[-1]
        if frame.word not in ("if", "with", "range") or frame.alt is not None:
            raise ScanError(at, "a control structure the scan cannot follow")
        frame.alt = []
        if word != "else":
            stack.append(_Frame(word[5:], _needed(pipe, at), at, chained=True))
        elif pipe is not None:
            raise ScanError(at, "an action the scan cannot read")
    elif word == "end":
        if pipe is not None:
            raise ScanError(at, "an action the scan cannot read")
        _close(stack, defines, at)
    elif word == "define":
        if len(stack) > 1 or pipe is not None or name is None:
            raise ScanError(at, "a control structure the scan cannot follow")
        stack.append(_Frame(word, None, at, name=name))
    elif word == "block":
        assert name is not None
        items.append(Invoke(name, _needed(pipe, at), at))
        stack.append(_Frame(word, pipe, at, name=name))
    elif word == "template":
        assert name is not None
        items.append(Invoke(name, pipe, at))
    elif pipe is not None:  # break, continue
        raise ScanError(at, "an action the scan cannot read")


def _needed(pipe: Pipe | None, at: int) -> Pipe:
    if pipe is None:
        raise ScanError(at, "an action the scan cannot read")
    return pipe


def _close(stack: list[_Frame], defines: list[Define], at: int) -> None:
    """`end`: close the innermost structure (with the `else if` frames chained to it)."""
    while True:
        if len(stack) < 2:
            raise ScanError(at, "a control structure the scan cannot follow (an extra end)")
        frame = stack.pop()
        if frame.word in ("define", "block"):
            defines.append(Define(frame.name, tuple(frame.items()), frame.at))
            return
        assert frame.pipe is not None
        node = Control(
            frame.word, frame.pipe, tuple(frame.body or ()), tuple(frame.alt or ()), frame.at
        )
        stack[-1].items().append(node)
        if not frame.chained:
            return
