"""The deploy path end to end on the repository's stack, on the embedded hub."""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import MIRROR

from eksinf.core.yamlio import load_docs
from eksinf.hub.local import LocalHub
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import load_stack
from eksinf.publish import bundle, oci


def units(eksinf, stack_dir: Path, *args: str) -> list[dict]:
    result = eksinf("hub", "units", "--json", *args, cwd=stack_dir)
    assert result.code == 0, result.err
    return json.loads(result.out)["units"]


def open_hub(stack_dir: Path) -> LocalHub:
    return LocalHub(stack_dir / ".eksinf" / "hub.db")


def test_sandbox_up_end_to_end_then_rerun_then_down(eksinf, stack_dir, monkeypatch):
    from eksinf.model import configs

    reads = []
    real_read = configs.read_units
    monkeypatch.setattr(
        configs, "read_units", lambda *a, **k: reads.append(a) or real_read(*a, **k)
    )
    up = eksinf("sandbox", "up", cwd=stack_dir)
    assert up.code == 0, up.err
    assert "release(s) published" in up.out
    # both planes' releases are admitted against one read of the committed units (none when
    # every document's verdict is already cached: then only their texts are read)
    assert len(reads) <= 1

    bound = [u for u in units(eksinf, stack_dir) if u["target"]]
    assert bound, "sandbox bound no unit to a target"
    assert [u for u in bound if u["placeholders"] or u["validationErrors"]] == []
    assert {u["space"] for u in bound} >= {"karpenter-sandbox", "sandbox-mgmt-argo-apps"}

    hub = open_hub(stack_dir)
    for space in ("aws-network-sandbox", "karpenter-sandbox", "sandbox-workload-argo-apps"):
        (release,) = hub.list_releases(space)
        pulled = oci.pull(release.ref, expect_digest=release.manifest_digest)
        expected = {
            f"{u.slug}.yaml": hub.unit_data(space, u.slug).encode()
            for u in hub.list_units(space)
            if u.target
        }
        assert pulled.blob == bundle.bundle_bytes(expected)
        assert "sha256:" + sha256_hex(pulled.blob) == release.digest
    hub.close()

    again = eksinf("sandbox", "up", "--json", cwd=stack_dir)
    assert again.code == 0, again.err
    report = json.loads(again.out)
    assert report["changed"] is False
    assert all(p["published"] == [] for p in report["planes"])
    text = eksinf("sandbox", "up", cwd=stack_dir)
    assert "nothing changed" in text.out

    plan = eksinf("sandbox", "down", cwd=stack_dir)
    assert plan.code == 0 and "would delete karpenter-sandbox" in plan.out
    assert eksinf("hub", "spaces", "--json", cwd=stack_dir).out.count('"slug"') > 0
    down = eksinf("sandbox", "down", "--yes", cwd=stack_dir)
    assert down.code == 0, down.err
    assert json.loads(eksinf("hub", "spaces", "--json", cwd=stack_dir).out) == {"spaces": []}


