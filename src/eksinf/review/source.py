"""Where the two sides of `eksinf diff` come from: a git commit (BASE) and the working tree.

Each side is the stack's reviewable files as a mapping (stack-relative posix path -> text). A
side whose committed configs/ is stale (its inputs digest differs from configs/provenance.json)
is rendered first: the working tree in memory, BASE in a temporary git worktree under
`.eksinf/diff/`, which is removed afterwards. Nothing outside that folder is written.

Reads are bounded (file count and bytes) and never follow a symbolic link.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eksinf.build.inputs import digest_inputs, is_render_input
from eksinf.build.units import PROVENANCE_FILE

from ..errors import CONTRACT, ENVIRONMENT, USAGE, EksinfError
from ..model.names import STATE_DIR

STACK_PATHS = ("components.yaml", "versions.env", "charts.lock", "configs", "render", "iam")
MAX_FILES = 20_000
MAX_BYTES = 256 * 1024 * 1024
WORK_DIR = Path(STATE_DIR) / "diff"  # under the stack root; eksinf owns .eksinf/
GIT_TIMEOUT = 120


@dataclass(frozen=True)
class Side:
    label: str  # what the reviewer sees: "main@1a2b3c4d" or "working tree"
    files: dict[str, str]
    rendered: bool  # configs/ came from a fresh render because the committed one was stale


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args],
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise EksinfError(
            "git is not installed",
            hint="Install git: eksinf diff reads BASE from git.",
            exit_code=ENVIRONMENT,
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise EksinfError(
            f"git {' '.join(args)} did not finish in {GIT_TIMEOUT}s", exit_code=ENVIRONMENT
        ) from exc
    if done.returncode != 0:
        raise EksinfError(
            f"git {' '.join(args[:3])}: {done.stderr.decode(errors='replace').strip() or 'failed'}",
            exit_code=ENVIRONMENT,
        )
    return done.stdout


def _repo(stack_root: Path) -> tuple[Path, str]:
    """The repository's top level and the stack's path inside it ('' or 'dir/')."""
    try:
        out = git(stack_root, "rev-parse", "--show-toplevel", "--show-prefix").decode()
    except EksinfError as exc:
        raise EksinfError(
            f"{stack_root} is not inside a git repository",
            hint="eksinf diff compares the working tree with a commit; run it in a git checkout.",
            exit_code=USAGE,
        ) from exc
    top, _, prefix = out.partition("\n")
    return Path(top.strip()), prefix.strip()


def default_base(stack_root: Path) -> str:
    """The merge base of HEAD with the default branch (origin's HEAD, else main, else master)."""
    candidates = []
    with contextlib.suppress(EksinfError):
        candidates.append(
            git(stack_root, "symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD")
            .decode()
            .strip()
        )
    candidates += ["main", "master", "origin/main", "origin/master"]
    for branch in candidates:
        try:
            git(stack_root, "rev-parse", "--verify", "-q", f"{branch}^{{commit}}")
        except EksinfError:
            continue
        return git(stack_root, "merge-base", "HEAD", branch).decode().strip()
    raise EksinfError(
        "no default branch to compare with (tried origin/HEAD, main, master)",
        hint="Name the base: eksinf diff BASE (a branch, tag or commit).",
        exit_code=USAGE,
    )


def resolve(stack_root: Path, ref: str) -> str:
    if ref.startswith("-"):
        raise EksinfError(f"BASE {ref!r} is not a git ref", exit_code=USAGE)
    try:
        return git(stack_root, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").decode().strip()
    except EksinfError as exc:
        raise EksinfError(
            f"BASE {ref!r} is not a commit in this repository",
            hint="Name a branch, tag or commit (git log shows them); in CI fetch enough history "
            "(actions/checkout fetch-depth: 0).",
            exit_code=USAGE,
        ) from exc


def _decode(rel: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EksinfError(
            f"{rel}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="Stack files are UTF-8 text.",
            exit_code=CONTRACT,
        ) from exc


def _bounded(count: int, size: int, where: str) -> None:
    if count > MAX_FILES or size > MAX_BYTES:
        raise EksinfError(
            f"{where}: more than {MAX_FILES} files or {MAX_BYTES // 2**20} MiB under the stack's "
            "paths; refusing to read it",
            hint="A stack is a few hundred small files; check for a stray folder under render/ or configs/.",
            exit_code=CONTRACT,
        )


def files_at(stack_root: Path, sha: str) -> dict[str, bytes]:
    """The stack's files at commit `sha`, read from git objects (no checkout)."""
    _, prefix = _repo(stack_root)
    listing = git(
        stack_root,
        "ls-tree",
        "-r",
        "-z",
        "--full-tree",
        "--long",
        sha,
        "--",
        *(prefix + p for p in STACK_PATHS),
    )
    entries = []
    total = 0
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, oid, listed_size = meta.split()
        rel = path.decode()[len(prefix) :]
        if mode == b"120000":
            raise EksinfError(
                f"{rel} at {sha[:12]} is a symbolic link; eksinf never follows links out of the stack",
                hint="Commit the file itself instead of a link.",
                exit_code=CONTRACT,
            )
        if kind != b"blob":
            continue  # a submodule is not part of the stack
        entries.append((rel, oid.decode()))
        total += int(listed_size)
    _bounded(len(entries), total, f"commit {sha[:12]}")
    if not entries:
        return {}
    raw = git(
        stack_root, "cat-file", "--batch", stdin=("\n".join(o for _, o in entries) + "\n").encode()
    )
    out: dict[str, bytes] = {}
    pos = 0
    for rel, _ in entries:
        header_end = raw.index(b"\n", pos)
        size = int(raw[pos:header_end].split()[2])
        start = header_end + 1
        out[rel] = raw[start : start + size]
        pos = start + size + 1
    return out


def files_in_tree(stack_root: Path) -> dict[str, bytes]:
    """The stack's files in the working tree. A symbolic link is refused, never followed."""
    out: dict[str, bytes] = {}
    total = 0
    for top in STACK_PATHS:
        path = stack_root / top
        if path.is_symlink():
            raise _link_error(top)
        if path.is_file():
            out[top] = path.read_bytes()
            continue
        if not path.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            base = Path(dirpath)
            for name in sorted(dirnames):
                if (base / name).is_symlink():
                    raise _link_error((base / name).relative_to(stack_root).as_posix())
            for name in sorted(filenames):
                file = base / name
                rel = file.relative_to(stack_root).as_posix()
                if file.is_symlink():
                    raise _link_error(rel)
                data = file.read_bytes()
                out[rel] = data
                total += len(data)
                _bounded(len(out), total, str(stack_root))
    return out


def _link_error(rel: str) -> EksinfError:
    return EksinfError(
        f"{rel} is a symbolic link; eksinf never follows links out of the stack",
        hint="Replace the link with the file itself.",
        exit_code=CONTRACT,
    )


def is_stale(files: dict[str, bytes]) -> bool:
    """Whether configs/ was rendered from other inputs than the ones beside it."""
    raw = files.get(f"configs/{PROVENANCE_FILE}")
    if raw is None:
        return any(is_render_input(p) for p in files)
    try:
        recorded = json.loads(raw).get("inputsSha256")
    except (ValueError, AttributeError):
        return True
    return bool(recorded != digest_inputs({p: d for p, d in files.items() if is_render_input(p)}))


def _texts(files: dict[str, bytes]) -> dict[str, str]:
    return {rel: _decode(rel, data) for rel, data in files.items()}


def _with_render(files: dict[str, str], rendered: dict[str, str]) -> dict[str, str]:
    kept = {rel: text for rel, text in files.items() if not rel.startswith("configs/")}
    return {**kept, **{f"configs/{rel}": text for rel, text in rendered.items()}}


Progress = Callable[[str], None]


def _render(stack_dir: Path, mirror: Path | None, progress: Progress) -> dict[str, str]:
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    return render_stack(load_stack(stack_dir), mirror, progress=progress).files()


def working_tree(stack_root: Path, mirror: Path | None, progress: Progress) -> Side:
    raw = files_in_tree(stack_root)
    files = _texts(raw)
    if not is_stale(raw):
        return Side("working tree", files, False)
    progress("working tree: configs/ is stale; rendering it in memory")
    return Side(
        "working tree (rendered)", _with_render(files, _render(stack_root, mirror, progress)), True
    )


def at_commit(
    stack_root: Path, ref: str, sha: str, mirror: Path | None, progress: Progress
) -> Side:
    raw = files_at(stack_root, sha)
    files = _texts(raw)
    label = f"{ref}@{sha[:12]}" if ref != sha else sha[:12]
    if not is_stale(raw):
        return Side(label, files, False)
    progress(f"{label}: committed configs/ is stale; rendering it in a temporary worktree")
    return Side(
        f"{label} (rendered)",
        _with_render(files, render_in_worktree(stack_root, sha, mirror, progress)),
        True,
    )


def render_in_worktree(
    stack_root: Path, sha: str, mirror: Path | None, progress: Progress
) -> dict[str, str]:
    """Render commit `sha` in a detached worktree under .eksinf/diff/, removed afterwards."""
    top, prefix = _repo(stack_root)
    work = stack_root / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    tree = work / f"base-{sha[:12]}-{os.getpid()}"
    git(top, "worktree", "add", "--detach", "--quiet", str(tree), sha)
    try:
        return _render(tree / prefix if prefix else tree, mirror, progress)
    finally:
        try:
            git(top, "worktree", "remove", "--force", str(tree))
        except EksinfError:
            # our own folder, made above: remove what is left and forget the worktree
            shutil.rmtree(tree, ignore_errors=True)
            git(top, "worktree", "prune")
        if work.is_dir() and not any(work.iterdir()):
            work.rmdir()
