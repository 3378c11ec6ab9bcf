"""A space name the hub would store as given (spaces, '!', '/') is refused before anything is
created under it, with exit 2 and the rule."""

import pytest

from eksinf.errors import USAGE


@pytest.mark.parametrize("name", ["Bad Name!", "a/b", "-lead"])
def test_sandbox_up_refuses_a_bad_space_name(stack_dir, chart_mirror, eksinf, name):
    result = eksinf(
        "sandbox", "up", "--name", name, "--chart-mirror", str(chart_mirror), cwd=stack_dir
    )

    assert result.code == USAGE, result.err
    assert "bad space name" in result.err and "letters, digits" in result.err
    spaces = eksinf("hub", "spaces", "--json", cwd=stack_dir)
    assert name not in spaces.out
