"""LocalHub behaviours the deploy path relies on (reference/confighub.md §6.2)."""

from __future__ import annotations

import sqlite3

import pytest

from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.errors import EksinfError
from eksinf.hub.local import SCHEMA_VERSION, LocalHub
from eksinf.hub.protocol import (
    AlreadyExists,
    GateBlocked,
    HubError,
    MergeConflict,
    NoChanges,
    NotFound,
    ReferencedElsewhere,
    UploadSource,
)

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "app"},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx:1",
                        "env": [{"name": "REGION", "value": "confighubplaceholder"}],
                    }
                ]
            }
        },
    },
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}


def files(deploy: dict | None = None, **extra: dict) -> dict[str, bytes]:
    out = {
        "web.yaml": dump_docs([deploy or DEPLOY]).encode(),
        "namespace.yaml": dump_docs([NAMESPACE]).encode(),
    }
    out.update({f"{k}.yaml": dump_docs([v]).encode() for k, v in extra.items()})
    return out


def upload(hub: LocalHub, content: dict[str, bytes], **kw):
    return hub.variant_upload("app", "base", UploadSource("test", content), **kw)


def with_target(hub: LocalHub, tmp_path) -> str:
    hub.create_space("cluster")
    hub.create_target("cluster", "target", f"oci-layout:{tmp_path / 'oci'}")
    hub.create_trigger("cluster", "no-placeholders", "vet-placeholders", "gate")
    return "cluster/target"


def test_upload_creates_one_unit_per_file_and_unchanged_reupload_adds_no_revision(local_hub):
    report = upload(local_hub, files())
    assert report.space_created and report.created == ("namespace", "web")
    again = upload(local_hub, files())
    assert not again.changed and again.unchanged == ("namespace", "web")
    assert local_hub.get_unit("app-base", "web").head_revision == 1
    assert local_hub.get_space("app-base").labels["Component"] == "app"


def test_update_appends_a_revision_only_when_content_changes(local_hub):
    upload(local_hub, files())
    data = local_hub.unit_data("app-base", "web")
    assert local_hub.update_unit("app-base", "web", data, "same").head_revision == 1
    changed = data.replace("nginx:1", "nginx:2")
    assert local_hub.update_unit("app-base", "web", changed, "bump").head_revision == 2
    assert [r.description for r in local_hub.history("app-base", "web")] == [
        "upload from test",
        "bump",
    ]
    assert local_hub.unit_data("app-base", "web", 1) == data


