"""Fingerprints for the safety tests: a refused command must leave these folders byte-identical."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def fingerprint(*roots: Path) -> dict[str, str]:
    """Every entry under `roots` (hidden ones and .git included) with its kind and content hash;
    links are recorded by target, never followed."""
    seen: dict[str, str] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                key = str(path)
                if path.is_symlink():
                    seen[key] = "link:" + os.readlink(path)
                elif path.is_dir():
                    seen[key] = "dir"
                elif not path.is_file():  # a FIFO or device: reading it could block
                    seen[key] = f"special:{os.lstat(path).st_mode:o}"
                else:
                    seen[key] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return seen
