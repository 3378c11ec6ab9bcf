"""The root's options wherever they stand: the one normalisation of a command line, shared by
the argument layer (app.py) and the light commands (quick.py), which must not import typer."""

from __future__ import annotations

STACK_OPTION = "--stack"  # the one root option that takes a value
# Options each command takes for itself, also accepted before the command (`eksinf --json
# components`): moved after it before parsing. The root's --stack is accepted after the command
# the other way round. Each with whether it takes a value.
COMMAND_OPTIONS = {"--json": False, "--hub": True}
VERSION_OPTION = "--version"  # `eksinf --version` is `eksinf version`


def _take(args: list[str], at: int, takes_value: bool) -> tuple[list[str], int]:
    """The option at `at` (with its value, `--opt=value` or `--opt value`) and where the next
    word is."""
    if takes_value and "=" not in args[at] and at + 1 < len(args):
        return args[at : at + 2], at + 2
    return args[at : at + 1], at + 1


def global_options_anywhere(args: list[str]) -> list[str]:
    """`args` with --stack moved before the command and --json/--hub moved after it, so the
    global options work on either side; `--version` before the command is `version`. Words
    after `--` are left alone."""
    head: list[str] = []  # --stack, before the command
    moved: list[str] = []  # command options given before the command
    rest: list[str] = []
    version = False
    at, seen_command = 0, False
    while at < len(args):
        word = args[at]
        name = word.split("=", 1)[0]
        if word == "--":
            rest += args[at:]
            break
        if name == STACK_OPTION:
            taken, at = _take(args, at, True)
            head += taken
        elif not seen_command and name in COMMAND_OPTIONS:
            taken, at = _take(args, at, COMMAND_OPTIONS[name])
            moved += taken
        elif not seen_command and word == VERSION_OPTION:
            version, at = True, at + 1
        else:
            seen_command = seen_command or not word.startswith("-")
            rest.append(word)
            at += 1
    if version and not seen_command:
        rest.insert(0, "version")
    if moved:
        cut = rest.index("--") if "--" in rest else len(rest)
        rest[cut:cut] = moved
    return [*head, *rest]
