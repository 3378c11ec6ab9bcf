"""Recorded help pages: `eksinf [COMMAND ...] --help` answered without the argument layer.

Importing typer and every command module takes ~0.12 s, ten times a bare interpreter, for text
that only changes when the CLI does. The pages are recorded in eksinf/data/help.json by running
the real app (`python -m eksinf.cli.help`), and a test fails when a recorded page differs from
what the app prints. A page is served only where it is byte-for-byte what the app would print:
a plain `[COMMAND ...] --help` (no options before it), on a terminal at least HELP_COLUMNS wide
(click wraps help at min(columns, 80) - 2). Anything else goes to the app.
"""

from __future__ import annotations

import os

PAGES_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "help.json")
HELP_COLUMNS = 80


def recorded_page(argv: list[str]) -> str | None:
    """The recorded page for `argv`, or None when the app must answer."""
    if not argv or argv[-1] not in ("--help", "-h") or any(w.startswith("-") for w in argv[:-1]):
        return None
    import shutil  # the same width rule click applies

    if shutil.get_terminal_size().columns < HELP_COLUMNS:
        return None
    import json  # here: most runs ask no help page, and json costs them ~5 ms to import

    try:
        with open(PAGES_FILE, encoding="utf-8") as fh:
            pages = json.load(fh)
    except (OSError, ValueError):
        return None
    page = pages.get(" ".join(argv[:-1])) if isinstance(pages, dict) else None
    return page if isinstance(page, str) else None


def record() -> dict[str, str]:
    """Every command path's help page, as the app prints it at HELP_COLUMNS columns."""
    import contextlib
    import io

    import typer

    from .app import run, whole_app

    def paths(command: object, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            if not getattr(sub, "hidden", False):
                found += paths(sub, [*prefix, name])
        return found

    pages: dict[str, str] = {}
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        for path in paths(typer.main.get_command(whole_app()), []):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = run([*path, "--help"])
            if code != 0:
                raise RuntimeError(f"eksinf {' '.join(path)} --help exited {code}")
            pages[" ".join(path)] = out.getvalue()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return pages


def render_pages(pages: dict[str, str]) -> str:
    import json

    return json.dumps(pages, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    with open(PAGES_FILE, "w", encoding="utf-8") as fh:
        fh.write(render_pages(record()))
    print(f"recorded help pages in {PAGES_FILE}")
