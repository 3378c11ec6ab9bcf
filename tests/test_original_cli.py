"""The Go original's command line answered by eksinf: every flag of every
command it had either works, or fails with exit 2 naming eksinf's equivalent; never click's
bare "No such option". And the mgmt deploy's check of the ACK credentials Secret, against the
real kube-apiserver (`kube_plane`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import requests

from eksinf.cli import original
from eksinf.hub.local import LocalHub
from eksinf.kube.client import write_kubeconfig

# The original's commands and flags, as its reference lists them (section 1 of
# ../shared/reference/eks-inference.md): written out here, not read from eksinf's table, so a
# row missing from the table fails below. Every command also took --variant and --profile.
ORIGINAL: dict[str, tuple[str, ...]] = {
    "components": ("--json", "--plane"),
    "version": (),
    "install": ("--registry", "--dry-run", "--prune", "--recreate"),
    "deploy": ("--plane", "--target", "--dry-run", "--no-creds-check"),
    "link-profile": ("--list", "--unlink"),
    "enroll cluster": (
        "--name",
        "--eks-cluster",
        "--region",
        "--kubeconfig",
        "--argocd-version",
        "--argocd-namespace",
        "--oci-registry",
        "--no-argocd",
        "--grant-access",
        "--no-placeholder-gate",
        "--no-argobot",
    ),  # fmt: skip
    "enroll remove": ("--name", "--argocd-namespace", "--kubeconfig", "--delete-spaces", "--yes"),
    "sandbox up": ("--name",),
    "sandbox down": ("--name", "--yes"),
    "creds status": ("--cluster",),
    "creds use-existing": ("--cluster",),
    "creds refresh": ("--cluster",),
    "creds create-user": ("--cluster", "--user-name", "--yes"),
    "creds delete-user": ("--cluster", "--user-name", "--yes"),
    "creds show-policy": ("--cluster",),
    "status": ("--json", "--region"),
    "teardown": ("--plane", "--yes", "--delete-config", "--region"),
}
PERSISTENT = ("--variant", "--profile")
VALUE_FLAGS = {
    "--plane", "--target", "--registry", "--name", "--eks-cluster", "--region", "--kubeconfig",
    "--argocd-version", "--argocd-namespace", "--oci-registry", "--cluster", "--user-name",
    "--variant", "--profile",
}  # fmt: skip
# The two flags eksinf has no equivalent of, and a word of the equivalent each message names.
REFUSED = {
    ("enroll cluster", "--argocd-version"): "ARGOCD_VERSION in versions.env",
    ("enroll cluster", "--no-placeholder-gate"): "eksinf link-profile",
}
CASES = [(path, flag) for path, flags in ORIGINAL.items() for flag in (*flags, *PERSISTENT)]


def _value(flag: str) -> list[str]:
    return [flag, "mgmt"] if flag in VALUE_FLAGS else [flag]


@pytest.fixture
def cub_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding the kubeconfig `cub cluster up --name mgmt` would write."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    return home / ".confighub" / "clusters" / "mgmt.kubeconfig"


def test_the_table_covers_every_flag_of_the_original_and_nothing_else() -> None:
    assert set(original.COMMANDS) == set(ORIGINAL)
    for path, flag in CASES:
        assert [f for f in original.FLAGS if f.flag == flag and f.applies_to(path)], (path, flag)
    listed = {(p, f) for p, f in CASES}
    for row in original.FLAGS:
        assert any((p, row.flag) in listed for p in ORIGINAL if row.applies_to(p)), row.flag
        assert row.takes_value == (row.flag in VALUE_FLAGS), row.flag


@pytest.mark.parametrize(("path", "flag"), CASES, ids=[f"{p}:{f}" for p, f in CASES])
def test_every_flag_of_the_original_parses_or_names_the_equivalent(
    eksinf, stack_dir, cub_home, path, flag
) -> None:
    cub_home.parent.mkdir(parents=True)
    cub_home.write_text("{}")
    result = eksinf(*path.split(), *_value(flag), "--help", cwd=stack_dir)
    assert "No such option" not in result.err
    if (path, flag) in REFUSED:
        assert result.code == 2, result.err
        assert flag in result.err and REFUSED[(path, flag)] in result.err
    else:
        assert result.code == 0, result.err
        assert f"eksinf {path}" in result.out  # the command's own help: the flag was taken


@pytest.mark.parametrize("path", list(ORIGINAL))
def test_persistent_flags_may_stand_before_the_command(eksinf, stack_dir, path) -> None:
    result = eksinf("--variant", "dev", "--profile", "p", *path.split(), "--help", cwd=stack_dir)
    assert result.code == 0, result.err
    assert f"eksinf {path}" in result.out


def test_variant_and_profile_are_eksinfs_options_where_the_command_has_them() -> None:
    import typer

    from eksinf.cli.app import app_for

    args = ["--profile", "p", "--variant", "v", "teardown", "--poll", "5"]
    command = typer.main.get_command(app_for(args))
    assert original.translate(args, command) == [
        "teardown", "--poll", "5", "--aws-profile", "p", "--variant", "v",
    ]  # fmt: skip
    args = ["install", "--registry=host:5000/x", "--variant", "v"]
    command = typer.main.get_command(app_for(args))
    assert original.translate(args, command) == ["install", "--from", "host:5000/x"]


def test_profile_reaches_the_aws_identity(eksinf, stack_dir, aws_env) -> None:
    result = eksinf("--profile", "no-such-profile", "status", cwd=stack_dir)
    assert result.code == 4
    assert "(no-such-profile) could not be found" in result.out + result.err


def test_no_effect_flags_say_so_and_run(eksinf, stack_dir) -> None:
    result = eksinf("components", "--plane", "hub", "--variant", "dev", cwd=stack_dir)
    assert result.code == 0 and "platform-profile" in result.out
    assert "--variant has no effect" in result.err


def test_an_alias_and_its_eksinf_spelling_together_are_refused(eksinf, stack_dir) -> None:
    both = eksinf("install", "--registry", "a", "--from", "b", cwd=stack_dir)
    assert both.code == 2 and "--registry (the original's) and --from" in both.err
    twice = eksinf("status", "--profile", "a", "--aws-profile", "b", cwd=stack_dir)
    assert twice.code == 2 and "--aws-profile" in twice.err


def test_install_registry_is_from(eksinf, stack_dir, tmp_path) -> None:
    """The original uploaded `oci://<registry>/<component>`: eksinf's --from with a prefix."""
    from eksinf.model.stack import load_stack
    from eksinf.publish import bundle, oci

    empty = eksinf("install", "--registry", f"oci-layout:{tmp_path / 'empty'}", cwd=stack_dir)
    assert empty.code != 0 and str(tmp_path / "empty") in empty.err  # not configs/
    layout = tmp_path / "layout"
    stack = load_stack(stack_dir)
    for comp in bundle.rendered_components(stack):
        blob = bundle.bundle_bytes(bundle.component_files(stack, comp))
        oci.push(f"oci-layout:{layout}/{comp}", blob, title=f"{comp}.tar.gz", annotations={},
                 tags=["latest"])  # fmt: skip
    result = eksinf("install", "--registry", f"oci-layout:{layout}", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert all(b["spaceCreated"] for b in json.loads(result.out)["bases"])


def test_creds_cluster_reads_cub_cluster_ups_kubeconfig(
    eksinf, stack_dir, kube_plane, cub_home, aws_env
) -> None:
    # a namespace of its own on the shared server: other tests write ack-system's Secret
    versions = stack_dir / "versions.env"
    versions.write_text(
        versions.read_text().replace("ACK_NAMESPACE=ack-system", "ACK_NAMESPACE=ack-cub-creds")
    )
    missing = eksinf("creds", "--cluster", "mgmt", "status", cwd=stack_dir)
    assert missing.code == 4 and str(cub_home) in missing.err
    assert "cub cluster up --name mgmt" in missing.err
    write_kubeconfig(cub_home, kube_plane.kubeconfig())
    result = eksinf("creds", "--cluster", "mgmt", "status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["cluster"] == kube_plane.server and body["present"] is False
    bad = eksinf("creds", "status", "--cluster", "../etc", cwd=stack_dir)
    assert bad.code == 2 and "not a cub cluster name" in bad.err


# ---- the mgmt deploy's credentials check ------------------------------------------------------

SECRET_PATH = "/api/v1/namespaces/ack-system/secrets/aws-creds"


def _kube(plane, method: str, path: str, body: dict | None = None) -> int:
    resp = requests.request(
        method,
        plane.server + path,
        json=body,
        headers={"Authorization": f"Bearer {plane.admin_token}"},
        verify=str(plane.ca_file),
        timeout=10,
    )
    return resp.status_code


def _secret(annotations: dict[str, str] | None = None) -> dict:
    ini = "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = x\n"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "aws-creds", "annotations": annotations or {}},
        "data": {"credentials": base64.b64encode(ini.encode()).decode()},
    }


