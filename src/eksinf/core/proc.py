"""Running a credential program bounded in time and output: kubeconfig exec plugins and Docker
credential helpers. Both are programs the user's own config names; their answers are read,
never trusted to be small or quick."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class Finished:
    code: int
    out: bytes
    err: bytes


class Overflow(Exception):
    """The program printed more than allowed; it was killed. Carries what stderr held."""

    def __init__(self, err: bytes) -> None:
        super().__init__("output over the limit")
        self.err = err


def _drain(
    stream: IO[bytes],
    sink: bytearray,
    limit: int,
    overflow: threading.Event,
    proc: subprocess.Popen[bytes],
) -> None:
    """Read a pipe to its end, keeping at most `limit` bytes; more kills the program."""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if len(sink) + len(chunk) > limit:
            overflow.set()
            proc.kill()
            return
        sink.extend(chunk)


def run_bounded(
    argv: list[str],
    *,
    timeout: float,
    max_output: int,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> Finished:
    """Run `argv` to its end. OSError when it cannot start, subprocess.TimeoutExpired (after
    killing it) past `timeout` seconds, Overflow past `max_output` bytes on either stream."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = bytearray(), bytearray()
    overflow = threading.Event()
    readers = [
        threading.Thread(
            target=_drain, args=(stream, sink, max_output, overflow, proc), daemon=True
        )
        for stream, sink in ((proc.stdout, out), (proc.stderr, err))
    ]
    for reader in readers:
        reader.start()
    try:
        if stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:  # it exited without reading: its answer says why
                pass
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    finally:
        for reader in readers:
            reader.join(timeout=5)
    if overflow.is_set():
        raise Overflow(bytes(err[:2000]))
    return Finished(code, bytes(out), bytes(err))
