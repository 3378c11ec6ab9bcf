"""Lifecycle checks: no AWS-backed object the stack has shipped silently leaves it
(model/awsobjects)."""

from __future__ import annotations

from collections.abc import Iterator

from ..model.awsobjects import LOCK_FILE, shipped
from ..model.checks import Finding
from .core import Context, check, coded, found


@check("aws-object-removed", "aws-object-unrecorded")
def check_aws_objects(ctx: Context) -> Iterator[Finding]:
    """An ACK object recorded in aws-objects.lock is still in configs/ (removing or renaming
    one makes Argo CD prune it and ACK delete the AWS resource), unless its entry is `retired`
    on purpose; and every ACK object in configs/ is recorded."""
    if ctx.aws_objects is None:
        yield coded(
            "aws-object-unrecorded",
            f"the stack has no {LOCK_FILE}: nothing guards its AWS resources against a rename. "
            f"Run `eksinf render` to write it, and commit it",
            LOCK_FILE,
        )
        return
    now = {o.key: o for o in shipped(ctx.resources)}
    recorded = {o.key for o in ctx.aws_objects}
    for old in ctx.aws_objects:
        if old.key in now or old.retired:
            continue
        aws = f"the AWS {old.kind} {old.aws_name}" if old.aws_name else f"its AWS {old.kind}"
        # a rename keeps the AWS name: the same AWS resource, now under another object
        heirs = sorted(
            o.label
            for o in now.values()
            if o.kind == old.kind and old.aws_name and o.aws_name == old.aws_name
        )
        renamed = f" (renamed to {', '.join(heirs)}?)" if heirs else ""
        yield found(
            f"{old.label} ({old.component}/{old.unit}) was shipped and is gone from "
            f"configs/{renamed}: Argo CD prunes it and ACK deletes {aws}. Keep its name, or, "
            f"if the AWS resource should go, add `retired: <why>` to its entry in {LOCK_FILE}",
            f"{LOCK_FILE} {old.group} {old.label}",
        )
    for key, obj in now.items():
        if key not in recorded:
            yield coded(
                "aws-object-unrecorded",
                f"{obj.label} is not recorded in {LOCK_FILE}: run `eksinf render` and commit "
                f"{LOCK_FILE} with configs/",
                f"configs/{obj.component}/{obj.unit}.yaml {obj.label}",
            )
