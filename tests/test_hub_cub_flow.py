# ruff: noqa: F811
"""The whole `--hub cub` flow against the fake `cub` on PATH (tests/fakecub.py, simulate mode):
install -> deploy -> link-profile -> release publish, twice (the second run changes nothing and
re-deploys onto existing variants), then teardown --delete-config.

The fake checks every call against cub's command table (tests/fixtures/cub/commands.json) and
answers in the shapes of cub's Go structs; it keeps its state in a LocalHub. The calls eksinf
made are then compared with the calls the Go original makes for the same steps
(tests/fixtures/cub/go-original-calls.json, read from confighub/eks-inference cmd/*.go); every
difference is listed here and explained in docs/hub.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from fakecub import FIXTURES, parse

# Fixtures shared with the modules that define them (ruff reads the parameters as redefinitions).
from test_hub_cub import cub  # noqa: F401
from test_oci import auth_registry, no_credentials  # noqa: F401

from eksinf.model.names import OWNER


def signature(argv: list[str]) -> tuple[str, tuple[str, ...]]:
    """A call as `<command>` plus the sorted flag names it used (values dropped)."""
    name, flags, _ = parse(argv)
    return name, tuple(sorted(flags))


# Calls eksinf makes that the Go original does not, and why (docs/hub.md, "Differences from the
# Go original").
ADDED = {
    ("function do", ("--quiet", "--space")): "every function runs --quiet (Go: only in deploy)",
    ("link list", ("--select", "--space", "-o")): "all fields: lists otherwise carry table columns",
    ("release publish", ("-o",)): "the Release is read: number and digests are reported",
    ("target list", ("--select", "--space", "--where", "-o")): "ReleaseTargetID -> <space>/<slug>",
    ("target list", ("--select", "--space", "-o")): "the gate goes on every target of the space",
    ("unit create", ("--space", "--target")): "root is bound to the target, as cub cluster up does",
    ("unit data", ("--space",)): "link-profile checks bindings against the unit in the hub",
    ("unit list", ("--select", "--space", "-o")): "head revisions and gates, read as JSON",
    ("variant promote", ()): "deploy carries base changes into existing variants",
    (
        "variant upload",
        (
            "--component",
            "--granularity",
            "--owner",
            "--source-description",
            "--space-label",
            "--variant",
        ),
    ): "a stable source identity; the space label via --space-label",
}
# Calls the Go original makes that eksinf does not, and why.
DROPPED = {
    ("auth status", ()): "no pre-check: cub's own login error maps to exit 4 with the hint",
    ("function do", ("--space",)): "sent with --quiet",
    ("link list", ("--space", "-o")): "sent with --select '*'",
    ("link update", ("--from-stdin", "--patch", "--space")): "only when bindings changed",
    ("release publish", ()): "sent with -o json",
    ("space get", ()): "sent with -o json",
    ("unit create", ("--space",)): "sent with --target",
    ("unit get", ("--space",)): "sent with -o json",
    ("unit update", ("--space",)): "root exists only on a re-enroll; this flow enrolls once",
    (
        "variant upload",
        ("--component", "--granularity", "--label", "--owner", "--variant"),
    ): "--label labels the units in current cub (a deprecated --unit-label)",
}


def state(store: Path) -> dict:
    """Every unit's head revision and every space's release count, read from the fake's store."""
    from eksinf.hub.local import LocalHub

    hub = LocalHub(store)
    try:
        return {
            s.slug: (
                sorted((u.slug, u.head_revision) for u in hub.list_units(s.slug)),
                len(hub.list_releases(s.slug)),
            )
            for s in hub.list_spaces()
        }
    finally:
        hub.close()


def run_flow(eksinf, stack_dir: Path) -> dict:
    results = {
        "install": eksinf("install", "--json", cwd=stack_dir),
        "deploy": eksinf(
            "deploy", "--plane", "workload", "--target", "c1/target", "--json", cwd=stack_dir
        ),
        "link-profile": eksinf("link-profile", "--json", cwd=stack_dir),
        "publish": eksinf("release", "publish", "c1-argo-apps", "--json", cwd=stack_dir),
    }
    for step, result in results.items():
        assert result.code == 0, f"{step}: {result.err}"
    return {step: json.loads(r.out) for step, r in results.items()}


