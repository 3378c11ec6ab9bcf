"""Teardown's config half: the hub operations aws/teardown.py runs through its ConfigPlane."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..hub import default_backend, open_hub, read_config
from ..hub.protocol import Hub, NoChanges


class HubConfig:
    """aws.teardown.ConfigPlane over a Hub."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def through(
        self, spaces: list[str], function: str, args: list[str]
    ) -> tuple[list[str], list[str]]:
        done, absent = [], []
        for space in spaces:
            if not self.hub.space_exists(space):
                absent.append(space)
                continue
            self.hub.invoke(space, function, args)
            with contextlib.suppress(NoChanges):  # already published with this content
                self.hub.publish(space)
            done.append(space)
        return done, absent

    def delete_spaces(self, spaces: list[str]) -> list[str]:
        removed = []
        for space in spaces:
            if self.hub.space_exists(space):
                self.hub.delete_space(space, recursive=True)
                removed.append(space)
        return removed

    def existing(self, spaces: list[str]) -> list[str]:
        return [s for s in spaces if self.hub.space_exists(s)]


@contextlib.contextmanager
def stack_config(root: Path) -> Iterator[HubConfig | None]:
    """The stack's hub as teardown's ConfigPlane, or None when the stack has none: opening it
    must not create one as a side effect. Closed on the way out."""
    config = read_config(root)
    if config.get("hub", default_backend()) == "local":
        from ..hub.local import DEFAULT_PATH

        if not (root / config.get("hub_path", DEFAULT_PATH)).exists():
            yield None
            return
    with open_hub(root) as hub:
        yield HubConfig(hub)
