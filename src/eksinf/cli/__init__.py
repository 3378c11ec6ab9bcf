"""The command line: parse, call one stage, format. No logic of its own lives here.

This package's import is kept light on purpose: `main` answers `--help` from the recorded help
pages (help.py), and `version`, `components`, `render` and `verify` in their plain forms
(quick.py), before the argument layer (app.py: typer and a command module) is imported at all.
"""

from __future__ import annotations

import sys


def run(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (tests call this in-process)."""
    from .app import run as run_app

    return run_app(argv)


def main() -> None:
    from eksinf.flows.hook import handle_plugin_hook

    if handle_plugin_hook(sys.argv[0]):  # cub installing eksinf as a plugin: write its manifest
        sys.exit(0)
    import os

    from .help import recorded_page

    # A shell asking for completions (the script `eksinf completion SHELL` prints) is answered
    # by the argument layer whatever the command line, never by a recorded help page or quick.py.
    if "_EKSINF_COMPLETE" in os.environ:
        from .completion import enable

        enable()
        sys.exit(run())
    page = recorded_page(sys.argv[1:])
    if page is not None:
        sys.stdout.write(page)
        sys.exit(0)
    from .quick import answer

    code = answer(sys.argv[1:], owns_process=True)
    if code is None:
        code = run()
    # The interpreter's last garbage collection at exit walks every object the run made, ~15 ms
    # after a render, to free what the end of the process frees anyway; frozen objects are
    # skipped. Finalizers that matter (temporary folders, open databases) run without it.
    import gc

    gc.freeze()
    sys.exit(code)