def test_sandbox_down_keeps_only_bases_other_variants_use(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    dev = eksinf("hub", "create-variant", "dev", "karpenter-base", cwd=stack_dir)
    assert dev.code == 0, dev.err
    kept = eksinf("sandbox", "down", "--keep-bases", "--json", cwd=stack_dir)
    assert not any(s.endswith("-base") for s in json.loads(kept.out)["wouldDelete"])
    assert eksinf("sandbox", "down", "--yes", cwd=stack_dir).code == 0
    left = {
        s["slug"]
        for s in json.loads(eksinf("hub", "spaces", "--json", cwd=stack_dir).out)["spaces"]
    }
    assert left == {"karpenter-base", "karpenter-dev"}


def _drop_region_binding(stack_dir: Path) -> None:
    path = stack_dir / "render" / "karpenter" / "links" / "bindings.yaml"
    text = path.read_text()
    dropped = re.sub(
        r"  - source: region\n    unit: karpenter-controller\n(?:    .*\n)*?"
        r"    setter: \{container: controller, env: AWS_REGION\}\n",
        "",
        text,
    )
    assert dropped != text
    path.write_text(dropped)


def test_publish_refused_naming_gate_and_unit_when_a_binding_is_removed(eksinf, stack_dir):
    _drop_region_binding(stack_dir)
    result = eksinf("sandbox", "up", cwd=stack_dir)
    assert result.code == 3
    assert "cannot publish karpenter-sandbox" in result.err
    assert "sandbox-workload/no-placeholders/vet-placeholders" in result.err
    assert "karpenter-controller" in result.err


def test_publish_refused_when_a_placeholder_is_left(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    fn = eksinf(
        "fn",
        "set-env",
        "controller",
        "AWS_REGION=confighubplaceholder",
        "--space",
        "karpenter-sandbox",
        "--unit",
        "karpenter-controller",
        cwd=stack_dir,
    )
    assert fn.code == 0 and "karpenter-sandbox/karpenter-controller: changed" in fn.out
    result = eksinf("release", "publish", "karpenter-sandbox", cwd=stack_dir)
    assert result.code == 3
    assert "vet-placeholders" in result.err and "karpenter-controller" in result.err


def test_fn_set_string_path_writes_only_the_named_type(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    args = ("karpenter.sh/v1/NodePool", "spec.limits.cpu", "0", "--space", "karpenter-sandbox")
    first = eksinf("fn", "set-string-path", *args, "--unit", "nodepools", cwd=stack_dir)
    assert first.code == 0 and "karpenter-sandbox/nodepools: changed" in first.out
    again = eksinf("fn", "set-string-path", *args, "--unit", "nodepools", cwd=stack_dir)
    assert again.code == 0 and "not changed" in again.out
    shown = eksinf("hub", "show", "karpenter-sandbox", "nodepools", cwd=stack_dir)
    pools = [d for d in yaml.safe_load_all(shown.out) if d and d.get("kind") == "NodePool"]
    assert pools and all(p["spec"]["limits"]["cpu"] == "0" for p in pools)
    other = eksinf("hub", "show", "karpenter-sandbox", "nodeclasses", cwd=stack_dir)
    assert "limits" not in other.out
    short = eksinf(
        "fn", "set-string-path", "karpenter.sh/v1/NodePool", "--space", "x", cwd=stack_dir
    )
    assert short.code == 2


def test_edits_survive_reinstall_and_upstream_change_arrives(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    # downstream edits: one on the base, one on the variant
    assert (
        eksinf(
            "fn",
            "set-replicas",
            "2",
            "--space",
            "inference-workloads-base",
            "--unit",
            "vllm",
            cwd=stack_dir,
        ).code
        == 0
    )
    assert (
        eksinf(
            "fn",
            "set-annotation",
            "team",
            "ml",
            "--space",
            "inference-workloads-sandbox",
            "--unit",
            "vllm",
            cwd=stack_dir,
        ).code
        == 0
    )
    source = stack_dir / "configs" / "inference-workloads" / "vllm.yaml"
    source.write_text(
        source.read_text().replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.1")
    )

    result = eksinf("install", cwd=stack_dir)
    assert result.code == 0, result.err
    assert "inference-workloads-base: updated" in result.out
    assert "revert: eksinf hub restore inference-workloads-base vllm --revision 2" in result.out

    hub = open_hub(stack_dir)
    (base,) = [
        d
        for d in load_docs(hub.unit_data("inference-workloads-base", "vllm"))
        if d["kind"] == "Deployment"
    ]
    assert base["spec"]["replicas"] == 2
    assert "v0.11.1" in json.dumps(base)
    hub.close()

    promoted = eksinf("hub", "promote", "inference-workloads-sandbox", cwd=stack_dir)
    assert promoted.code == 0 and "vllm" in promoted.out
    hub = open_hub(stack_dir)
    (variant,) = [
        d
        for d in load_docs(hub.unit_data("inference-workloads-sandbox", "vllm"))
        if d["kind"] == "Deployment"
    ]
    assert variant["metadata"]["annotations"]["team"] == "ml"
    assert "v0.11.1" in json.dumps(variant)
    assert hub.get_unit("inference-workloads-sandbox", "vllm").placeholders == ()
    hub.close()


def test_install_recreate_refused_while_variants_exist(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    result = eksinf("install", "--recreate", "--yes", cwd=stack_dir)
    assert result.code == 3
    assert "--recreate refused" in result.err and "ack-controllers-sandbox" in result.err


def test_install_recreate_mints_new_ids_without_variants(eksinf, stack_dir):
    assert eksinf("install", cwd=stack_dir).code == 0
    before = {u["unitId"] for u in units(eksinf, stack_dir, "--space", "karpenter-base")}
    dry = eksinf("install", "--recreate", "--dry-run", cwd=stack_dir)
    assert dry.code == 0 and "would DELETE karpenter-base" in dry.err
    assert {u["unitId"] for u in units(eksinf, stack_dir, "--space", "karpenter-base")} == before
    plan = eksinf("install", "--recreate", cwd=stack_dir)
    assert plan.code == 0 and "re-run with --yes" in plan.err and "would DELETE" in plan.err
    assert {u["unitId"] for u in units(eksinf, stack_dir, "--space", "karpenter-base")} == before
    assert eksinf("install", "--recreate", "--yes", cwd=stack_dir).code == 0
    after = {u["unitId"] for u in units(eksinf, stack_dir, "--space", "karpenter-base")}
    assert after and not (after & before)


def test_install_from_bundle_dir_and_oci_layout(eksinf, stack_dir, tmp_path):
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    layout = tmp_path / "layout"
    for comp in bundle.rendered_components(
        __import__("eksinf.model.stack", fromlist=["load_stack"]).load_stack(stack_dir)
    ):
        blob = bundle.bundle_bytes(
            bundle.component_files(
                __import__("eksinf.model.stack", fromlist=["load_stack"]).load_stack(stack_dir),
                comp,
            )
        )
        (bundles / f"{comp}.tar.gz").write_bytes(blob)
        oci.push(
            f"oci-layout:{layout}/{comp}",
            blob,
            title=f"{comp}.tar.gz",
            annotations={},
            tags=["latest"],
        )
    first = eksinf("install", "--from", str(bundles), "--json", cwd=stack_dir)
    assert first.code == 0, first.err
    assert all(b["spaceCreated"] for b in json.loads(first.out)["bases"])
    second = eksinf("install", "--from", f"oci-layout:{layout}", cwd=stack_dir)
    assert second.code == 0, second.err
    assert "Bases: 0 created, 0 updated" in second.out


def test_deploy_refusals(eksinf, stack_dir):
    hub_plane = eksinf("deploy", "--plane", "hub", "--target", "x/target", cwd=stack_dir)
    assert hub_plane.code == 2
    assert "eksinf hub create-variant dev platform-profile-base" in hub_plane.err
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    wrong = eksinf(
        "deploy",
        "--plane",
        "mgmt",
        "--target",
        "sandbox-workload/target",
        "--variant",
        "sandbox",
        cwd=stack_dir,
    )
    assert wrong.code == 3
    assert "already exists bound to sandbox-mgmt/target" in wrong.err
    missing_target = eksinf("deploy", "--plane", "mgmt", "--target", "nope/target", cwd=stack_dir)
    assert missing_target.code == 1 and "target nope/target not found" in missing_target.err


def test_deploy_without_base_is_an_error(eksinf, stack_dir):
    hub = open_hub(stack_dir)
    hub.create_space("c1")
    hub.create_target("c1", "target", f"oci-layout:{stack_dir / 'oci'}")
    hub.close()
    result = eksinf("deploy", "--plane", "workload", "--target", "c1/target", cwd=stack_dir)
    assert result.code == 3
    assert "missing base space(s): karpenter-base" in result.err and "eksinf install" in result.err


def test_deploy_dry_run_changes_nothing(eksinf, stack_dir):
    assert eksinf("install", cwd=stack_dir).code == 0
    hub = open_hub(stack_dir)
    hub.create_space("c1")
    hub.create_target("c1", "target", f"oci-layout:{stack_dir / 'oci'}")
    hub.close()
    args = ("deploy", "--plane", "workload", "--target", "c1/target", "--dry-run")
    # the dry run runs the real run's preflights: without a profile variant both refuse
    missing = eksinf(*args, cwd=stack_dir)
    assert missing.code == 3 and "no profile variant platform-profile-dev" in missing.err
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    hub = open_hub(stack_dir)
    before = [s.slug for s in hub.list_spaces()]
    hub.close()
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == 0 and "would create karpenter-dev" in result.err
    hub = open_hub(stack_dir)
    assert [s.slug for s in hub.list_spaces()] == before
    hub.close()


def test_link_profile_list_unlink_and_relink(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    listed = eksinf("link-profile", "--list", "--variant", "sandbox", "--json", cwd=stack_dir)
    data = json.loads(listed.out)
    # one link per linked unit of the components an eks target gets (the sandbox's kind)
    deployed = {c.name for c in load_stack(stack_dir).select(kind="eks")}
    assert data["bindings"] and len(data["links"]) == len(
        {(b["component"], b["unit"]) for b in data["bindings"] if b["component"] in deployed}
    )
    unlinked = eksinf("link-profile", "--unlink", "--variant", "sandbox", "--json", cwd=stack_dir)
    assert len(json.loads(unlinked.out)["removed"]) == len(data["links"])
    relinked = eksinf("link-profile", "--variant", "sandbox", cwd=stack_dir)
    assert relinked.code == 0 and "Linked" in relinked.out


def test_hub_show_diff_history(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    history = json.loads(
        eksinf("hub", "history", "karpenter-sandbox", "nodeclasses", "--json", cwd=stack_dir).out
    )
    assert [h["description"] for h in history["revisions"]][-1] == "resolve links"
    diff = eksinf("hub", "diff", "karpenter-sandbox", "nodeclasses", cwd=stack_dir)
    assert diff.code == 0 and diff.out.startswith("--- karpenter-sandbox/nodeclasses@1")
    upstream = eksinf(
        "hub",
        "diff",
        "karpenter-sandbox",
        "karpenter-controller",
        "--upstream",
        "--json",
        cwd=stack_dir,
    )
    assert "-          value: confighubplaceholder" in json.loads(upstream.out)["diff"]
    show = json.loads(
        eksinf("hub", "show", "karpenter-sandbox", "nodeclasses", "--json", cwd=stack_dir).out
    )
    assert "EC2NodeClass" in show["data"]


@pytest.mark.parametrize(
    "fault",
    [
        "hub.before-commit",
        "deploy.variant-created",
        "hub.variant-create",
        "link.linked",
        "deploy.published-one",
        "sandbox.targets",
    ],
)
def test_killed_sandbox_up_leaves_a_consistent_hub_and_rerun_completes(stack_dir, fault):
    cmd = [sys.executable, "-c", "from eksinf.cli import main; main()", "sandbox", "up"]
    env = {**os.environ, "EKSINF_FAULT": fault}
    killed = subprocess.run(cmd, cwd=stack_dir, env=env, capture_output=True, text=True)
    assert killed.returncode == 137, killed.stderr
    hub = open_hub(stack_dir)
    assert hub.check() == []
    hub.close()
    env.pop("EKSINF_FAULT")
    rerun = subprocess.run(cmd, cwd=stack_dir, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    hub = open_hub(stack_dir)
    assert hub.check() == []
    bound = [u for u in hub.list_units() if u.target]
    assert bound and not [u for u in bound if u.placeholders]
    assert all(hub.list_releases(s) for s in ("karpenter-sandbox", "aws-network-sandbox"))
    hub.close()


def test_link_profile_without_profile_variant_names_the_command(eksinf, stack_dir):
    assert eksinf("install", cwd=stack_dir).code == 0
    result = eksinf("link-profile", "--variant", "qa", cwd=stack_dir)
    assert result.code == 3
    assert "no profile variant platform-profile-qa" in result.err
    assert "eksinf hub create-variant qa platform-profile-base" in result.err


def test_fn_unit_and_where_exclude_each_other(eksinf, stack_dir):
    result = eksinf(
        "fn",
        "set-replicas",
        "1",
        "--space",
        "s",
        "--unit",
        "u",
        "--where",
        "Slug = 'u'",
        cwd=stack_dir,
    )
    assert result.code == 2 and "--unit and --where exclude each other" in result.err


def test_binding_naming_a_missing_resource_is_refused_with_its_file_and_line(eksinf, stack_dir):
    path = stack_dir / "render" / "karpenter" / "links" / "bindings.yaml"
    path.write_text(path.read_text().replace("name: /general", "name: /generall", 1))
    result = eksinf("sandbox", "up", cwd=stack_dir)
    assert result.code == 3
    assert (
        "render/karpenter/links/bindings.yaml:" in result.err
        and "EC2NodeClass /generall" in result.err
    )


def test_hub_upload_from_bundle_file_directory_and_oci(eksinf, stack_dir, tmp_path):
    files = bundle.component_files(
        __import__("eksinf.model.stack", fromlist=["x"]).load_stack(stack_dir), "karpenter"
    )
    blob = bundle.bundle_bytes(files)
    archive = tmp_path / "karpenter.tar.gz"
    archive.write_bytes(blob)
    oci.push(
        f"oci-layout:{tmp_path / 'layout'}",
        blob,
        title="karpenter.tar.gz",
        annotations={},
        tags=["latest"],
    )
    first = eksinf("hub", "upload", "karpenter", str(archive), "--json", cwd=stack_dir)
    assert first.code == 0, first.err
    created = json.loads(first.out)
    assert created["spaceCreated"] and sorted(created["created"]) == sorted(n[:-5] for n in files)
    for source in (str(stack_dir / "configs" / "karpenter"), f"oci-layout:{tmp_path / 'layout'}"):
        again = eksinf("hub", "upload", "karpenter", source, "--json", cwd=stack_dir)
        assert again.code == 0, again.err
        assert json.loads(again.out)["updated"] == []
    missing = eksinf(
        "hub", "upload", "karpenter", f"oci-layout:{tmp_path / 'nothing'}", cwd=stack_dir
    )
    assert missing.code != 0 and "not found" in missing.err


def test_sandbox_up_renders_configs_when_missing(eksinf, stack_dir, chart_mirror):
    import shutil

    shutil.rmtree(stack_dir / "configs")
    result = eksinf("sandbox", "up", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert result.code == 0, result.err
    assert "configs is missing: rendering it" in result.err
    assert (stack_dir / "configs" / "karpenter").is_dir()
    assert eksinf("verify", "--chart-mirror", str(chart_mirror), cwd=stack_dir).code == 0


def test_profile_change_reaches_the_variants_on_the_next_deploy(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    hub = open_hub(stack_dir)
    profile = hub.unit_data("platform-profile-sandbox", "profile")
    assert "region: us-west-2" in profile
    moved = profile.replace("region: us-west-2", "region: eu-west-1")
    for zone in "abc":  # the zones move with the region: deploy checks the profile like lint
        moved = moved.replace(f"us-west-2{zone}", f"eu-west-1{zone}")
    hub.update_unit("platform-profile-sandbox", "profile", moved, "move")
    hub.close()
    result = eksinf(
        "deploy",
        "--plane",
        "workload",
        "--target",
        "sandbox-workload/target",
        "--variant",
        "sandbox",
        "--json",
        cwd=stack_dir,
    )
    assert result.code == 0, result.err
    assert "karpenter-sandbox" in json.loads(result.out)["published"]
    hub = open_hub(stack_dir)
    assert "value: eu-west-1" in hub.unit_data("karpenter-sandbox", "karpenter-controller")
    assert [r.release_num for r in hub.list_releases("karpenter-sandbox")] == [1, 2]
    hub.close()


def test_edits_reach_existing_variants_and_variant_edits_survive(eksinf, stack_dir):
    """Issue 12's scenario: after `sandbox up`, a new unit under render/aws-network/ and vLLM's
    replicas raised in render/, then `render` and `sandbox up`: exactly the two changed variants
    publish, the new unit is in aws-network's release, the variant-local annotation survives the
    merge, and a third run changes nothing."""
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    edit = (
        "fn",
        "set-annotation",
        "team",
        "ml",
        "--space",
        "inference-workloads-sandbox",
        "--unit",
        "vllm",
    )
    assert eksinf(*edit, cwd=stack_dir).code == 0
    (stack_dir / "render" / "aws-network" / "extra-note.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: network-note\n"
        "  namespace: aws-inference\ndata:\n  note: added after the first sandbox up\n"
    )
    vllm = stack_dir / "render" / "inference-workloads" / "vllm.yaml"
    vllm.write_text(vllm.read_text().replace("  replicas: 0", "  replicas: 2", 1))
    assert eksinf("render", "--chart-mirror", str(MIRROR), cwd=stack_dir).code == 0

    up = eksinf("sandbox", "up", "--json", cwd=stack_dir)
    assert up.code == 0, up.err
    report = json.loads(up.out)
    published = sorted(s for p in report["planes"] for s in p["published"])
    assert published == ["aws-network-sandbox", "inference-workloads-sandbox"]
    promoted = {r["space"]: r for p in report["planes"] for r in p["promoted"]}
    assert promoted["aws-network-sandbox"]["added"] == ["extra-note"]
    assert promoted["inference-workloads-sandbox"]["updated"] == ["vllm"]

    hub = open_hub(stack_dir)
    release = hub.list_releases("aws-network-sandbox")[-1]
    blob = oci.pull(release.ref, expect_digest=release.manifest_digest).blob
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        assert b"name: network-note" in tar.extractfile("extra-note.yaml").read()
    (deployment,) = [
        d
        for d in load_docs(hub.unit_data("inference-workloads-sandbox", "vllm"))
        if d["kind"] == "Deployment"
    ]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["annotations"]["team"] == "ml"
    hub.close()

    again = eksinf("sandbox", "up", cwd=stack_dir)
    assert again.code == 0 and "nothing changed" in again.out


def test_a_base_change_colliding_with_a_variant_edit_is_exit_3_by_unit_and_field(eksinf, stack_dir):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    scale = ("fn", "set-replicas", "1", "--space", "inference-workloads-sandbox", "--unit", "vllm")
    assert eksinf(*scale, cwd=stack_dir).code == 0
    vllm = stack_dir / "render" / "inference-workloads" / "vllm.yaml"
    vllm.write_text(vllm.read_text().replace("  replicas: 0", "  replicas: 2", 1))
    assert eksinf("render", "--chart-mirror", str(MIRROR), cwd=stack_dir).code == 0
    result = eksinf("sandbox", "up", cwd=stack_dir)
    assert result.code == 3
    assert "inference-workloads-sandbox: 1 upstream change(s) collide" in result.err
    assert "vllm: apps/v1/Deployment/" in result.err and ".spec.replicas" in result.err


def test_down_then_up_publishes_each_time_and_release_numbers_continue(eksinf, stack_dir):
    """A deleted and re-made space starts with no releases in the hub, but its repository keeps
    the earlier immutable release-N tags: the numbers continue past them instead of colliding."""
    space = "inference-workloads-sandbox"
    tags = []
    for replicas in ("1", "2"):  # each life ends with content the other life never published
        up = eksinf("sandbox", "up", cwd=stack_dir)
        assert up.code == 0, up.err
        scale = ("fn", "set-replicas", replicas, "--space", space, "--unit", "vllm")
        assert eksinf(*scale, cwd=stack_dir).code == 0
        published = eksinf("release", "publish", space, "--no-sync", cwd=stack_dir)
        assert published.code == 0, published.err
        with open_hub(stack_dir) as hub:
            tags.append([f"release-{r.release_num}" for r in hub.list_releases(space)])
            ref = hub.list_releases(space)[-1].ref
        assert eksinf("sandbox", "down", "--yes", cwd=stack_dir).code == 0
    assert tags == [["release-1", "release-2"], ["release-3", "release-4"]]
    assert set(oci.list_tags(ref)) >= {"release-1", "release-2", "release-3", "release-4"}
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0  # the third life publishes too


def test_sandbox_down_deletes_what_other_variants_deployed_on_its_targets(eksinf, stack_dir):
    """A `dev` plane deployed on the sandbox's targets: the dry run names its spaces, the real
    run deletes exactly what the dry run listed, all of it."""
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    dev = ("deploy", "--plane", "mgmt", "--target", "sandbox-mgmt/target", "--variant", "dev")
    deployed = eksinf(*dev, "--no-sync", cwd=stack_dir)
    assert deployed.code == 0, deployed.err
    plan = json.loads(eksinf("sandbox", "down", "--json", cwd=stack_dir).out)
    assert plan["blockedBy"] == []
    assert "karpenter-aws-dev" in plan["wouldDelete"]
    down = eksinf("sandbox", "down", "--yes", "--json", cwd=stack_dir)
    assert down.code == 0, down.err
    assert json.loads(down.out)["deleted"] == plan["wouldDelete"]
    left = {
        s["slug"]
        for s in json.loads(eksinf("hub", "spaces", "--json", cwd=stack_dir).out)["spaces"]
    }
    assert left == {"platform-profile-base", "platform-profile-dev"}


def test_sandbox_down_deletes_nothing_while_something_it_cannot_own_blocks_it(eksinf, stack_dir):
    """A space eksinf did not make, deployed on the sandbox's target: named in the plan, and
    --yes refuses before deleting anything."""
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    with open_hub(stack_dir) as hub:
        hub.create_space("theirs", {"Owner": "someone else"})
        hub.create_unit(
            "theirs", "cm", "apiVersion: v1\nkind: ConfigMap\n", target="sandbox-mgmt/target"
        )
        before = sorted(s.slug for s in hub.list_spaces())
    plan = json.loads(eksinf("sandbox", "down", "--json", cwd=stack_dir).out)
    assert any(b.startswith("theirs ") for b in plan["blockedBy"])
    down = eksinf("sandbox", "down", "--yes", cwd=stack_dir)
    assert down.code == 3
    assert "nothing was deleted" in down.err and "theirs" in down.err
    with open_hub(stack_dir) as hub:
        assert sorted(s.slug for s in hub.list_spaces()) == before


def test_hub_diff_upstream_shows_only_the_field_a_function_changed(eksinf, stack_dir):
    """The base holds the committed file (comments, quoting); set-replicas re-writes the unit in
    eksinf's style. The diff compares content: one line out, one line in."""
    assert eksinf("install", cwd=stack_dir).code == 0
    made = eksinf("hub", "create-variant", "dev", "inference-workloads-base", cwd=stack_dir)
    assert made.code == 0, made.err
    scale = ("fn", "set-replicas", "3", "--space", "inference-workloads-dev", "--unit", "vllm")
    assert eksinf(*scale, cwd=stack_dir).code == 0
    diff = eksinf("hub", "diff", "inference-workloads-dev", "vllm", "--upstream", cwd=stack_dir)
    assert diff.code == 0, diff.err
    changed = [
        line
        for line in diff.out.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == ["-  replicas: 0", "+  replicas: 3"]
    # and the unit itself is the committed file with that one line changed: its comments,
    # quoting and indentation kept (ruamel.yaml's round trip, core.roundtrip)
    committed = (stack_dir / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    shown = eksinf("hub", "show", "inference-workloads-dev", "vllm", cwd=stack_dir)
    assert shown.code == 0, shown.err
    raw = [
        line
        for line in difflib.unified_diff(committed.splitlines(), shown.out.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert raw == ["-  replicas: 0", "+  replicas: 3"]
    assert "# The model server" in shown.out


def test_after_an_unchanged_rerun_changes_are_still_resolved_published_and_checked(
    eksinf, stack_dir
):
    """A rerun with nothing changed publishes nothing, and "nothing changed" is decided by
    content (a unit file rewritten with the same bytes is no change). What changes after such a
    rerun goes the whole way: a profile value is resolved into the units linked to it and
    published, and a committed unit the API server would not admit stops its release (exit 3)."""
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    nodepools = stack_dir / "configs" / "karpenter" / "nodepools.yaml"
    nodepools.write_bytes(nodepools.read_bytes())  # a new mtime, the same content
    again = eksinf("sandbox", "up", "--json", cwd=stack_dir)
    assert again.code == 0, again.err
    assert json.loads(again.out)["changed"] is False

    with open_hub(stack_dir) as hub:
        profile = hub.unit_data("platform-profile-sandbox", "profile")
        assert "modelId: Qwen/Qwen2.5-7B-Instruct-AWQ" in profile
        moved = profile.replace("Qwen2.5-7B-Instruct-AWQ", "Qwen2.5-3B-Instruct-AWQ")
        hub.update_unit("platform-profile-sandbox", "profile", moved, "smaller model")
    up = eksinf("sandbox", "up", "--json", cwd=stack_dir)
    assert up.code == 0, up.err
    published = sorted(s for p in json.loads(up.out)["planes"] for s in p["published"])
    assert published == ["inference-workloads-sandbox"]
    with open_hub(stack_dir) as hub:
        assert "Qwen2.5-3B-Instruct-AWQ" in hub.unit_data("inference-workloads-sandbox", "vllm")
        assert [r.release_num for r in hub.list_releases("inference-workloads-sandbox")] == [1, 2]

    docs = list(yaml.safe_load_all(nodepools.read_text()))
    for doc in docs:
        if doc and doc["kind"] == "NodePool" and doc["metadata"]["name"] == "general":
            doc["spec"]["limits"]["cpu"] = "lots"
    nodepools.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    refused = eksinf("sandbox", "up", cwd=stack_dir)
    assert refused.code == 3
    assert "release of karpenter-sandbox refused" in refused.err
    assert "spec.limits.cpu" in refused.err
    with open_hub(stack_dir) as hub:
        assert [r.release_num for r in hub.list_releases("karpenter-sandbox")] == [1]


def test_an_unchanged_sandbox_up_writes_nothing_to_the_hub(eksinf, stack_dir):
    """A rerun with nothing changed changes no row of the hub (labels, annotations and release
    targets equal to the stored ones are not written again); a real change still is."""
    from eksinf.flows.sandbox import sandbox_up

    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    with open_hub(stack_dir) as hub:
        before = hub._db.total_changes
        assert not sandbox_up(hub, load_stack(stack_dir)).changed
        assert hub._db.total_changes == before
        hub.label_space("sandbox-mgmt", {"team": "ml"})
        assert hub._db.total_changes == before + 1
