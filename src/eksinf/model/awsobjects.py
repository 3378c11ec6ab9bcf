"""The AWS-backed objects a stack has shipped, recorded in `aws-objects.lock`.

An ACK object stands for a real AWS resource, and the ACK controllers run with deletion policy
`delete`: when Argo CD prunes the object (because a release no longer holds it, as after a
rename), ACK deletes the VPC, role or cluster behind it. Nothing in a diff of YAML says so.

So every AWS-backed object that ever reached configs/ is recorded here, by its Kubernetes
identity (group, kind, namespace, name). `eksinf render` adds new ones and never drops one;
`eksinf lint` refuses (exit 3) a recorded object that is gone from configs/ unless its entry says
why it was retired on purpose. A rename therefore fails lint twice over (old name gone, new name
recorded), which is the point: keep the old name, or retire it knowing the AWS resource goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import CONTRACT, EksinfError
from .configs import ACK_GROUP_SUFFIX, Resource
from .placeholder import is_placeholder

LOCK_FILE = "aws-objects.lock"
_HEADER = (
    "# Every AWS-backed (ACK) object this stack has shipped. `eksinf render` adds new ones; none\n"
    "# is ever dropped. `eksinf lint` fails when a recorded object is gone from configs/: Argo CD\n"
    "# would prune it and ACK would delete the AWS resource. To remove one on purpose, add\n"
    "# `retired: <why>` to its entry. See docs/migrating.md.\n"
)


@dataclass(frozen=True)
class AwsObject:
    group: str
    kind: str
    namespace: str
    name: str
    component: str
    unit: str
    aws_name: str = ""  # the AWS resource's own name, when the unit spells it
    retired: str = ""  # why the object was removed on purpose (empty: still shipped)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.group, self.kind, self.namespace, self.name)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def as_dict(self) -> dict[str, str]:
        out = {
            "group": self.group,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "component": self.component,
            "unit": self.unit,
        }
        if self.aws_name:
            out["awsName"] = self.aws_name
        if self.retired:
            out["retired"] = self.retired
        return out


def aws_name(doc: dict[str, Any]) -> str:
    """The AWS resource's name as the unit spells it: `spec.name`, else its `Name` tag; empty when
    AWS names it (a VPC id) or a profile link writes it."""
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return ""
    name = spec.get("name")
    if isinstance(name, str) and not is_placeholder(name):
        return name
    tags = spec.get("tags")
    if isinstance(tags, dict):
        value = tags.get("Name")
    elif isinstance(tags, list):
        value = next(
            (t.get("value") for t in tags if isinstance(t, dict) and t.get("key") == "Name"), None
        )
    else:
        value = None
    return value if isinstance(value, str) and not is_placeholder(value) else ""


def shipped(resources: Iterable[Resource]) -> list[AwsObject]:
    """The AWS-backed objects among `resources`, in a stable order."""
    found = {}
    for r in resources:
        if not r.group.endswith(ACK_GROUP_SUFFIX):
            continue
        component, _, unit = r.unit.partition("/")
        obj = AwsObject(
            r.group, r.kind, r.namespace or "", r.name, component, unit, aws_name(r.doc)
        )
        found[obj.key] = obj
    return [found[k] for k in sorted(found)]


def merge(recorded: list[AwsObject], current: list[AwsObject]) -> list[AwsObject]:
    """The lock after a render: every recorded entry kept (refreshed when still shipped), every
    new object added."""
    now = {o.key: o for o in current}
    out = {o.key: (replace(now[o.key], retired=o.retired) if o.key in now else o) for o in recorded}
    for key, obj in now.items():
        out.setdefault(key, obj)
    return [out[k] for k in sorted(out)]


def parse(docs: list[Any], label: str = LOCK_FILE) -> list[AwsObject]:
    """The entries of a lock file's one document (`objects: [...]`); an entry that is not as
    eksinf writes it is an input error naming it."""
    if not docs or docs == [None]:
        return []
    body = docs[0]
    items = body.get("objects") if isinstance(body, dict) and len(docs) == 1 else None
    if not isinstance(items, list):
        raise EksinfError(
            f"{label}: expected one document with an `objects:` list",
            hint="Restore it from git; `eksinf render` adds entries, never drops one.",
            exit_code=CONTRACT,
        )
    out = []
    for index, item in enumerate(items):
        fields = ("group", "kind", "namespace", "name", "component", "unit")
        if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in fields):
            raise EksinfError(
                f"{label}: objects[{index}] needs string fields {', '.join(fields)}",
                hint="Restore the entry from git (or add `retired: <why>` to it; never delete it).",
                exit_code=CONTRACT,
            )
        retired = item.get("retired", "")
        if not isinstance(retired, str):
            raise EksinfError(
                f"{label}: objects[{index}].retired must be a string: the reason it was removed",
                exit_code=CONTRACT,
            )
        out.append(
            AwsObject(
                group=item["group"],
                kind=item["kind"],
                namespace=item["namespace"],
                name=item["name"],
                component=item["component"],
                unit=item["unit"],
                aws_name=str(item.get("awsName") or ""),
                retired=retired,
            )
        )
    return out


def render_lock(objects: list[AwsObject]) -> str:
    from eksinf.core.yamldump import dump_docs

    return _HEADER + dump_docs([{"objects": [o.as_dict() for o in objects]}])


def read_lock_text(root: Path) -> str | None:
    """The stack's lock as written; None when it has none yet (a stack from before the lock)."""
    from eksinf.core.inside import read_bytes

    path = root / LOCK_FILE
    if not path.exists():
        return None
    return read_bytes(path, root, root).decode("utf-8")


def read_lock(root: Path) -> list[AwsObject] | None:
    """The stack's lock, parsed; None when it has none yet."""
    from eksinf.core.yamlio import load_docs

    text = read_lock_text(root)
    return None if text is None else parse(load_docs(text, LOCK_FILE))
