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

# A whole action: up to the first `}}` outside a string, a character constant or a comment.
# Possessive, so text that is no action fails at once instead of backtracking; where it fails,
# the `{{` alone matches, with no group: an action the scan cannot read. Written as runs of
# plain characters between the others, which the engine reads faster than one alternation.
_PLAIN = r"""[^"`'/}]*+"""
_OTHER = r"""/\*.*?\*/|/(?!\*)|"(?:[^"\\\n]++|\\.)*+"|`[^`]*+`|'(?:[^'\\\n]|\\.)++'|\}(?!\})"""
_ACTION = r"\{\{(?:(" + _PLAIN + "(?:(?:" + _OTHER + ")" + _PLAIN + r")*+)\}\})?"

# One token inside an action, as Go's lexer reads it: spaces, a comment, a string, a character,
# a number (before fields: `.5` is a number), a variable, a field chain, the dot, a word,
# punctuation. A field chain written onto a variable, a word or a closing parenthesis, with no
# space between (`$x.A.B`, `(f).A`), is read with it as one token.
_CHAIN = r"""(?:\.[^\W\d]\w*+)"""
_TOKEN = r"""[ \t\r\n]++|/\*.*?\*/|"(?:[^"\\\n]|\\.)*+"|`[^`]*+`|'(?:[^'\\\n]|\\.)++'"""
_TOKEN += r"""|[+-]?(?:\d|\.\d)[\w.]*+(?:[eEpP][+-]\d+)?i?|\$\w*+CHAIN*+|CHAIN++|\."""
_TOKEN += r"""|[^\W\d]\w*+CHAIN*+|\)CHAIN*+|:=|[=|(,]"""
_TOKEN = _TOKEN.replace("CHAIN", _CHAIN)


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


class Field:
    """`.A.B` on the dot (`names` empty: the dot itself)."""

    __slots__ = ("names",)

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names


class Var:
    """`$x.A.B`; `$` is the template's data."""

    __slots__ = ("name", "names")

    def __init__(self, name: str, names: tuple[str, ...]) -> None:
        self.name = name
        self.names = names


class Ident:
    """A function's name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Literal:
    """A constant: `text` is a string's value when Go's reading of it is certain (no escapes),
    else None (a number, a character, true, false, nil, or a string with escapes)."""

    __slots__ = ("text", "string", "raw")

    def __init__(self, text: str | None, string: bool, raw: str) -> None:
        self.text = text
        self.string = string  # a string constant (with or without escapes)
        self.raw = raw


class Paren:
    """`(pipeline).A.B`."""

    __slots__ = ("pipe", "names")

    def __init__(self, pipe: Pipe, names: tuple[str, ...]) -> None:
        self.pipe = pipe
        self.names = names


Operand = Field | Var | Ident | Literal | Paren


class Command:
    __slots__ = ("operands",)

    def __init__(self, operands: tuple[Operand, ...]) -> None:
        self.operands = operands


class Pipe:
    """`$a, $b := c1 | c2`: `decl` names the variables set (`:=` or `=`)."""

    __slots__ = ("decl", "cmds")

    def __init__(self, decl: tuple[str, ...], cmds: tuple[Command, ...]) -> None:
        self.decl = decl
        self.cmds = cmds


# -- statements ------------------------------------------------------------------------------


class Print:
    """An action that is a pipeline: it prints its value unless it sets variables."""

    __slots__ = ("pipe", "at")

    def __init__(self, pipe: Pipe, at: int) -> None:
        self.pipe = pipe
        self.at = at


class Control:
    """`if`, `with` or `range` (`word`), its body and its `else` branch (`alt`)."""

    __slots__ = ("word", "pipe", "body", "alt", "at")

    def __init__(
        self, word: str, pipe: Pipe, body: tuple[Stmt, ...], alt: tuple[Stmt, ...], at: int
    ) -> None:
        self.word = word
        self.pipe = pipe
        self.body = body
        self.alt = alt
        self.at = at


class Invoke:
    """`{{ template "name" pipeline }}` (and the call a `block` makes where it stands)."""

    __slots__ = ("name", "pipe", "at")

    def __init__(self, name: str, pipe: Pipe | None, at: int) -> None:
        self.name = name
        self.pipe = pipe
        self.at = at


Stmt = Print | Control | Invoke


class Define:
    """A `define` or `block` body: a template of its own, called by name."""

    __slots__ = ("name", "body", "at")

    def __init__(self, name: str, body: tuple[Stmt, ...], at: int) -> None:
        self.name = name
        self.body = body
        self.at = at


class Parsed:
    """One template file: its top-level body and the templates it defines."""

    __slots__ = ("body", "defines")

    def __init__(self, body: tuple[Stmt, ...], defines: tuple[Define, ...]) -> None:
        self.body = body
        self.defines = defines


_KEYWORDS = frozenset(("if", "else", "end", "range", "with", "define", "template", "block",
                       "break", "continue"))  # fmt: skip


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
    tokens = [text for text in texts if text[0] not in " \t\r\n/"]  # less spaces, comments
    if not tokens:
        return "", None, None  # a comment
    word = tokens[0] if tokens[0] in _KEYWORDS else ""
    reader = _Reader(tokens, 1 if word else 0)
    name = None
    if word in ("define", "block", "template"):
        name = reader.name()
    if word == "else" and not reader.done():
        nested = reader.take()
        if nested not in ("if", "with"):
            raise _Unread
        word = "else " + nested
    pipe = None if reader.done() else reader.pipe()
    if not reader.done():
        raise _Unread
    return word, name, pipe


class _Reader:
    """A recursive-descent reader of one action's tokens (Go's parse.go, its pipeline part)."""

    def __init__(self, tokens: list[str], at: int) -> None:
        self.tokens = tokens
        self.i = at

    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def take(self) -> str:
        if self.i >= len(self.tokens):
            raise _Unread
        self.i += 1
        return self.tokens[self.i - 1]

    def name(self) -> str:
        value = _string(self.take())
        if value is None:
            raise _Unread
        return value

    def pipe(self) -> Pipe:
        names: tuple[str, ...] = ()
        tokens, i = self.tokens, self.i
        if i < len(tokens) and _declared(tokens[i]):
            after = tokens[i + 1 : i + 4]
            if after[:1] in ([":="], ["="]):
                names, self.i = (tokens[i],), i + 2
            elif after[:1] == [","] and len(after) == 3 and after[2] in (":=", "="):
                if not _declared(after[1]):
                    raise _Unread
                names, self.i = (tokens[i], after[1]), i + 4
        cmds = [self.command()]
        while self.i < len(tokens) and tokens[self.i] == "|":
            self.i += 1
            cmds.append(self.command())
        return Pipe(names, tuple(cmds))

    def command(self) -> Command:
        operands: list[Operand] = []
        tokens = self.tokens  # indexed here, not through peek: the reader's innermost loop
        while self.i < len(tokens) and tokens[self.i][0] not in "|)":
            operands.append(self.operand())
        if not operands:
            raise _Unread
        return Command(tuple(operands))

    def operand(self) -> Operand:
        text = self.take()
        first = text[0]
        if first == ".":
            if text[1:2].isdigit():
                return Literal(None, False, text)  # `.5`
            return Field(_names(text))
        if first == "$":
            name, _, chain = text.partition(".")
            return Var(name, tuple(chain.split(".")) if chain else ())
        if first in '"`':
            return Literal(_string(text), True, text)
        if first in "'+-" or first.isdigit():
            return Literal(None, False, text)
        if first == "(":
            inner = self.pipe()
            close = self.take()
            if close[0] != ")":
                raise _Unread
            return Paren(inner, _names(close[1:]) if len(close) > 1 else ())
        if text in ("true", "false", "nil"):
            return Literal(None, False, text)
        if text in _KEYWORDS or "." in text or not (first.isalpha() or first == "_"):
            raise _Unread  # a keyword; a chain on a function's result (`now.Year`); `:=`
        return Ident(text)


def _declared(token: str) -> bool:
    """Whether the token is a variable that can be set (`$x`, not `$x.A`)."""
    return token[0] == "$" and "." not in token


def _names(field: str) -> tuple[str, ...]:
    return tuple(field.split(".")[1:]) if field != "." else ()


def _string(token: str) -> str | None:
    """A string constant's value, when it has no escapes (Go's and Python's differ at edges)."""
    if token.startswith("`"):
        return token[1:-1]
    return token[1:-1] if "\\" not in token else None


