"""The profile is checked wherever it is read: every command that reads the platform
profile - from the stack or from the hub's profile variant - runs lint's profile checks and
refuses (exit 3) before changing anything: the stack, its hub and a decoy are byte-identical."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.errors import CONTRACT
from eksinf.hub.local import LocalHub

PROFILE = "render/platform-profile/profile.yaml"
BAD = {
    "cidr-33": ({"vpcCIDR: 10.42.0.0/16": "vpcCIDR: 10.42.0.0/33"}, "is not a CIDR block"),
    "az-other-region": (
        {"availabilityZones: [us-west-2a,": "availabilityZones: [us-east-1a,"},
        "is not an availability zone of region 'us-west-2'",
    ),
    "stack-name-300": (  # metadata.name must equal it: both are 300 characters
        {
            "stackName: inference-demo": "stackName: " + "s" * 300,
            "  name: inference-demo": "  name: " + "s" * 300,
        },
        "is not a DNS label",
    ),
    "cluster-non-ascii": (
        {"clusterName: inference-demo": "clusterName: inférence-demo"},
        "is not a valid EKS cluster name",
    ),
}
STACK_READERS = {
    "sandbox-up": ("sandbox", "up"),
    "links-resolve": ("links", "resolve", "--profile", PROFILE, "--out", "OUT"),
    "status": ("status",),
    "teardown": ("teardown", "--yes"),
    "enroll": ("enroll", "cluster", "--name", "t1"),
}


def spoil(text: str, case: str) -> str:
    for good, bad in BAD[case][0].items():
        assert good in text
        text = text.replace(good, bad, 1)
    return text


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory, chart_mirror) -> Path:
    """A stack whose hub already holds a sandbox (bases, profile variant, both planes)."""
    from conftest import REPO, STACK_DIRS, STACK_FILES

    from eksinf.cli import run

    root = tmp_path_factory.mktemp("sandboxed") / "stack"
    root.mkdir()
    for name in STACK_FILES:
        shutil.copy2(REPO / name, root / name)
    for name in STACK_DIRS:
        shutil.copytree(REPO / name, root / name)
    assert run(["--stack", str(root), "sandbox", "up"]) == 0
    return root


@pytest.fixture
def stack(sandboxed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    dest = tmp_path / "stack"
    shutil.copytree(sandboxed, dest, symlinks=True)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # never reached: refused first
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("EKSINF_AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    (tmp_path / "decoy").mkdir()
    (tmp_path / "decoy" / "keep.txt").write_text("keep\n")
    return dest


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("command", sorted(STACK_READERS))
def test_a_bad_stack_profile_is_refused_before_anything_changes(
    stack, eksinf, tmp_path, case, command
):
    path = stack / PROFILE
    path.write_text(spoil(path.read_text(), case), encoding="utf-8")
    args = [a.replace("OUT", str(tmp_path / "out")) for a in STACK_READERS[command]]
    before = fingerprint(tmp_path)
    result = eksinf(*args, cwd=stack)
    assert result.code == CONTRACT, (result.code, result.err)
    assert f"{PROFILE}:" in result.err and BAD[case][1] in result.err, result.err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize(
    "command",
    [
        (
            "deploy",
            "--plane",
            "workload",
            "--target",
            "sandbox-workload/target",
            "--variant",
            "sandbox",
        ),
        (
            "deploy",
            "--plane",
            "workload",
            "--target",
            "sandbox-workload/target",
            "--variant",
            "sandbox",
            "--dry-run",
        ),
        ("link-profile", "--variant", "sandbox"),
    ],
)
def test_a_bad_hub_profile_is_refused_before_anything_changes(
    stack, eksinf, tmp_path, case, command
):
    hub = LocalHub(stack / ".eksinf" / "hub.db")
    try:
        data = hub.unit_data("platform-profile-sandbox", "profile")
        hub.update_unit("platform-profile-sandbox", "profile", spoil(data, case), "test: spoil")
    finally:
        hub.close()
    before = fingerprint(tmp_path)
    result = eksinf(*command, cwd=stack)
    assert result.code == CONTRACT, (result.code, result.err)
    assert "hub unit platform-profile-sandbox/profile:" in result.err
    assert BAD[case][1] in result.err, result.err
    assert fingerprint(tmp_path) == before
