"""A render's second core: the components that need no engine (pinned upstream manifests) are
split in a forked helper while the parent loads the engine and renders the charts.

Linux only, and only before the Helm engine's native library is loaded: a Go runtime does not
survive fork (`start` refuses, and asserts it just before forking). The helper is an
accelerator, never a second writer or speaker: its output goes nowhere, it writes no file (no
manifest copy, and its cache writes are held, `cache.hold_writes`, for the parent to make), it
hands back plain data (JSON and the texts' bytes, never pickle: nothing builds code from data)
through a pipe, and it leaves with os._exit so nothing of the parent's runs twice. Whatever
goes wrong with it (an exception, a death, a short or malformed answer, none in time), the
parent drops it and does that work itself, so a failure is reported as a sequential render
reports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eksinf.build.units import Unit
from eksinf.core import cache, faults
from eksinf.model.stack import Component, Stack

ENGINE_MODULE = "helm_python"  # importing it loads the engine's native library (build/helm.py)
CHILD_FAULT = "render-helper"  # EKSINF_FAULT point: the helper dies as it starts
DEADLINE = 60.0  # seconds the parent waits for the helper's answer before doing the work itself
MAX_ANSWER = 256 << 20  # bytes; a render's manifests are a few MB
PIPE_BYTES = 1 << 20  # Linux's default bound for an unprivileged pipe
_SIZE = 8  # bytes of each length prefix


@dataclass(frozen=True)
class ManifestWork:
    """What the helper made of one manifest component, from the manifests whose sha256 it names."""

    units: tuple[Unit, ...]
    manifests: dict[str, tuple[str, int, int, tuple[str, ...]]]  # name -> sha256, counts, excluded
    held: tuple[tuple[str, str, bytes], ...]  # its cache writes, for the parent to make


def engine_loaded() -> bool:
    return any(m == ENGINE_MODULE or m.startswith(ENGINE_MODULE + ".") for m in sys.modules)


class Helper:
    """A running helper: its answer is read once, when the first component it worked on is
    reached; `close` always reaps it."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.status: int | None = None  # its exit code once reaped (negative: the signal)
        self.answer: dict[str, ManifestWork] | None = None
        self.asked = False

    def work(self, comp: Component) -> ManifestWork | None:
        """What the helper made of `comp`, or None: the parent does it itself."""
        if not self.asked:
            self.asked = True
            data = _read(self.fd, time.monotonic() + DEADLINE)
            self.close(stop=data is None)
            if data is not None and self.status == 0:
                self.answer = _decode(data)
        return (self.answer or {}).get(comp.name)

    def close(self, stop: bool = True) -> None:
        """Reap the helper (killed first when `stop`: not waited for); once only."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.status is None:
            if stop:
                os.kill(self.pid, signal.SIGKILL)
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)


def start(stack: Stack, comps: list[Component], mirror: Path | None) -> Helper | None:
    """A helper working on `comps` (manifest components), or None (sequential): not Linux,
    nothing to do, the engine already loaded or other threads running (fork copies one)."""
    if sys.platform != "linux" or not comps or engine_loaded() or threading.active_count() > 1:
        return None
    from eksinf.build import manifests, manifestsplit  # noqa: F401 - the parent's next, and the helper's

    read, write = os.pipe()
    with contextlib.suppress(OSError):  # fewer turns between the two (the answer is a few MB)
        fcntl.fcntl(read, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    assert not engine_loaded()  # a Go runtime does not survive fork
    pid = os.fork()
    if pid == 0:  # the helper
        code = 1
        try:
            os.close(read)
            _quiet()
            faults.checkpoint(CHILD_FAULT)
            _send(write, _encode(_work(stack, comps, mirror)))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return Helper(pid, read)


def _quiet() -> None:
    """The helper says nothing: what it would print (a cache warning) is the parent's to say."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


