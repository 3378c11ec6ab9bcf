"""The drift gate: does configs/ equal a fresh render of its sources?"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from eksinf.build.units import RenderResult, kept
from eksinf.build.validate import ids
from eksinf.build.write import read_tree


@dataclass(frozen=True)
class Drift:
    added: tuple[str, ...]  # in a fresh render but not in configs/
    removed: tuple[str, ...]  # in configs/ but not in a fresh render (stale units)
    changed: tuple[str, ...]
    diff: tuple[str, ...]  # unified diff lines, configs/ -> fresh render
    checked: int

    @property
    def clean(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def as_dict(self) -> dict[str, bool | int | list[str]]:
        return {
            "clean": self.clean,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "checked": self.checked,
        }


def compare(result: RenderResult) -> Drift:
    fresh = result.files()
    committed = read_tree(result.stack.configs_dir)
    if result.partial:  # compare only the rendered components' folders
        folders = tuple(f"{o.component.name}/" for o in result.outputs)
        committed = {p: t for p, t in committed.items() if p.startswith(folders)}
    added = sorted(set(fresh) - set(committed))
    removed = sorted(set(committed) - set(fresh))
    changed = sorted(p for p in set(fresh) & set(committed) if fresh[p] != committed[p])
    from eksinf.core.textdiff import unified_diff  # here: a clean compare prints no diff

    diff: list[str] = []
    for path in sorted(added + removed + changed):
        diff += unified_diff(
            committed.get(path, "").splitlines(keepends=True),
            fresh.get(path, "").splitlines(keepends=True),
            f"configs/{path}" if path in committed else "/dev/null",
            f"rendered/{path}" if path in fresh else "/dev/null",
        )
    return Drift(tuple(added), tuple(removed), tuple(changed), tuple(diff), len(fresh))


def duplicate_ids(result: RenderResult) -> list[ids.Duplicate]:
    """Resource ids the fresh render writes more than once within a plane."""
    return kept(
        result,
        "duplicate-ids",
        lambda: ids.duplicates(
            (o.component.plane, f"configs/{o.component.name}/{u.filename}", doc)
            for o in result.outputs
            for u in o.units
            for doc in u.docs
        ),
        lambda found: [dataclasses.asdict(d) for d in found],
        lambda raw: [
            ids.Duplicate(d["plane"], ids.ResourceId(**d["id"]), tuple(d["places"])) for d in raw
        ],
    )
