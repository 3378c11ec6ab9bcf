"""Which stack a run reads when --stack is not given: the nearest folder holding components.yaml
from the working folder up, never past the top of a git checkout, else the shipped stack."""

from __future__ import annotations

import pytest

from eksinf.errors import USAGE, EksinfError
from eksinf.model import shipped
from eksinf.model.stackroot import find_stack_root


@pytest.fixture
def shipped_at(tmp_path, monkeypatch):
    copy = tmp_path / "state" / "stack"
    copy.mkdir(parents=True)
    monkeypatch.setattr(shipped, "shipped_root", lambda: copy)
    return copy


def test_a_run_in_a_stacks_subfolder_reads_that_stack(tmp_path, monkeypatch, shipped_at):
    stack = tmp_path / "mystack"
    (stack / "render" / "argocd").mkdir(parents=True)
    (stack / "components.yaml").write_text("components: []\n")
    monkeypatch.chdir(stack / "render" / "argocd")
    assert find_stack_root(None) == stack.resolve()
    monkeypatch.chdir(stack)
    assert find_stack_root(None) == stack.resolve()


def test_the_search_stops_at_the_top_of_a_git_checkout(tmp_path, monkeypatch, shipped_at):
    (tmp_path / "components.yaml").write_text("components: []\n")  # above the checkout
    checkout = tmp_path / "work" / "repo"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "docs").mkdir()
    monkeypatch.chdir(checkout / "docs")
    assert find_stack_root(None) == shipped_at
    monkeypatch.setattr(shipped, "shipped_root", lambda: None)
    with pytest.raises(EksinfError) as err:
        find_stack_root(None)
    assert err.value.exit_code == USAGE and "no components.yaml" in err.value.message


def test_a_given_stack_is_never_searched_upwards(tmp_path, monkeypatch, shipped_at):
    (tmp_path / "components.yaml").write_text("components: []\n")
    inner = tmp_path / "render"
    inner.mkdir()
    with pytest.raises(EksinfError) as err:
        find_stack_root(inner)
    assert err.value.exit_code == USAGE and str(inner.resolve()) in err.value.message
