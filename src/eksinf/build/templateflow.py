"""How values flow through a chart's templates: the analysis behind the static determinism
proof (determinism.py, which says what it proves and why).

Each value is a set of forms it may be at run time (below); `first_doubt` reads every template
the engine evaluates, again where what it may be given grew, until nothing grows, and returns
the first thing that may render differently twice. A pipeline that reads no variable is read
once for each dot and `$` it is given: where it recurs, what that reading did is done again.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from typing import Any

from eksinf.build import templatefuncs
from eksinf.build.templateparse import (
    Command,
    Control,
    Field,
    Ident,
    Invoke,
    Literal,
    Operand,
    Paren,
    Parsed,
    Pipe,
    Print,
    Stmt,
    Var,
)

MAX_PASSES = 32  # readings of each template; the shipped charts settle in 1-3
Doubt = tuple[int, int, int, str]  # (file, offset of its action, order in it, why)
# What reading a pipeline did besides making its value, done again where the pipeline recurs:
# ("doubt", why), ("include", template name, data), ("change", values paths) or ("tpl", text).
Effect = tuple[Any, ...]

# Functions whose result may differ between two renders of the same inputs, by why, and those
# whose result is a function of their arguments: both read from the one table of functions.
VARYING: dict[str, tuple[str, ...]] = templatefuncs.varying()
PURE = templatefuncs.pure()
# Helm's objects that hold pointers: Go prints a pointer inside a value as its address, so
# `{{ .Chart }}` or `{{ toString .Subcharts }}` differs from run to run. Their plain fields
# (`.Chart.Name`) are data; these two lists of the chart's are not.
_WHOLE_OBJECTS = frozenset(("Chart", "Subcharts"))
_CHART_LISTS = frozenset(("Maintainers", "Dependencies"))

# -- what a value may be ---------------------------------------------------------------------
# A value is a set of forms, any of which it may be at run time:
#   ("clean",)            data made by the templates; holds no root context, shares no map
#   ("values", path)      the chart's values at `path` (None: anywhere), or a part of them
#   ("root",)             the root context itself
#   ("any",)              may hold the root context anywhere
#   ("pointer",)          data behind a Go pointer (`semver`'s result): printed by its String
#                          method, except under a printf verb such as %d, which shows its address
#   ("shape", fields, root_rest)  a map made by `dict` (or `merge` of one): each literal key's
#                          value; a key not listed is missing, or the root's (root_rest)
Form = tuple[Any, ...]  # (kind, ...): see above
Value = frozenset[Form]
CLEAN: Value = frozenset({("clean",)})
ROOT: Value = frozenset({("root",)})
ANY: Value = frozenset({("any",)})
POINTER: Value = frozenset({("pointer",)})
NOTHING: Value = frozenset()  # a template no one includes
_MAX_FORMS = 8
_MAX_DEPTH = 3  # maps nested in maps that `dict` made, followed this deep
_MAX_PATH = 6
# the root context's keys, as Helm builds it
_ROOT_KEYS = frozenset(("Values", "Release", "Chart", "Capabilities", "Template", "Files",
                        "Subcharts"))  # fmt: skip

# printf's verbs: the letter after flags; compiled on first use, in re's own cache, not on import
_VERB = r"%[^a-zA-Z%]*([a-zA-Z%])"


def _join(*values: Value) -> Value:
    if len(values) == 1:
        return values[0]  # already joined
    forms = frozenset().union(*values)
    if ("any",) in forms or len(forms) > _MAX_FORMS:
        return ANY
    return forms


@functools.lru_cache(maxsize=1024)  # called for most values the scan makes; few are distinct
def _clean(value: Value) -> bool:
    """Whether the value holds no root context (printing it prints data)."""
    return all(form[0] in ("clean", "values", "pointer") for form in value)


def _values(path: tuple[str, ...] | None) -> Value:
    return frozenset({("values", None if path is None else path[:_MAX_PATH])})


def _depth(value: Value) -> int:
    """How deep maps that `dict` made nest in the value."""
    shapes = [form for form in value if form[0] == "shape"]
    return max((1 + max((_depth(v) for _, v in f[1]), default=0) for f in shapes), default=0)


def _shape(fields: dict[str, Value], root_rest: bool) -> Value:
    if not root_rest and all(v == CLEAN or not v for v in fields.values()):
        return CLEAN  # a map of data
    if any(_depth(v) >= _MAX_DEPTH for v in fields.values()):
        return ANY
    return frozenset({("shape", tuple(sorted(fields.items())), root_rest)})


def _fields_of(form: Form) -> dict[str, Value]:
    return dict(form[1])


def _contained(value: Value) -> Value:
    """A list or map made to hold `value`: data that may share the values' maps, or, when it
    holds the root context, ANY (the root inside it is no longer reached by its fields)."""
    out: list[Value] = [CLEAN]
    for form in value:
        if form[0] in ("root", "any") or (form[0] == "shape" and form[2]):
            return ANY
        if form[0] == "shape":
            out.append(_contained(_join(*_fields_of(form).values())))
        else:
            out.append(frozenset({form}))
    return _join(*out)


def _elements(value: Value) -> Value:
    """What `range` over the value, or an index into it, gives."""
    out: list[Value] = []
    for form in value:
        if form[0] == "clean":
            out.append(CLEAN)
        elif form[0] == "values":
            path = form[1]
            out.append(_values(None if path is None else (*path, "*")))
        elif form[0] == "shape":
            out.extend(_fields_of(form).values())
            if form[2]:
                out.append(ANY)  # the root's values: `.Capabilities` among them
        else:
            out.append(ANY)
    return _join(*out)


def _copy(value: Value) -> Value:
    """`deepCopy`: the same value, sharing no map with the chart's values."""
    out: list[Value] = []
    for form in value:
        if form[0] == "values":
            out.append(CLEAN)
        elif form[0] == "shape":
            fields = {k: _copy(v) for k, v in _fields_of(form).items()}
            out.append(_shape(fields, bool(form[2])))
        else:
            out.append(frozenset({form}))
    return _join(*out)