# what the helper made of one component: its name, its units with their documents as JSON, its
# manifests (name -> [sha256, resources, crds, excluded]) and its cache writes
_Done = tuple[str, list[tuple[Unit, str]], dict[str, Any], list[tuple[str, str, bytes]]]


def _work(stack: Stack, comps: list[Component], mirror: Path | None) -> list[_Done]:
    """Each manifest component the helper could split: (name, units, manifests, cache writes).
    One that fails is left out: the parent does it and reports its failure."""
    from eksinf.build import manifests  # imported before the fork (`start`)
    from eksinf.build.manifestsplit import manifest_units

    held = cache.hold_writes()
    pinned = manifests.read_lock(stack)
    where = manifests.mirror_dir(mirror, stack.root)
    done: list[_Done] = []
    for comp in comps:
        start = len(held)
        try:
            fetched = {
                s.name: manifests.resolve(stack, s, where, pinned, at_hand=True)
                for s in comp.manifests
            }
            units, made = manifest_units(stack, comp, fetched)
            docs = [json.dumps(u.docs, allow_nan=False) for u in units]
            if [tuple(json.loads(d)) for d in docs] != [u.docs for u in units]:
                continue  # not plain JSON data (a key that is not a string): the parent's work
        except Exception:  # noqa: BLE001 - any failure is the parent's to meet and report
            continue
        made_by = {m.spec.name: [m.sha256, m.resources, m.crds, list(m.excluded)] for m in made}
        done.append((comp.name, list(zip(units, docs, strict=True)), made_by, held[start:]))
    return done


def _encode(done: list[_Done]) -> bytes:
    """A JSON head (what each blob is, by its length) and the blobs after it, UTF-8 texts and
    cache entries' bytes one after the other."""
    blobs: list[bytes] = []

    def put(data: bytes) -> int:
        blobs.append(data)
        return len(data)

    head = [
        {
            "component": name,
            "units": [[u.filename, put(u.text.encode()), put(d.encode())] for u, d in units],
            "manifests": made,
            "held": [[space, key, put(data)] for space, key, data in held],
        }
        for name, units, made, held in done
    ]
    raw = json.dumps(head).encode()
    return len(raw).to_bytes(_SIZE, "big") + raw + b"".join(blobs)


def _send(fd: int, body: bytes) -> None:
    with os.fdopen(fd, "wb") as out:
        out.write(len(body).to_bytes(_SIZE, "big") + body)


def _read(fd: int, deadline: float) -> bytes | None:
    """The helper's whole answer, or None: short, too long, or not there by `deadline`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER + _SIZE:
            return None
    data = b"".join(chunks)
    if len(data) < _SIZE or int.from_bytes(data[:_SIZE], "big") != len(data) - _SIZE:
        return None
    return data[_SIZE:]


def _decode(data: bytes) -> dict[str, ManifestWork] | None:
    """The answer as each component's work, or None when it is not what `_encode` writes."""
    try:
        size = int.from_bytes(data[:_SIZE], "big")
        head = json.loads(data[_SIZE : _SIZE + size])
        at = _SIZE + size
        view = memoryview(data)

        def take(n: int) -> bytes:
            nonlocal at
            if not isinstance(n, int) or n < 0 or at + n > len(data):
                raise ValueError("past the answer's end")
            at += n
            return view[at - n : at].tobytes()

        out = {}
        for raw in head:
            name = raw["component"]
            units = tuple(
                Unit(name, str(filename), take(t).decode(), _docs(json.loads(take(d))))
                for filename, t, d in raw["units"]
            )
            manifests = {
                str(k): (str(v[0]), int(v[1]), int(v[2]), tuple(str(e) for e in v[3]))
                for k, v in raw["manifests"].items()
            }
            held = tuple((str(s), str(k), take(n)) for s, k, n in raw["held"])
            out[name] = ManifestWork(units, manifests, held)
        return out if at == len(data) else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _docs(raw: Any) -> tuple[Any, ...]:
    if not isinstance(raw, list):
        raise ValueError("a unit's documents are not a list")
    return tuple(raw)
