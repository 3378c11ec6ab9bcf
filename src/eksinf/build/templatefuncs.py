"""The template functions eksinf knows (Go's text/template builtins, sprig's and Helm's), each
listed once with what its result is.

Two readers ask different questions of the one table. The static determinism proof
(determinism.py) asks whether two renders of the same inputs may differ, and why; the
flattening guard's `tpl-value` hazard (hazards.py) asks whether a call, run by tpl from a chart
value, leaves committed YAML that is wrong: empty offline, other on every render, or a secret in
git. So decryptAES is the same on every render, yet a hazard; `keys` may differ between renders,
yet no tpl-value hazard, as the second render of a chart that calls tpl sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

# why a function may vary (the proof's reasons); TIME, RANDOM and CRYPTO, with LOOKUP, are also
# the guard's kinds of tpl-value hazard
TIME = "time"
RANDOM = "random"
CRYPTO = "crypto"
MAP_ORDER = "map order"
OUTSIDE = "outside the chart"
LOOKUP = "lookup"


class Nature(NamedTuple):  # immutable like a frozen dataclass, and cheaper to define on import
    """What a function's result is: `varies` is why two renders may differ (None: it depends on
    the arguments alone), `hazard` the tpl-value kind it is (None: committed YAML holds it
    safely)."""

    varies: str | None
    hazard: str | None


PURE = Nature(None, None)
# the same on every render, but what it returns is a secret in clear, baked into git
SECRET = Nature(None, CRYPTO)
CLOCK = Nature(TIME, TIME)  # reads the clock (or, for toDate, the renderer's time zone)
RANDOMNESS = Nature(RANDOM, RANDOM)
# makes keys, certificates or hashes with a random salt or IV, and returns secrets
KEY_GENERATION = Nature(CRYPTO, CRYPTO)
# a map's keys or values in Go's random order; left to the second render, which a chart that
# calls tpl always gets
UNSORTED = Nature(MAP_ORDER, None)
CLUSTER = Nature(OUTSIDE, LOOKUP)  # asks the cluster or DNS, which answer nothing offline
# the renderer's environment: Helm removes both from its functions, so a call fails to render
ENVIRONMENT = Nature(OUTSIDE, None)
# runs text or a function that is not in the chart's templates (for tpl, usually a chart value)
EVALUATES = Nature(OUTSIDE, None)

_GROUPS: tuple[tuple[Nature, tuple[str, ...]], ...] = (
    (CLOCK, (
        "now", "date", "dateInZone", "date_in_zone", "dateModify", "date_modify",
        "mustDateModify", "must_date_modify", "htmlDate", "htmlDateInZone", "ago", "unixEpoch",
        "toDate", "mustToDate", "durationRound",
    )),
    (RANDOMNESS, (
        "randAlphaNum", "randAlpha", "randNumeric", "randAscii", "randBytes", "randInt",
        "randSeededNumeric", "uuidv4", "shuffle",
    )),
    (KEY_GENERATION, (
        "genCA", "genCAWithKey", "genPrivateKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
        "genSignedCert", "genSignedCertWithKey", "htpasswd", "bcrypt", "encryptAES",
        "derivePassword", "buildCustomCert",
    )),
    (SECRET, ("decryptAES",)),
    (UNSORTED, ("keys", "values")),
    (CLUSTER, ("lookup", "getHostByName")),
    (ENVIRONMENT, ("env", "expandenv")),
    (EVALUATES, ("tpl", "call")),
    # Helm's `include` and `required` too: `include` renders a template of the chart, which
    # the proof reads as well; the proof checks `printf`'s format (`%p` prints an address)
    (PURE, (
        "and", "or", "not", "len", "index", "slice", "print", "printf", "println", "html", "js",
        "urlquery", "eq", "ne", "lt", "le", "gt", "ge",
        "include", "required", "fail",
        "toYaml", "toYamlPretty", "mustToYaml", "fromYaml", "fromYamlArray", "toJson",
        "fromJson", "fromJsonArray", "toToml", "fromToml", "toPrettyJson", "toRawJson",
        "mustFromJson", "mustToJson", "mustToPrettyJson", "mustToRawJson",
        "hello", "abbrev", "abbrevboth", "trunc", "trim", "upper", "lower", "title", "untitle",
        "substr", "repeat", "trimall", "trimAll", "trimSuffix", "trimPrefix", "nospace",
        "initials", "swapcase", "snakecase", "camelcase", "kebabcase", "wrap", "wrapWith",
        "contains", "hasPrefix", "hasSuffix", "quote", "squote", "cat", "indent", "nindent",
        "replace", "plural",
        "sha1sum", "sha256sum", "sha512sum", "adler32sum", "toString", "atoi", "int64", "int",
        "float64", "seq", "toDecimal",
        "split", "splitList", "splitn", "toStrings", "until", "untilStep", "duration",
        "add1", "add", "sub", "div", "mod", "mul", "add1f", "addf", "subf", "divf", "mulf",
        "biggest", "max", "min", "maxf", "minf", "ceil", "floor", "round",
        "join", "sortAlpha", "default", "empty", "coalesce", "all", "any", "compact",
        "mustCompact", "ternary", "deepCopy", "mustDeepCopy", "typeOf", "typeIs", "typeIsLike",
        "kindOf", "kindIs", "deepEqual",
        "base", "dir", "clean", "ext", "isAbs", "osBase", "osClean", "osDir", "osExt",
        "osIsAbs", "b64enc", "b64dec", "b32enc", "b32dec",
        "tuple", "list", "dict", "get", "set", "unset", "hasKey", "pluck", "pick", "omit",
        "merge", "mergeOverwrite", "mustMerge", "mustMergeOverwrite", "append", "push",
        "mustAppend", "mustPush", "prepend", "mustPrepend", "first", "mustFirst", "rest",
        "mustRest", "last", "mustLast", "initial", "mustInitial", "reverse", "mustReverse",
        "uniq", "mustUniq", "without", "mustWithout", "has", "mustHas", "mustSlice", "concat",
        "dig", "chunk", "mustChunk",
        "semver", "semverCompare", "regexMatch", "mustRegexMatch", "regexFindAll",
        "mustRegexFindAll", "regexFind", "mustRegexFind", "regexReplaceAll",
        "mustRegexReplaceAll", "regexReplaceAllLiteral", "mustRegexReplaceAllLiteral",
        "regexSplit", "mustRegexSplit", "regexQuoteMeta", "urlParse", "urlJoin",
    )),
)  # fmt: skip

# The one table: each known function's nature.
FUNCTIONS: dict[str, Nature] = {name: nature for nature, names in _GROUPS for name in names}
assert len(FUNCTIONS) == sum(len(names) for _, names in _GROUPS), "a function is listed twice"


# How the proof's value flow (templateflow.py) follows a pure function's arguments into its
# result, for the functions that do more than make new data from them.
# returns a count or a truth about its arguments, printing none of them
COUNTS = frozenset(("len", "hasKey", "empty", "not", "kindIs", "kindOf", "typeIs", "typeOf"))
CHOOSES = frozenset(("default", "coalesce", "and", "or"))  # returns one of its arguments
ELEMENT = frozenset(("first", "mustFirst", "last", "mustLast"))  # an element of its list
# returns a new list holding its arguments
COLLECTS = frozenset(("list", "tuple", "append", "mustAppend", "push", "mustPush",
                      "prepend", "mustPrepend"))  # fmt: skip
# changes its first map with the others' entries, and returns it
MERGES = frozenset(("merge", "mustMerge", "mergeOverwrite", "mustMergeOverwrite"))
COPIES = frozenset(("deepCopy", "mustDeepCopy"))  # a new copy of its argument, sharing nothing
TEXT_OF = frozenset(("toString",))  # its argument's text
# whose result may share maps of their arguments (a part of them, or a new list or map of their
# parts): changing it changes those too
SHARES = frozenset((
    "pick", "omit", "dig", "pluck", "without", "mustWithout", "uniq", "mustUniq", "compact",
    "mustCompact", "rest", "mustRest", "initial", "mustInitial", "reverse", "mustReverse",
    "concat", "slice", "mustSlice", "chunk", "mustChunk", "index", "get",
))  # fmt: skip
# `keys` and `values` list a map in Go's random order, which these do not show
UNORDERED = frozenset(name for name, nature in FUNCTIONS.items() if nature is UNSORTED)
ORDER_BLIND = frozenset(("len", "empty", "sortAlpha"))
assert all(
    FUNCTIONS.get(name) is PURE
    for name in COUNTS
    | CHOOSES
    | ELEMENT
    | COLLECTS
    | MERGES
    | COPIES
    | TEXT_OF
    | SHARES
    | ORDER_BLIND
), "a flow names a function the table does not call pure"


def varying() -> dict[str, tuple[str, ...]]:
    """The functions whose result may differ between two renders, by why."""
    return _grouped(lambda nature: nature.varies)


def pure() -> frozenset[str]:
    """The functions whose result depends on their arguments alone."""
    return frozenset(name for name, nature in FUNCTIONS.items() if nature.varies is None)


def hazards() -> dict[str, tuple[str, ...]]:
    """The functions a chart value may not call through tpl, by the tpl-value hazard's kind."""
    return _grouped(lambda nature: nature.hazard)


def _grouped(key: Callable[[Nature], str | None]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, nature in FUNCTIONS.items():
        group = key(nature)
        if group is not None:
            out[group] = (*out.get(group, ()), name)
    return out
