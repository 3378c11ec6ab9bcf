"""Writing a render: configs/ (or an --out folder) rebuilt whole, aws-objects.lock kept up to
date, and a written tree read back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from eksinf.build.units import RenderResult, kept
from eksinf.core import inside
from eksinf.core.atomic import write_file
from eksinf.core.outdir import MARKER, claim, write_tree
from eksinf.core.yamlio import load_docs
from eksinf.model import awsobjects
from eksinf.model.configs import Resource


def write_configs(result: RenderResult, out: Path | None = None) -> Path:
    """Write the whole render into configs/ (or `out`): a clean rebuild, so no stale unit stays."""
    if result.partial:
        raise ValueError("a partial render cannot replace configs/")  # a caller bug, not input
    owned = claim(out or result.stack.configs_dir, result.stack.root, allow_configs=True)
    write_tree(owned, result.files())
    if out is None or out == result.stack.configs_dir:
        record_aws_objects(result)
    return owned.path


def record_aws_objects(result: RenderResult) -> None:
    """Record the AWS-backed objects the new configs/ ships in aws-objects.lock (never dropping
    one: model/awsobjects)."""
    planes = {c.name: c.plane for c in result.stack.components}
    now = kept(
        result,
        "aws-objects",
        lambda: awsobjects.shipped(
            Resource(f"{o.component.name}/{u.slug}", planes.get(o.component.name, ""), doc)
            for o in result.outputs
            for u in o.units
            for doc in u.docs
        ),
        lambda found: [dataclasses.asdict(o) for o in found],
        lambda raw: [awsobjects.AwsObject(**o) for o in raw],
    )
    root = result.stack.root
    old = awsobjects.read_lock_text(root)  # read once: parsed here, compared below
    recorded = [] if old is None else awsobjects.parse(load_docs(old, awsobjects.LOCK_FILE))
    text = awsobjects.render_lock(awsobjects.merge(recorded, now))
    if text != old:
        write_file(root / awsobjects.LOCK_FILE, text.encode("utf-8"))


def read_tree(root: Path) -> dict[str, str]:
    """Every file under `root` (configs/ or an --out folder) as text; a link is refused (exit 3),
    so nothing outside the folder is ever compared, diffed or printed."""
    return {
        p.relative_to(root).as_posix(): inside.read_bytes(p, root, root.parent).decode("utf-8")
        for p in inside.files_under(root, root.parent)
        if p.name != MARKER
    }