@pytest.fixture
def ack_system(kube_plane):
    """The plane's ack-system namespace, without the Secret; the Secret removed afterwards (the
    plane is shared by the session)."""
    _kube(kube_plane, "POST", "/api/v1/namespaces",
          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ack-system"}})  # fmt: skip
    _kube(kube_plane, "DELETE", SECRET_PATH)
    yield kube_plane
    _kube(kube_plane, "DELETE", SECRET_PATH)


def _mgmt_target(eksinf, stack_dir: Path, space: str) -> None:
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    hub.create_space(space)
    hub.create_target(space, "target", f"oci-layout:{stack_dir / 'oci'}")
    hub.close()


def test_mgmt_deploy_refuses_without_the_controllers_secret(
    eksinf, stack_dir, ack_system, cub_home
) -> None:
    """A cub cluster (its kubeconfig where `cub cluster up` writes it): exit 3 and the fix; with
    --no-creds-check it goes on; with the Secret it passes; an expired one is refused too."""
    _mgmt_target(eksinf, stack_dir, "mgmt")
    write_kubeconfig(cub_home, ack_system.kubeconfig())
    deploy = ("--variant", "dev", "deploy", "--plane", "mgmt", "--target", "mgmt/target",
              "--dry-run")  # fmt: skip
    refused = eksinf(*deploy, cwd=stack_dir)
    assert refused.code == 3, refused.err
    assert "cluster mgmt has no Secret ack-system/aws-creds" in refused.err
    assert f"eksinf creds use-existing --kubeconfig {cub_home}" in refused.err
    assert "--no-creds-check" in refused.err
    skipped = eksinf(*deploy, "--no-creds-check", cwd=stack_dir)
    assert skipped.code == 0, skipped.err
    assert "would create" in skipped.err and "credentials" not in skipped.err

    assert _kube(ack_system, "POST", "/api/v1/namespaces/ack-system/secrets", _secret()) == 201
    passed = eksinf(*deploy, cwd=stack_dir)
    assert passed.code == 0, passed.err
    assert "credentials present in mgmt (ack-system/aws-creds)" in passed.err

    _kube(ack_system, "DELETE", SECRET_PATH)
    expired = _secret({"eksinf.dev/expires-at": "2020-01-01T00:00:00Z"})
    assert _kube(ack_system, "POST", "/api/v1/namespaces/ack-system/secrets", expired) == 201
    stale = eksinf(*deploy, cwd=stack_dir)
    assert stale.code == 3 and "expired at 2020-01-01T00:00:00Z" in stale.err
    assert "eksinf creds refresh" in stale.err


def test_mgmt_deploy_checks_the_kept_kubeconfig_and_only_the_mgmt_plane(
    eksinf, stack_dir, ack_system, cub_home
) -> None:
    _mgmt_target(eksinf, stack_dir, "c1")
    write_kubeconfig(stack_dir / ".eksinf" / "clusters" / "c1.kubeconfig", ack_system.kubeconfig())
    mgmt = eksinf("deploy", "--plane", "mgmt", "--target", "c1/target", "--dry-run", cwd=stack_dir)
    assert mgmt.code == 3 and "cluster c1 has no Secret" in mgmt.err
    workload = ("deploy", "--plane", "workload", "--target", "c1/target", "--dry-run")
    assert eksinf(*workload, cwd=stack_dir).code == 0


def test_mgmt_deploy_without_a_kubeconfig_says_it_did_not_check(
    eksinf, stack_dir, cub_home
) -> None:
    _mgmt_target(eksinf, stack_dir, "c2")
    result = eksinf(
        "deploy", "--plane", "mgmt", "--target", "c2/target", "--dry-run", cwd=stack_dir
    )
    assert result.code == 0, result.err
    assert "credentials not checked: no kubeconfig for cluster c2" in result.err
