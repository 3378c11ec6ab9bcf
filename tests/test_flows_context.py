"""The StackContext every flow is given (flows/context.py) and the one serving poll loop
(flows/serving.py)."""

from __future__ import annotations

import pytest

from eksinf.errors import EksinfError
from eksinf.flows.context import AwsChoice, StackContext
from eksinf.flows.serving import poll
from eksinf.model.stack import load_stack


def test_the_profile_is_read_once_and_the_scope_takes_the_region_option(stack_dir, monkeypatch):
    import eksinf.model.profile as profile_mod

    real, reads = profile_mod.load_profile, []

    def counting(*args, **kwargs):
        reads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(profile_mod, "load_profile", counting)
    ctx = StackContext(load_stack(stack_dir), aws=AwsChoice(region="eu-central-1"))
    assert ctx.profile is ctx.profile
    assert ctx.scope.region == "eu-central-1"
    assert ctx.scope.stack == ctx.profile.name
    assert len(reads) == 1
    plain = StackContext(load_stack(stack_dir))
    assert plain.scope.region == plain.profile.region


def test_the_hub_backend_is_the_option_then_the_config_file(stack_dir):
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    stack = load_stack(stack_dir)
    assert StackContext(stack).hub_backend == "cub"
    assert StackContext(stack, hub_choice="local").hub_backend == "local"
    with pytest.raises(EksinfError) as bad:
        _ = StackContext(stack, hub_choice="nope").hub_backend
    assert bad.value.exit_code == 2 and "unknown hub backend 'nope'" in bad.value.message


def test_a_bad_config_file_fails_only_when_the_hub_is_needed(stack_dir):
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hubb: local\n")
    ctx = StackContext(load_stack(stack_dir))  # building the context reads no config
    with pytest.raises(EksinfError) as typo:
        _ = ctx.hub_backend
    assert typo.value.exit_code == 3 and "unknown key(s) hubb" in typo.value.message


def test_existing_hub_never_creates_a_local_hub(stack_dir):
    from eksinf.hub.local import DEFAULT_PATH, LocalHub

    ctx = StackContext(load_stack(stack_dir), hub_choice="local")
    with ctx.existing_hub() as hub:
        assert hub is None
    assert not (stack_dir / DEFAULT_PATH).exists()
    LocalHub(stack_dir / DEFAULT_PATH).close()
    with ctx.existing_hub() as hub:
        assert hub is not None and hub.name == "local"


def test_the_poll_loop_reads_until_done_and_sleeps_between_reads():
    states = iter(["degraded", "degraded", "healthy", "healthy"])
    seen, waited, slept = [], [], []
    report = poll(
        lambda: {"state": next(states)},
        lambda r, _reads: r["state"] == "healthy",
        7.5,
        each=lambda r: seen.append(r["state"]),
        waiting=lambda r: waited.append(r["state"]),
        sleep=slept.append,
    )
    assert report == {"state": "healthy"}
    assert seen == ["degraded", "degraded", "healthy"]
    assert waited == ["degraded", "degraded"] and slept == [7.5, 7.5]


def test_the_poll_loop_stops_after_a_count_of_reads():
    slept: list[float] = []
    reads = poll(
        lambda: {"state": "degraded"},
        lambda _r, n: n >= 3,
        1,
        sleep=slept.append,
    )
    assert reads == {"state": "degraded"} and slept == [1, 1]