def _values_paths(value: Value, into: set[tuple[str, ...] | None]) -> None:
    """The values paths a value may share maps with (None: any)."""
    for form in value:
        if form[0] == "values":
            into.add(form[1])
        elif form[0] in ("root", "any"):
            into.add(None)
        elif form[0] == "shape":
            for v in _fields_of(form).values():
                _values_paths(v, into)
            if form[2]:
                into.add(None)


def _overlaps(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether one values path is at or under the other (`*`: any key)."""
    if a is None or b is None:
        return True
    return all(x == y or "*" in (x, y) for x, y in zip(a, b, strict=False))


def _whole(names: tuple[str, ...]) -> bool:
    """Whether the field chain ends on one of Helm's objects taken whole."""
    last = names[-1]
    return last in _WHOLE_OBJECTS or (last in _CHART_LISTS and names[-2:-1] == ("Chart",))


@functools.lru_cache(maxsize=4096)  # the same fields of the same values recur in every chart
def _field(value: Value, names: tuple[str, ...], values_path: bool) -> Value:
    """The field chain `names` of the value (`values_path`: `.Values` paths are known)."""
    if not names:
        return value
    out: list[Value] = []
    for form in value:
        kind = form[0]
        if kind in ("clean", "pointer"):
            out.append(CLEAN)
        elif kind == "values":
            path = form[1]
            out.append(_values(None if path is None else (*path, *names)))
        elif kind == "root":
            out.append(_root_field(names, values_path))
        elif kind == "shape":
            fields = _fields_of(form)
            if names[0] in fields:
                out.append(_field(fields[names[0]], names[1:], values_path))
            elif form[2]:
                out.append(_root_field(names, values_path))
            else:
                out.append(CLEAN)  # a missing key: nothing
        else:
            out.append(ANY)
    return _join(*out)


def _root_field(names: tuple[str, ...], values_path: bool) -> Value:
    head = names[0]
    if head == "Values":
        return _values(names[1:] if values_path else None)
    if head == "Subcharts" or (head == "Capabilities" and len(names) == 1):
        return ANY
    # the root's other keys are data, and a template can add no other (it would have to
    # store the root context into the root, a doubt)
    return CLEAN


def _varying_kind(name: str) -> str | None:
    return next((kind for kind, names in VARYING.items() if name in names), None)


class _Piped:
    """The value on the left of a `|`: the last argument of the command on its right."""

    __slots__ = ("cmds", "last")

    def __init__(self, cmds: tuple[Command, ...], last: int) -> None:
        self.cmds = cmds
        self.last = last


Arg = Operand | _Piped


class _Env:
    __slots__ = ("body", "file", "dollar", "values_path")

    def __init__(self, body: int, file: int, dollar: Value, values_path: bool) -> None:
        self.body = body  # which template's variables
        self.file = file  # the file it is in, for doubts
        self.dollar = dollar  # the template's data
        self.values_path = values_path  # whether `.Values` paths are known (no subcharts)


class _Scan:
    """One chart's analysis: each template is read again when what it may be given grew, or
    when one of its variables grew after it was read, until nothing grows; the doubts of each
    template's last reading are the verdict's."""

    def __init__(self, files: list[tuple[str, Parsed]], values_plain: bool) -> None:
        self.values_plain = values_plain
        precise = not any(path.split("/")[1:2] == ["charts"] for path, _ in files)
        # every template: (its name, its body, its environment); a file's is its path
        self.bodies: list[tuple[str, tuple[Stmt, ...], int]] = []  # (name, body, file)
        for file, (path, parsed) in enumerate(files):
            self.bodies.append((path, parsed.body, file))
            self.bodies.extend((define.name, define.body, file) for define in parsed.defines)
        self.precise = precise
        self.named: dict[str, list[int]] = {}
        for index, (name, _, _) in enumerate(self.bodies):
            self.named.setdefault(name, []).append(index)
        self.files = {path for path, _ in files}
        self.data: dict[str | None, Value] = {}  # template name -> what includes pass it
        self.vars: dict[tuple[int, str], Value] = {}
        self.changed: set[tuple[str, ...] | None] = set()  # values paths a template changes
        self.doubts: list[Doubt] = []
        self.tpls: list[tuple[Doubt, Value]] = []  # tpl of a value: (where, its text)
        self.queue: deque[int] = deque()
        self.plain_tpl = False  # a tpl was proven by values that hold no template action
        self.read: set[tuple[int, str]] = set()  # variables read in this reading
        self.stale = False  # a variable grew after it was read
        self.at = 0  # the offset of the action being read, for doubts
        # each pipeline's value, by (pipeline, dot, $), with what reading it did besides, to do
        # again where it recurs: kept when the reading read no variable (whose value may grow)
        self.memo: dict[tuple[int, Value, Value], tuple[Value, bool, tuple[Effect, ...]]] = {}
        self.journal: list[Effect] | None = None  # the effects of the pipeline being read
        self.pure = True  # whether the pipeline being read read no variable

    # -- the fixpoint ------------------------------------------------------------------------

    def run(self) -> Doubt | None:
        found: dict[int, tuple[list[Doubt], list[tuple[Doubt, Value]]]] = {}
        given: dict[int, Value] = {}  # what each template was last read with
        # files first, then what they include, first in first out: a define is read once its
        # callers have said what they pass it
        files = [i for i, (name, _, _) in enumerate(self.bodies) if name in self.files]
        self.queue = deque(files + [i for i in range(len(self.bodies)) if i not in files])
        budget = MAX_PASSES * len(self.bodies)
        while self.queue:
            index = self.queue.popleft()
            name, body, file = self.bodies[index]
            dollar = _join(self.data.get(name, NOTHING), self.data.get(None, NOTHING))
            if name in self.files:
                dollar = _join(ROOT, dollar)
            if given.get(index) == dollar:
                continue  # read with that already: it would find the same
            given[index] = dollar
            env = _Env(index, file, dollar, self.precise)
            self.stale = True
            while self.stale:  # a variable read before it grew: read the template again
                budget -= 1
                if budget < 0:
                    return (0, 0, 0, "the scan could not settle what its values may be")
                self.stale, self.read, self.doubts, self.tpls = False, set(), [], []
                if dollar:  # else no template includes it (yet): it does not run
                    self.block(body, env, dollar)
            found[index] = (self.doubts, self.tpls)
        doubts = [d for found_doubts, _ in found.values() for d in found_doubts]
        for (file, at, order, _), text in (t for _, tpls in found.values() for t in tpls):
            # once every template is read, what they change is known
            if any(_overlaps(form[1], changed) for form in text for changed in self.changed):
                doubts.append((file, at, order, "calls tpl of a chart value that a template "
                               "changes"))  # fmt: skip
            else:
                self.plain_tpl = True
        return min(doubts, default=None)

    def again(self, indexes: list[int] | range) -> None:
        self.queue.extend(i for i in indexes if i not in self.queue)

    def replay(self, effects: tuple[Effect, ...], env: _Env) -> None:
        """Do again what a pipeline's reading did, where the same pipeline recurs."""
        for effect in effects:
            if effect[0] == "doubt":
                self.doubt(env, effect[1])
            elif effect[0] == "include":
                self.include(effect[1], effect[2])
            elif effect[0] == "change":
                self.change(effect[1])
            else:
                self.tpl_of(effect[1], env)

    def doubt(self, env: _Env, why: str) -> None:
        if self.journal is not None:
            self.journal.append(("doubt", why))
        order = len(self.doubts) + len(self.tpls)  # the first in its action comes first
        self.doubts.append((env.file, self.at, order, why))

    def assign(self, env: _Env, names: tuple[str, ...], value: Value) -> None:
        for name in names:
            key = (env.body, name)
            old = self.vars.get(key)
            new = _join(old or NOTHING, value)
            if new != old:
                self.vars[key] = new
                self.stale = self.stale or key in self.read

    def include(self, name: str | None, data: Value) -> None:
        if self.journal is not None:
            self.journal.append(("include", name, data))
        old = self.data.get(name, NOTHING)
        new = _join(old, data)
        if new != old:
            self.data[name] = new
            self.again(range(len(self.bodies)) if name is None else self.named.get(name, []))

    def named_include(self, name: str, data: Value, env: _Env) -> None:
        """An include or template of a literal name. A name no template read here has is a
        template the scan did not follow (Helm fails on a name it does not have)."""
        if name not in self.named:
            self.doubt(env, f"includes {name}, a template the scan did not read")
        self.include(name, data)

    def change(self, paths: frozenset[tuple[str, ...] | None]) -> None:
        if self.journal is not None:
            self.journal.append(("change", paths))
        self.changed |= paths

    # -- statements --------------------------------------------------------------------------

    def block(self, items: tuple[Stmt, ...], env: _Env, dot: Value) -> None:
        for item in items:
            self.at = item.at
            if isinstance(item, Print):
                value = self.pipe(item.pipe, env, dot)[0]
                if item.pipe.decl:
                    self.assign(env, item.pipe.decl, value)
                elif not _clean(value):
                    self.doubt(env, "prints Helm's root context (printed, it shows "
                               "memory addresses)")  # fmt: skip
            elif isinstance(item, Invoke):
                data = self.pipe(item.pipe, env, dot)[0] if item.pipe else CLEAN
                self.named_include(item.name, data, env)
            else:
                self.control(item, env, dot)

    def control(self, item: Control, env: _Env, dot: Value) -> None:
        value = self.pipe(item.pipe, env, dot)[0]
        self.at = item.at
        inner = dot
        if item.word == "range":
            inner = _elements(value)
            if len(item.pipe.decl) == 2:
                self.assign(env, item.pipe.decl[:1], CLEAN)  # a key or an index
                self.assign(env, item.pipe.decl[1:], inner)
            else:
                self.assign(env, item.pipe.decl, inner)
        else:
            self.assign(env, item.pipe.decl, value)
            if item.word == "with":
                inner = value
        self.block(item.body, env, inner)
        self.block(item.alt, env, dot)

    # -- values ------------------------------------------------------------------------------

    def pipe(self, pipe: Pipe, env: _Env, dot: Value) -> tuple[Value, bool]:
        """The pipeline's value, and whether it is a map made right there (no other value
        shares it yet)."""
        key = (id(pipe), dot, env.dollar)
        known = self.memo.get(key)
        if known is not None:
            if known[2]:
                self.replay(known[2], env)
            return known[0], known[1]
        outer, outer_pure = self.journal, self.pure
        self.journal, self.pure = [], True
        value, fresh = self.command(pipe.cmds, len(pipe.cmds) - 1, env, dot)
        effects, pure = tuple(self.journal), self.pure
        self.journal, self.pure = outer, outer_pure and pure
        if outer is not None:
            outer.extend(effects)
        if pure:
            self.memo[key] = (value, fresh, effects)
        return value, fresh

    def command(
        self, cmds: tuple[Command, ...], last: int, env: _Env, dot: Value, blind: bool = False
    ) -> tuple[Value, bool]:
        cmd = cmds[last]
        head = cmd.operands[0]
        args: list[Arg] = [*cmd.operands[1:]]
        if last > 0:
            args.append(_Piped(cmds, last - 1))
        if isinstance(head, Ident):
            return self.call(head.name, args, env, dot, blind)
        value, fresh = self.operand(head, env, dot)
        if not args:
            return value, fresh
        # a method with arguments (`.Files.Get "x"`, `.Capabilities.APIVersions.Has "v1"`)
        given = [self.arg(arg, env, dot)[0] for arg in args]
        if not all(_clean(v) for v in (value, *given)):
            self.doubt(env, "calls a method with Helm's root context")
        return CLEAN, False

    def arg(self, arg: Arg, env: _Env, dot: Value, blind: bool = False) -> tuple[Value, bool]:
        if isinstance(arg, _Piped):
            return self.command(arg.cmds, arg.last, env, dot, blind)
        if isinstance(arg, Paren) and not arg.names:
            inner = arg.pipe
            return self.command(inner.cmds, len(inner.cmds) - 1, env, dot, blind)
        return self.operand(arg, env, dot)

    def operand(self, node: Operand, env: _Env, dot: Value) -> tuple[Value, bool]:
        if isinstance(node, Literal):
            return CLEAN, False
        if isinstance(node, Ident):  # a function without arguments
            return self.call(node.name, [], env, dot, False)
        if isinstance(node, Field):
            base, names = dot, node.names
        elif isinstance(node, Var):
            names = node.names
            self.pure = self.pure and node.name == "$"  # a variable's value may grow
            if node.name == "$":
                base = env.dollar
            elif (env.body, node.name) in self.vars:
                self.read.add((env.body, node.name))
                base = self.vars[(env.body, node.name)]
            else:
                self.doubt(env, f"uses {node.name}, which the scan cannot follow")
                return CLEAN, False  # the doubt stands
        else:
            base, fresh = self.pipe(node.pipe, env, dot)
            if not node.names:
                return base, fresh
            names = node.names
        if not names:
            return base, False
        if _whole(names):
            self.doubt(env, f"takes .{'.'.join(names)} whole (printed, it shows "
                       "memory addresses)")  # fmt: skip
        return _field(base, names, env.values_path), False

    # -- functions ---------------------------------------------------------------------------

    def call(
        self, name: str, args: list[Arg], env: _Env, dot: Value, blind: bool
    ) -> tuple[Value, bool]:
        if name in templatefuncs.ORDER_BLIND:
            given = [
                self.arg(arg, env, dot, blind=_calls(arg, templatefuncs.UNORDERED)) for arg in args
            ]
        else:
            given = [self.arg(arg, env, dot) for arg in args]
        values = [v for v, _ in given]
        if name not in PURE:
            why = _varying_kind(name)
            if name in templatefuncs.UNORDERED and blind:
                pass  # its order is lost where it goes
            elif name == "tpl":
                self.tpl(values, env)
            else:
                self.doubt(env, f"calls {name} ({why})" if why else
                           f"calls {name}, not a known function")  # fmt: skip
            return CLEAN, False  # text; or a doubt stands already
        if name == "include":
            return self.include_call(args, values, env)
        if name == "printf":
            fmt = args[0] if args else None
            verbs = set(re.findall(_VERB, fmt.raw)) if isinstance(fmt, Literal) else set()
            if not isinstance(fmt, Literal) or not fmt.string:
                self.doubt(env, "printf of a computed format")
            elif "p" in verbs:
                self.doubt(env, "printf of %p (an address)")
            elif verbs - set("vsqxX%") and any(_holds(v, "pointer") for v in values[1:]):
                self.doubt(env, "printf of a pointer under a verb that prints its address")
        if name == "dict":
            return self.dict_call(args, values), True
        if name in templatefuncs.MERGES or name in ("set", "unset"):
            return self.change_call(name, args, given, env)
        if name in templatefuncs.COUNTS:
            return CLEAN, False
        if name in templatefuncs.CHOOSES:
            return _join(*values), False
        if name == "ternary":
            return _join(*values[:2]), False
        if name == "required":
            return (values[-1] if values else CLEAN), False
        if name in templatefuncs.ELEMENT:
            return _elements(_join(*values)), False
        if name in templatefuncs.COLLECTS:
            return _join(CLEAN, *(_contained(v) for v in values)), True
        if name in templatefuncs.COPIES:
            return _copy(_join(*values)), True
        if name in ("get", "index") and values:
            return self.lookup(values[0], args[1:], env), False
        if name == "semver":
            return POINTER, False
        if not all(_clean(v) for v in values):
            self.doubt(env, f"takes Helm's root context into {name}, which can print its "
                       "pointers")  # fmt: skip
            return ANY, False
        if name in templatefuncs.TEXT_OF and values and all(f[0] == "values" for f in values[0]):
            return values[0], False  # a value's text: still the chart's values, for tpl
        if name in templatefuncs.SHARES:
            return _join(*values), False
        return CLEAN, False

    def lookup(self, value: Value, keys: list[Arg], env: _Env) -> Value:
        for key in keys:
            if isinstance(key, Literal) and key.string and key.text is not None:
                value = _field(value, (key.text,), env.values_path)
            else:
                value = _elements(value)
        return value

    def dict_call(self, args: list[Arg], values: list[Value]) -> Value:
        fields: dict[str, Value] = {}
        for index in range(0, len(args), 2):
            key = args[index]
            value = values[index + 1] if index + 1 < len(values) else CLEAN
            if not isinstance(key, Literal) or not key.string or key.text is None:
                return _join(*(_contained(v) for v in values))  # keys unknown
            fields[key.text] = value
        return _shape(fields, False)

    def include_call(self, args: list[Arg], values: list[Value], env: _Env) -> tuple[Value, bool]:
        if not args:
            self.doubt(env, "an include the scan cannot read")
            return CLEAN, False
        name = args[0]
        data = values[1] if len(values) > 1 else CLEAN
        if isinstance(name, Literal) and name.string and name.text is not None:
            self.named_include(name.text, data, env)
        elif _clean(values[0]):
            # a name made of data names one of the templates scanned here (only tpl adds
            # others, and it is judged on its own): any of them may get `data`, or any whose
            # name ends as `print`'s last string does (`print .Template.BasePath "/x.yaml"`)
            suffix = _printed_suffix(name)
            if suffix is None:
                self.include(None, data)
            else:
                for target in self.named:
                    if target.endswith(suffix):
                        self.include(target, data)
        else:
            self.doubt(env, "include of a template name that may hold Helm's root context")
        return CLEAN, False

    def change_call(
        self, name: str, args: list[Arg], given: list[tuple[Value, bool]], env: _Env
    ) -> tuple[Value, bool]:
        """`set`, `unset` and the merges: they change their first argument, a map, and
        return it."""
        if not given:
            return ANY, False
        target, fresh = given[0]
        stored = (
            [v for v, _ in given[1:]] if name in templatefuncs.MERGES else [v for v, _ in given[2:]]
        )
        if name in templatefuncs.MERGES:
            shaped = self.disjoint_merge(target, stored, env) if fresh else None
            if shaped is not None:
                return shaped, True  # no map of the target's is changed, only the new one
            if not all(_clean(v) for v in stored):
                self.doubt(env, f"{name} of Helm's root context into a map other values "
                           "may share")  # fmt: skip
            paths: set[tuple[str, ...] | None] = set()
            _values_paths(target, paths)  # a merge changes maps nested in the target too
            if not fresh and any(_shares_values(v) for v in stored):
                paths.add(None)
            self.change(frozenset(paths))
            return _join(target, *(_contained(v) for v in stored)), fresh
        # set and unset change the target map itself
        if not all(_clean(v) for v in stored) and not fresh:
            self.doubt(env, f"{name} of Helm's root context into a map other values may "
                       "share")  # fmt: skip
        paths = {form[1] for form in target if form[0] == "values"}
        if any(form[0] in ("root", "any") for form in target) or (
            not fresh and any(_shares_values(v) for v in stored)
        ):
            paths.add(None)
        self.change(frozenset(paths))
        key = args[1] if len(args) > 1 else None
        if fresh and name == "set" and isinstance(key, Literal) and key.string and key.text:
            return self.set_key(target, key.text, stored[0] if stored else CLEAN), True
        return _join(target, *(_contained(v) for v in stored)), fresh

    def set_key(self, target: Value, key: str, value: Value) -> Value:
        out: list[Value] = []
        for form in target:
            if form[0] == "shape":
                out.append(_shape({**_fields_of(form), key: value}, bool(form[2])))
            else:
                out.append(_join(frozenset({form}), _contained(value)))
        return _join(*out)

    def as_shape(self, value: Value, env: _Env) -> tuple[dict[str, Value], bool] | None:
        """A value that is maps of known keys (the root context, maps `dict` made) as one
        map: each key's value in any of them, and whether the others are the root's keys."""
        if not value or not all(form[0] in ("shape", "root") for form in value):
            return None
        keys = {key for form in value if form[0] == "shape" for key in _fields_of(form)}
        fields = {key: _field(value, (key,), env.values_path) for key in keys}
        return fields, any(form[0] == "root" or form[2] for form in value)

    def disjoint_merge(self, target: Value, sources: list[Value], env: _Env) -> Value | None:
        """The merge of maps whose keys are known and apart, as one shape (None: not so).
        Maps with no key in common are merged without changing any map nested in them."""
        first = self.as_shape(target, env)
        if first is None:
            return None
        fields, root = first
        for source in sources:
            other = self.as_shape(source, env)
            if other is None:
                return None
            extra, root_here = other
            if (set(extra) | (_ROOT_KEYS if root_here else set())) & (
                set(fields) | (_ROOT_KEYS if root else set())
            ):
                return None
            fields.update(extra)
            root = root or root_here
        return _shape(fields, root)

    def tpl(self, values: list[Value], env: _Env) -> None:
        """A `tpl` returns its text unchanged when the text is a chart value as it is, no
        chart value holds a template action, and no template changes the value (judged once
        every template is read)."""
        text = values[0] if values else ANY
        if not self.values_plain:
            self.doubt(env, "calls tpl (outside the chart)")
        elif not text or not all(form[0] == "values" for form in text):
            self.doubt(env, "calls tpl of text that is not a chart value")
        else:
            self.tpl_of(text, env)

    def tpl_of(self, text: Value, env: _Env) -> None:
        """A tpl of a chart value, judged once every template is read."""
        if self.journal is not None:
            self.journal.append(("tpl", text))
        order = len(self.doubts) + len(self.tpls)
        self.tpls.append(((env.file, self.at, order, ""), text))


def _holds(value: Value, kind: str) -> bool:
    """Whether the value may be, or hold in a map `dict` made, a form of that kind."""
    return any(
        form[0] == kind
        or form[0] == "any"
        or (form[0] == "shape" and any(_holds(v, kind) for v in _fields_of(form).values()))
        for form in value
    )


def _shares_values(value: Value) -> bool:
    paths: set[tuple[str, ...] | None] = set()
    _values_paths(value, paths)
    return bool(paths)


def _printed_suffix(arg: Arg) -> str | None:
    """The string a `(print ... "text")` argument ends with, if it is one."""
    if not isinstance(arg, Paren) or arg.names or len(arg.pipe.cmds) != 1 or arg.pipe.decl:
        return None
    head, *rest = arg.pipe.cmds[0].operands
    last = rest[-1] if rest else None
    if not isinstance(head, Ident) or head.name != "print" or not isinstance(last, Literal):
        return None
    return last.text or None if last.string else None


def _calls(arg: Arg, names: frozenset[str]) -> bool:
    """Whether the argument is a call of one of `names` (piped or in parentheses)."""
    if isinstance(arg, _Piped):
        head = arg.cmds[arg.last].operands[0]
    elif isinstance(arg, Paren) and not arg.names:
        head = arg.pipe.cmds[-1].operands[0]
    else:
        return False
    return isinstance(head, Ident) and head.name in names


def first_doubt(files: list[tuple[str, Parsed]], values_plain: bool) -> tuple[Doubt | None, bool]:
    """The first doubt in `files` ((path, parsed template), in order), and whether a `tpl` was
    proven by values that hold no template action (`values_plain`)."""
    scan = _Scan(files, values_plain)
    return scan.run(), scan.plain_tpl