def test_reupload_keeps_ids_and_merges_downstream_edits_with_upstream_changes(local_hub):
    upload(local_hub, files())
    unit_id = local_hub.get_unit("app-base", "web").unit_id
    local_hub.invoke("app-base", "set-replicas", ["3"], unit="web")  # a downstream edit
    newer = load_docs(dump_docs([DEPLOY]))[0]
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"  # upstream change
    report = upload(local_hub, files(newer))
    assert report.updated == ("web",)
    assert "eksinf hub restore app-base web --revision 2" in report.revert_hint
    doc = load_docs(local_hub.unit_data("app-base", "web"))[0]
    assert doc["spec"]["replicas"] == 3
    assert doc["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert local_hub.get_unit("app-base", "web").unit_id == unit_id


def test_conflicting_edit_keeps_downstream_and_reports_the_path(local_hub):
    upload(local_hub, files())
    local_hub.invoke("app-base", "set-replicas", ["3"], unit="web")
    upstream = load_docs(dump_docs([DEPLOY]))[0]
    upstream["spec"]["replicas"] = 5
    report = upload(local_hub, files(upstream))
    assert report.conflicts == ("web: apps/v1/Deployment/app/web.spec.replicas",)
    assert load_docs(local_hub.unit_data("app-base", "web"))[0]["spec"]["replicas"] == 3


def test_missing_file_is_reported_and_prune_empties_it(local_hub):
    upload(local_hub, files(extra=NAMESPACE))
    content = files()
    report = upload(local_hub, content)
    assert report.missing == ("extra",)
    assert local_hub.unit_data("app-base", "extra") != ""
    pruned = upload(local_hub, content, prune=True)
    assert pruned.emptied == ("extra",)
    assert local_hub.unit_data("app-base", "extra") == ""
    assert local_hub.get_unit("app-base", "extra").head_revision == 2


def test_dry_run_upload_changes_nothing(local_hub):
    report = upload(local_hub, files(), dry_run=True)
    assert report.created == ("namespace", "web")
    assert not local_hub.space_exists("app-base")


def test_variant_create_clones_with_upstream_pointer_binding_and_argo_app(local_hub, tmp_path):
    upload(local_hub, files())
    target = with_target(local_hub, tmp_path)
    space = local_hub.variant_create("dev", "app-base", target=target)
    assert space.slug == "app-dev" and space.release_target == target
    base_unit = local_hub.get_unit("app-base", "web")
    clone = local_hub.get_unit("app-dev", "web")
    assert clone.unit_id != base_unit.unit_id
    assert (clone.upstream_unit_id, clone.upstream_revision) == (base_unit.unit_id, 1)
    assert clone.validation_errors == ("cluster/no-placeholders/vet-placeholders",)
    apps = {u.slug for u in local_hub.list_units("cluster-argo-apps")}
    assert apps == {"root", "app-dev"}
    with pytest.raises(AlreadyExists):
        local_hub.variant_create("dev", "app-base", target=target)


def test_publish_is_gated_then_released_then_no_changes(local_hub, tmp_path):
    from eksinf.publish import oci

    upload(local_hub, files())
    target = with_target(local_hub, tmp_path)
    local_hub.variant_create("dev", "app-base", target=target)
    with pytest.raises(GateBlocked) as blocked:
        local_hub.publish("app-dev")
    assert blocked.value.exit_code == 3
    assert blocked.value.gates == ["cluster/no-placeholders/vet-placeholders"]
    assert blocked.value.units == ["web"]
    assert "web" in str(blocked.value) and "vet-placeholders" in str(blocked.value)
    result = local_hub.invoke("app-dev", "set-env-var", ["web", "REGION", "us-west-2"], unit="web")
    assert result.changed == ("web",)
    release = local_hub.publish("app-dev")
    assert release.release_num == 1 and release.unit_count == 2
    pulled = oci.pull(release.ref)
    assert pulled.manifest_digest == release.manifest_digest
    with pytest.raises(NoChanges):
        local_hub.publish("app-dev")
    assert local_hub.get_unit("app-dev", "web").last_released_revision == 2


def test_bases_hold_placeholders_without_gates(local_hub, tmp_path):
    upload(local_hub, files())
    with_target(local_hub, tmp_path)
    unit = local_hub.get_unit("app-base", "web")
    assert unit.placeholders and not unit.validation_errors


def test_set_env_var_changes_existing_only_and_set_env_upserts(local_hub):
    upload(local_hub, files())
    missing = local_hub.invoke("app-base", "set-env-var", ["web", "NOPE", "x"], unit="web")
    assert missing.changed == () and missing.unchanged == ("web",)
    added = local_hub.invoke("app-base", "set-env", ["web", "NOPE=x"], unit="web")
    assert added.changed == ("web",)
    env = load_docs(local_hub.unit_data("app-base", "web"))[0]["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]
    assert {"name": "NOPE", "value": "x"} in env


def test_functions_select_by_where_clause(local_hub):
    upload(local_hub, files())
    result = local_hub.invoke(
        "app-base", "set-annotation", ["team", "ml"], where="Kind = 'Namespace'"
    )
    assert result.changed == ("namespace",)
    image = local_hub.invoke("app-base", "set-image", ["web", "nginx:9"], where="Slug IN ('web')")
    assert image.changed == ("web",)
    flag = local_hub.invoke(
        "app-base",
        "set-bool-path",
        ["apps/v1/Deployment", "spec.paused", "true"],
        where="Slug LIKE 'w%'",
    )
    assert flag.changed == ("web",)
    assert load_docs(local_hub.unit_data("app-base", "web"))[0]["spec"]["paused"] is True


def test_bad_where_clause_is_a_usage_error(local_hub):
    upload(local_hub, files())
    with pytest.raises(Exception) as err:
        local_hub.invoke("app-base", "set-replicas", ["1"], where="Colour = 'red'")
    assert err.value.exit_code == 2 and "unknown field 'Colour'" in str(err.value)


def test_delete_refuses_referenced_space_and_nonrecursive_delete_of_contents(local_hub, tmp_path):
    upload(local_hub, files())
    target = with_target(local_hub, tmp_path)
    local_hub.variant_create("dev", "app-base", target=target)
    with pytest.raises(ReferencedElsewhere) as ref:
        local_hub.delete_space("app-base", recursive=True)
    assert ref.value.exit_code == 3
    assert "app-dev/web (link to web)" in ref.value.referrers
    with pytest.raises(ReferencedElsewhere) as held:
        local_hub.delete_space("cluster", recursive=True)
    assert "app-dev (release target)" in held.value.referrers
    with pytest.raises(HubError) as not_empty:
        local_hub.delete_space("app-dev")
    assert "not empty" in str(not_empty.value) and not_empty.value.exit_code == 3
    for space in ("app-dev", "cluster-argo-apps", "cluster", "app-base"):
        local_hub.delete_space(space, recursive=True)
    assert local_hub.list_spaces() == [] and local_hub.check() == []


def test_one_link_per_unit_pair_and_resolve(local_hub):
    upload(local_hub, files())
    profile = {
        "apiVersion": "x/v1",
        "kind": "PlatformProfile",
        "metadata": {"name": "p"},
        "spec": {"region": "eu-west-1"},
    }
    local_hub.variant_upload(
        "prof", "base", UploadSource("t", {"profile.yaml": dump_docs([profile]).encode()})
    )
    body = {
        "UpstreamPaths": [
            {
                "Name": "region",
                "Path": "spec.region",
                "Resource": {"ResourceType": "x/v1/PlatformProfile", "ResourceName": "/p"},
            }
        ],
        "DownstreamPaths": [],
        "DownstreamSetters": [
            {
                "Parameters": ["region"],
                "FunctionInvocation": {
                    "FunctionName": "set-env-var",
                    "WhereResource": "ConfigHub.ResourceType = 'apps/v1/Deployment'",
                    "Arguments": [
                        {"Value": "web"},
                        {"Value": "REGION"},
                        {"Value": "{{.Params.region}}"},
                    ],
                },
            }
        ],
    }
    first = local_hub.set_link("app-base", "web", "prof-base", "profile", body)
    again = local_hub.set_link("app-base", "web", "prof-base", "profile", body)
    assert first.link_id == again.link_id
    assert local_hub.get_unit("app-base", "web").head_revision == 1  # linking writes nothing
    assert local_hub.resolve("app-base", "web") is True
    assert local_hub.resolve("app-base", "web") is False
    assert "eu-west-1" in local_hub.unit_data("app-base", "web")
    assert not local_hub.get_unit("app-base", "web").placeholders


def test_promote_merges_upstream_change_into_edited_variant(local_hub, tmp_path):
    upload(local_hub, files())
    local_hub.variant_create("dev", "app-base")
    local_hub.invoke("app-dev", "set-replicas", ["4"], unit="web")
    data = local_hub.unit_data("app-base", "web").replace("nginx:1", "nginx:2")
    local_hub.update_unit("app-base", "web", data, "bump")
    assert local_hub.variant_promote("app-dev").updated == ("web",)
    doc = load_docs(local_hub.unit_data("app-dev", "web"))[0]
    assert doc["spec"]["replicas"] == 4
    assert doc["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert not local_hub.variant_promote("app-dev").changed


def test_promote_clones_new_upstream_units_and_empties_deleted_ones(local_hub):
    upload(local_hub, files())
    local_hub.variant_create("dev", "app-base")
    extra = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "extra"}}
    content = files(extra=extra)
    del content["namespace.yaml"]
    report = upload(local_hub, content, prune=True)
    assert report.created == ("extra",) and report.emptied == ("namespace",)
    promoted = local_hub.variant_promote("app-dev")
    assert (promoted.added, promoted.emptied, promoted.updated) == (("extra",), ("namespace",), ())
    assert "name: extra" in local_hub.unit_data("app-dev", "extra")
    assert local_hub.unit_data("app-dev", "namespace") == ""
    # the clone follows its upstream like the others
    assert local_hub.get_unit("app-dev", "extra").upstream_unit_id
    assert not local_hub.variant_promote("app-dev").changed


def test_promote_reports_every_conflict_by_unit_and_field_and_writes_nothing(local_hub):
    upload(local_hub, files())
    local_hub.variant_create("dev", "app-base")
    local_hub.invoke("app-dev", "set-replicas", ["4"], unit="web")
    head = local_hub.get_unit("app-dev", "web").head_revision
    data = local_hub.unit_data("app-base", "web").replace("replicas: 1", "replicas: 3")
    local_hub.update_unit("app-base", "web", data.replace("nginx:1", "nginx:2"), "bump")
    with pytest.raises(MergeConflict) as err:
        local_hub.variant_promote("app-dev")
    assert err.value.exit_code == 3
    assert err.value.conflicts == ["web: apps/v1/Deployment/app/web.spec.replicas"]
    assert local_hub.get_unit("app-dev", "web").head_revision == head  # the image did not move
    with pytest.raises(MergeConflict):  # still reported on the next run: nothing advanced
        local_hub.variant_promote("app-dev")


def test_not_found_errors_name_the_entity(local_hub):
    with pytest.raises(NotFound) as err:
        local_hub.get_unit("nope", "x")
    assert "space nope not found" in str(err.value) and err.value.exit_code == 1


def test_every_operation_is_one_transaction(tmp_path):
    """A failure inside an operation leaves nothing of it behind."""
    hub = LocalHub(tmp_path / "hub.db")
    upload(hub, files())
    with pytest.raises(NotFound):
        hub.variant_create("dev", "app-base", target="missing/target")
    assert not hub.space_exists("app-dev")
    assert hub.check() == []


def test_a_hub_newer_than_this_eksinf_is_refused_and_left_as_it_is(tmp_path):
    LocalHub(tmp_path / "hub.db").close()
    db = sqlite3.connect(tmp_path / "hub.db")
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    before = (tmp_path / "hub.db").read_bytes()
    with pytest.raises(HubError) as err:
        LocalHub(tmp_path / "hub.db")
    assert err.value.exit_code == 4
    assert f"schema version 99, newer than this eksinf reads (up to {SCHEMA_VERSION})" in str(
        err.value
    )
    assert "Upgrade eksinf" in err.value.hint
    assert (tmp_path / "hub.db").read_bytes() == before


def test_function_argument_errors_are_usage_errors(local_hub):
    upload(local_hub, files())
    with pytest.raises(EksinfError) as unknown:
        local_hub.invoke("app-base", "set-colour", ["red"])
    assert unknown.value.exit_code == 2 and "Known functions: set-annotation" in unknown.value.hint
    with pytest.raises(EksinfError) as bad:
        local_hub.invoke("app-base", "set-replicas", ["many"], unit="web")
    assert bad.value.exit_code == 2 and "'many' is not an integer" in str(bad.value)
    with pytest.raises(EksinfError) as trigger:
        local_hub.create_trigger("app-base", "t", "vet-cel", "x")
    assert trigger.value.exit_code == 2 and "vet-cel" in str(trigger.value)


def test_publish_without_release_target_and_conflicting_target(local_hub, tmp_path):
    upload(local_hub, files())
    with pytest.raises(HubError) as err:
        local_hub.publish("app-base")
    assert err.value.exit_code == 3 and "app-base has no release target" in str(err.value)
    with_target(local_hub, tmp_path)
    with pytest.raises(AlreadyExists) as dup:
        local_hub.create_target("cluster", "target", "127.0.0.1:5000/other")
    assert dup.value.exit_code == 3 and "already exists with registry oci-layout:" in str(dup.value)


def test_resolve_names_the_link_when_its_resource_is_gone(local_hub):
    upload(local_hub, files())
    local_hub.variant_upload("prof", "base", UploadSource("t", {"profile.yaml": b"kind: P\n"}))
    body = {
        "DownstreamPaths": [
            {
                "Path": "spec.replicas",
                "Resource": {"ResourceType": "apps/v1/Deployment", "ResourceName": "app/gone"},
                "Expression": "1",
            }
        ]
    }
    link = local_hub.set_link("app-base", "web", "prof-base", "profile", body)
    with pytest.raises(EksinfError) as err:
        local_hub.resolve("app-base", "web")
    assert err.value.exit_code == 3
    assert f"link app-base/{link.slug}" in str(err.value) and "apps/v1/Deployment app/gone" in str(
        err.value
    )


def test_release_to_a_real_registry_pulls_back_byte_identical(local_hub, registry):
    from eksinf.publish import bundle, oci

    upload(local_hub, files())
    local_hub.create_space("c1")
    local_hub.create_target("c1", "target", f"{registry}/hub")
    local_hub.variant_create("dev", "app-base", target="c1/target")
    release = local_hub.publish("app-dev")  # no trigger in c1: nothing gates
    assert release.ref == f"{registry}/hub/space/app-dev"
    pulled = oci.pull(f"{release.ref}:release-1", expect_digest=release.manifest_digest)
    expected = {
        f"{s}.yaml": local_hub.unit_data("app-dev", s).encode() for s in ("namespace", "web")
    }
    assert pulled.blob == bundle.bundle_bytes(expected)
    assert pulled.annotations["com.confighub.target"] == "c1/target"


def test_variant_copies_links_within_the_space_but_not_links_leaving_it(local_hub):
    upload(local_hub, files())
    local_hub.variant_upload("prof", "base", UploadSource("t", {"profile.yaml": b"kind: P\n"}))
    local_hub.set_link("app-base", "web", "app-base", "namespace", {"DownstreamPaths": []})
    local_hub.set_link("app-base", "web", "prof-base", "profile", {"DownstreamPaths": []})
    local_hub.variant_create("dev", "app-base")
    copied = [
        (lk.from_unit, lk.to_space, lk.to_unit)
        for lk in local_hub.list_links("app-dev")
        if lk.update_type == "TransformPaths"
    ]
    assert copied == [("web", "app-dev", "namespace")]


def test_publish_pushes_outside_its_write_transaction(local_hub, tmp_path, monkeypatch):
    """While the release is pushed, the hub database takes other writers: the push runs between
    two transactions. A spy around the real oci.push opens a second connection and writes."""
    from eksinf.publish import oci

    upload(local_hub, files())
    local_hub.variant_create("dev", "app-base", target=with_target(local_hub, tmp_path))
    local_hub.invoke("app-dev", "set-env-var", ["web", "REGION", "us-west-2"], unit="web")
    real_push = oci.push
    seen = []

    def spy(*args, **kwargs):
        other = sqlite3.connect(local_hub.path, timeout=0.2, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" inside a write transaction
            other.execute("ROLLBACK")
            seen.append("writable")
        finally:
            other.close()
        return real_push(*args, **kwargs)

    monkeypatch.setattr(oci, "push", spy)
    assert local_hub.publish("app-dev").release_num == 1
    assert seen == ["writable"]


def test_a_unit_changed_during_the_push_stays_unreleased(local_hub, tmp_path, monkeypatch):
    """The release records what was pushed (the units as read before the push); a unit edited
    while the push ran keeps its newer revision unreleased, and the next publish releases it."""
    from eksinf.publish import oci

    upload(local_hub, files())
    local_hub.variant_create("dev", "app-base", target=with_target(local_hub, tmp_path))
    local_hub.invoke("app-dev", "set-env-var", ["web", "REGION", "us-west-2"], unit="web")
    real_push = oci.push

    def racing_push(*args, **kwargs):
        pushed = real_push(*args, **kwargs)
        local_hub.invoke("app-dev", "set-env-var", ["web", "REGION", "eu-west-1"], unit="web")
        return pushed

    monkeypatch.setattr(oci, "push", racing_push)
    first = local_hub.publish("app-dev")
    monkeypatch.setattr(oci, "push", real_push)
    assert first.release_num == 1
    assert oci.pull(first.ref, expect_digest=first.manifest_digest).manifest_digest == (
        first.manifest_digest
    )
    web = local_hub.get_unit("app-dev", "web")
    assert web.last_released_revision == web.head_revision - 1
    second = local_hub.publish("app-dev")
    assert second.release_num == 2 and second.digest != first.digest
    assert local_hub.get_unit("app-dev", "web").last_released_revision == web.head_revision


def test_an_upload_file_is_parsed_until_it_passed_and_a_secret_or_bad_file_every_time(
    tmp_path, monkeypatch
):
    """A rerun uploads the same files: one that read as objects with no Secret before is not
    parsed again; a Secret, an unreadable file and any changed byte are parsed every time."""
    from eksinf.core import cache
    from eksinf.hub import variants

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    parsed: list[str] = []
    real = variants.load_input_docs
    monkeypatch.setattr(variants, "load_input_docs", lambda d, lb: parsed.append(lb) or real(d, lb))
    config = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
    secret = b"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"
    for _ in range(2):
        assert variants.holds_secret(config, "config.yaml") is False
        assert variants.holds_secret(secret, "secret.yaml") is True
        with pytest.raises(EksinfError, match=r"list\.yaml"):
            variants.holds_secret(b"- a list\n", "list.yaml")
    assert parsed == ["config.yaml", "secret.yaml", "list.yaml", "secret.yaml", "list.yaml"]
    assert variants.holds_secret(config + b"data: {}\n", "changed.yaml") is False
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert variants.holds_secret(config, "config.yaml") is False
    assert parsed[-2:] == ["changed.yaml", "config.yaml"]


def test_a_merge_keeps_the_new_uploads_layout_with_the_downstream_edit_in_place():
    """An upload over an edited unit: the merged unit is the new upload as written (its comments
    and quoting), with only the downstream edit's line changed, not the unit in the one
    writer's style."""
    from conftest import REPO

    from eksinf.core.roundtrip import edit_text
    from eksinf.hub.functions import set_replicas
    from eksinf.hub.merge import merge_text

    base = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    theirs = base.replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.12.0")
    assert theirs != base and theirs.startswith("# ")  # a comment the one writer would drop
    ours = edit_text(base, lambda docs: set_replicas(docs, ["3"]))
    assert ours is not None
    result = merge_text(base, theirs, ours)
    assert result.conflicts == ()
    assert result.text == theirs.replace("  replicas: 0\n", "  replicas: 3\n", 1)
