"""`eksinf completion SHELL`: the shell's completion script, printed for the user to load.

typer's scripts and protocol: the script calls `eksinf` back with `_EKSINF_COMPLETE=complete_<shell>`
set, and typer's completion classes (registered by `enable()`, which main() calls for such a
run before anything else) answer from the whole command tree."""

from __future__ import annotations

from enum import StrEnum

import typer

COMPLETE_VAR = "_EKSINF_COMPLETE"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def register(app: typer.Typer) -> None:
    app.command("completion")(completion_cmd)


def completion_cmd(
    shell: Shell = typer.Argument(..., help="bash, zsh or fish.", case_sensitive=False),
) -> None:
    """Print the completion script for bash, zsh or fish.

    Load it in the current shell: eval "$(eksinf completion bash)" (zsh: the same with zsh);
    fish: eksinf completion fish | source. Add that line to ~/.bashrc, ~/.zshrc or
    ~/.config/fish/config.fish to keep it.
    """
    from typer.completion import get_completion_script

    typer.echo(
        get_completion_script(prog_name="eksinf", complete_var=COMPLETE_VAR, shell=shell.value)
    )


def enable() -> None:
    """Register typer's completion classes: a run the shell started to ask for completions."""
    from typer.completion import completion_init

    completion_init()