def test_cub_flow_twice_then_teardown(eksinf, stack_dir, cub, aws_env, monkeypatch):  # noqa: F811
    from aws_stubs import iam_caller_as_on_aws

    from eksinf.flows.enroll import hub_target
    from eksinf.hub import open_hub
    from eksinf.model.targets import KINDS

    iam_caller_as_on_aws(monkeypatch)  # teardown simulates the caller's permissions first

    store = cub.simulate()
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    assert hub_target(stack_dir, "c1", "", KINDS["eks"]) == "c1/target"  # enroll's hub half

    install = eksinf("install", cwd=stack_dir)
    assert install.code == 0, install.err
    made = eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir)
    assert made.code == 0, made.err
    one = run_flow(eksinf, stack_dir)
    assert one["deploy"]["created"] and one["deploy"]["published"]
    hub = open_hub(stack_dir)
    deployed = one["deploy"]["created"]
    for space in deployed:
        assert hub.get_space(space).release_target == "c1/target"
        assert [u for u in hub.list_units(space) if u.validation_errors] == []
    assert hub.get_space("karpenter-base").labels["Owner"] == OWNER

    before = state(store)
    two = run_flow(eksinf, stack_dir)
    assert all(not b["spaceCreated"] and not b["created"] and not b["updated"]
               for b in two["install"]["bases"])  # fmt: skip
    assert two["deploy"]["created"] == [] and sorted(two["deploy"]["existing"]) == sorted(deployed)
    assert two["deploy"]["published"] == [] and two["publish"]["outcome"] == "current"
    assert all(not lk["linkChanged"] and not lk["resolved"] for lk in two["link-profile"]["links"])
    assert state(store) == before  # no unit got a revision, no space a release

    down = eksinf(
        "teardown", "--plane", "workload", "--yes", "--delete-config", "--json", cwd=stack_dir
    )
    assert down.code == 0, down.err
    hub = open_hub(stack_dir)
    assert [s for s in deployed if hub.space_exists(s)] == []

    ours = {signature(c) for c in cub.calls()}
    go = {
        (c["command"], tuple(sorted(c["flags"])))
        for c in json.loads((FIXTURES / "go-original-calls.json").read_text())["calls"]
    }
    assert sorted(ours - go) == sorted(ADDED), "new differences need a reason in docs/hub.md"
    assert sorted(go - ours) == sorted(DROPPED)


def test_a_private_bundle_is_pulled_by_eksinf_and_staged_for_cub(
    eksinf,
    stack_dir,
    cub,
    auth_registry,
    no_credentials,
    monkeypatch,
):
    """cub pulls oci:// inputs anonymously (cmd/cub/variant_upload.go: "the bundle has to be
    public"), so eksinf pulls with its own credentials and hands cub the files: no oci:// ref
    ever reaches cub. Without credentials the pull fails first, naming the registry."""
    cub.simulate()
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "s3cr3t-pw")
    pushed = eksinf(
        "push", "--registry", f"{auth_registry}/private", "-c", "karpenter", cwd=stack_dir
    )
    assert pushed.code == 0, pushed.err
    ref = f"{auth_registry}/private/karpenter"
    up = eksinf("hub", "upload", "karpenter", ref, "--hub", "cub", "--json", cwd=stack_dir)
    assert up.code == 0, up.err
    assert json.loads(up.out)["spaceCreated"] is True
    (upload,) = [c for c in cub.calls() if c[:2] == ["variant", "upload"]]
    assert not any("oci://" in arg for arg in upload)
    assert upload[-1] == str(stack_dir / ".eksinf" / "cub-upload" / "karpenter-base")
    assert "--change-desc" in upload and ref in upload[upload.index("--change-desc") + 1]

    monkeypatch.delenv("EKSINF_REGISTRY_USERNAME")
    monkeypatch.setattr("eksinf.publish.registry._SESSIONS", {})
    refused = eksinf("hub", "upload", "karpenter", ref, "--hub", "cub", cwd=stack_dir)
    assert refused.code == 4 and auth_registry in refused.err
    assert "EKSINF_REGISTRY_USERNAME" in refused.err
    assert len([c for c in cub.calls() if c[:2] == ["variant", "upload"]]) == 1


def test_run_as_cub_eksinf_the_default_hub_is_confighub(eksinf, stack_dir, cub, monkeypatch):  # noqa: F811
    """Under cub's plugin environment (CUB_PLUGIN=1) install goes to ConfigHub through cub with
    no --hub and no config; `--hub local` and the stack's config.yaml still choose the embedded
    hub."""
    store = cub.simulate()
    monkeypatch.setenv("CUB_PLUGIN", "1")
    installed = eksinf("install", cwd=stack_dir)
    assert installed.code == 0, installed.err
    assert any(c[:2] == ["variant", "upload"] for c in cub.calls())
    assert not (stack_dir / ".eksinf" / "hub.db").exists()
    assert store.is_file()  # the ConfigHub stand-in holds the bases
    before = len(cub.calls())
    assert eksinf("hub", "spaces", "--hub", "local", cwd=stack_dir).code == 0
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: local\n")
    assert eksinf("hub", "spaces", cwd=stack_dir).code == 0
    assert len(cub.calls()) == before  # neither went to cub