class _Frame:
    """A structure being read: `word` is top, define, block, if, with or range."""

    __slots__ = ("word", "pipe", "at", "name", "body", "alt", "items", "chained")

    def __init__(
        self, word: str, pipe: Pipe | None, at: int, name: str = "", chained: bool = False
    ) -> None:
        self.word, self.pipe, self.at, self.name = word, pipe, at, name
        self.body: list[Stmt] = []
        self.alt: list[Stmt] | None = None
        self.items = self.body  # where the next statement goes: the body, or after else, alt
        self.chained = chained  # opened by `else if` / `else with`: closed by its parent's end


def parse(text: str) -> Parsed:
    """The template file `text` as a tree; ScanError when the scan cannot read it."""
    stack = [_Frame("top", None, 0)]
    defines: list[Define] = []
    for whole in _patterns()[0].finditer(text):
        start = whole.start()
        try:
            inner = whole.group(1)
            if inner is None:
                raise _Unread
            word, name, pipe = _read(inner)
        except _Unread:
            raise ScanError(start, "an action the scan cannot read") from None
        if word:
            _place(stack, defines, start, word, name, pipe)
        elif pipe is not None:  # the commonest action, a pipeline printed, placed here
            stack[-1].items.append(Print(pipe, start))
    if len(stack) != 1:
        raise ScanError(stack[-1].at, "a control structure the scan cannot follow (no end)")
    return Parsed(tuple(stack[0].items), tuple(defines))


def _place(
    stack: list[_Frame],
    defines: list[Define],
    at: int,
    word: str,
    name: str | None,
    pipe: Pipe | None,
) -> None:
    """Put one action that starts with a keyword into the tree being built."""
    items = stack[-1].items
    if word in ("if", "with", "range"):
        stack.append(_Frame(word, _needed(pipe, at), at))
    elif word.startswith("else"):
        frame = stack[-1]
        if frame.word not in ("if", "with", "range") or frame.alt is not None:
            raise ScanError(at, "a control structure the scan cannot follow")
        frame.alt = frame.items = []
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
            defines.append(Define(frame.name, tuple(frame.items), frame.at))
            return
        assert frame.pipe is not None
        node = Control(frame.word, frame.pipe, tuple(frame.body), tuple(frame.alt or ()), frame.at)
        stack[-1].items.append(node)
        if not frame.chained:
            return
