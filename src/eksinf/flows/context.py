"""What every flow is given: the stack, its profile, its hub and AWS, and where output goes.

The CLI builds one `StackContext` per command from its options (cli/common.py) and hands it to
the one flow the command calls. Each part is decided once: the profile is read once, the hub
backend is resolved once (`--hub`, else the config file's `hub:`, else the default), and the
AWS session is made the first time a flow asks for it (commands that never reach AWS never
load boto3).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from ..model.stack import Stack

# The hub (~0.2 s), the profile's schema and AWS are imported when a flow first needs them, so
# building a context costs a command nothing it does not use.
if TYPE_CHECKING:
    from ..aws.scope import StackScope
    from ..aws.session import AwsSession
    from ..hub.protocol import Hub
    from ..model.profile import Profile


def _silent(_message: str) -> None:
    return None


@dataclass(frozen=True)
class Output:
    """How results are shown: JSON or text, in colour or not; `say` takes progress lines."""

    json: bool = False
    colour: bool = False
    say: Callable[[str], None] = _silent


@dataclass(frozen=True)
class AwsChoice:
    """The command's --region and --aws-profile (None: the profile's region, $AWS_PROFILE)."""

    region: str | None = None
    profile: str | None = None


@dataclass(frozen=True)
class StackContext:
    stack: Stack
    hub_choice: str | None = None  # --hub
    output: Output = field(default_factory=Output)
    aws: AwsChoice = field(default_factory=AwsChoice)

    @cached_property
    def hub_backend(self) -> str:
        """ "local" or "cub": --hub, else the config file's `hub:`, else the default; resolved
        once, when a flow first needs the hub (a bad config file fails only the commands that
        open the hub)."""
        from ..hub import resolve_backend

        return resolve_backend(self.stack.root, self.hub_choice)

    @cached_property
    def profile(self) -> Profile:
        """The stack's platform profile, read and checked once."""
        from ..model.profile import load_profile

        return load_profile(self.stack)

    @cached_property
    def scope(self) -> StackScope:
        """What AWS calls are scoped to: the stack tag, cluster, network and region."""
        from ..aws.scope import StackScope
        from ..model.profile import ORIGINAL_STACK_TAG_KEY, STACK_TAG_KEY

        return StackScope.from_profile(
            self.profile, STACK_TAG_KEY, self.aws.region, (ORIGINAL_STACK_TAG_KEY,)
        )

    @cached_property
    def session(self) -> AwsSession:
        """The AWS session for the scope's region, made on first use."""
        return self._new_session(self.scope.region)

    def session_for(self, scope: StackScope) -> AwsSession:
        """A session in `scope`'s region: the context's own when the regions agree."""
        if scope.region == self.scope.region:
            return self.session
        return self._new_session(scope.region)

    def _new_session(self, region: str) -> AwsSession:
        from ..aws.session import AwsIdentity, AwsSession

        return AwsSession(AwsIdentity.resolve(region, self.aws.profile))

    def say(self, message: str) -> None:
        self.output.say(message)

    def warn(self, message: str) -> None:
        self.output.say(f"warning: {message}")

    def open_hub(self) -> Hub:
        """The stack's hub, of the backend resolved for this run (a context manager)."""
        from ..hub import open_hub

        return open_hub(self.stack.root, self.hub_backend)

    @contextlib.contextmanager
    def existing_hub(self) -> Iterator[Hub | None]:
        """The stack's hub, or None when it has none: opening must not create one."""
        from ..hub import hub_exists

        if not hub_exists(self.stack.root, self.hub_backend):
            yield None
            return
        with self.open_hub() as hub:
            yield hub
