"""Reading a whole file from an open descriptor, bounded, with no copy in the usual case.

A file object per read costs more than the read of a small file, and asking os.read for a
limit at once allocates that much (16 MiB for each of a render's ~100 inputs), so the size
fstat gave is read first and the rest, should the file have grown since, a MiB at a time.
"""

from __future__ import annotations

import os

_MORE = 1 << 20  # what each read after the first asks for


def read_fd(fd: int, first: int, limit: int) -> bytes:
    """At most `limit` bytes of `fd` from where it stands: `first` at once (the size fstat
    gave, one byte more to see the end), then on to the end of the file or `limit`. One read's
    bytes (the usual case) are returned as read, not copied."""
    chunks: list[bytes] = []
    left, size = limit, first
    while left > 0:
        chunk = os.read(fd, min(left, size))
        if not chunk:
            break
        chunks.append(chunk)
        left, size = left - len(chunk), _MORE
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
