"""The `Hub` protocol (hub/protocol.py), one suite for both backends: every test runs against the
embedded SQLite hub and against the ConfigHub backend through `cub`.

ConfigHub cannot run here, so the cub backend talks to the fake `cub` on PATH (tests/fakecub.py,
simulate mode): it checks each command line against cub's command table and answers in cub's
own output shapes, keeping its state in a LocalHub. What this suite proves for cub is therefore
that CubHub's calls and its reading of cub's answers give the same results, errors and exit
codes the protocol promises, not ConfigHub's server behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakecub import FakeCub
from test_hub_local import DEPLOY, NAMESPACE, with_target

from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.hub.protocol import (
    AlreadyExists,
    GateBlocked,
    Hub,
    HubError,
    NoChanges,
    NotFound,
    UploadSource,
)


@pytest.fixture(params=["local", "cub"])
def hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    """A fresh, empty hub of each backend."""
    if request.param == "local":
        from eksinf.hub.local import LocalHub

        opened: Hub = LocalHub(tmp_path / "hub" / "hub.db")
        yield opened
        opened.close()
        return
    from eksinf.hub.cub import CubHub

    monkeypatch = request.getfixturevalue("monkeypatch")
    fake = FakeCub(tmp_path, monkeypatch)
    fake.simulate()
    opened = CubHub(tmp_path)
    yield opened
    opened.close()
    fake.close()


def files(replicas: int = 1) -> dict[str, bytes]:
    deploy = {**DEPLOY, "spec": {**DEPLOY["spec"], "replicas": replicas}}
    return {
        "web.yaml": dump_docs([deploy]).encode(),
        "namespace.yaml": dump_docs([NAMESPACE]).encode(),
    }


def upload(hub: Hub, content: dict[str, bytes]):
    return hub.variant_upload("app", "base", UploadSource("test", content))


def replicas_of(hub: Hub, space: str) -> int:
    return int(load_docs(hub.unit_data(space, "web"))[0]["spec"]["replicas"])


def test_spaces_are_created_labelled_listed_and_deleted(hub):
    assert hub.space_exists("team") is False
    made = hub.create_space("team", {"Component": "x"})
    assert made.slug == "team" and made.labels.get("Component") == "x"
    assert hub.space_exists("team") is True
    with pytest.raises(AlreadyExists):
        hub.create_space("team")
    assert hub.create_space("team", allow_exists=True).slug == "team"
    assert hub.label_space("team", {"Plane": "mgmt"}).labels.get("Plane") == "mgmt"
    assert "team" in {s.slug for s in hub.list_spaces()}
    hub.delete_space("team")
    assert hub.space_exists("team") is False


def test_a_missing_space_or_unit_is_not_found_naming_it(hub):
    with pytest.raises(NotFound) as err:
        hub.get_space("nowhere")
    assert "nowhere" in str(err.value) and err.value.exit_code != 0
    hub.create_space("empty")
    with pytest.raises(NotFound) as unit_err:
        hub.get_unit("empty", "ghost")
    assert "ghost" in str(unit_err.value)


def test_upload_makes_one_unit_per_file_and_an_unchanged_reupload_changes_nothing(hub):
    """The report's unit names are not compared: cub's answer to a first upload and to an
    unchanged re-upload names no units (CubHub reports the space, the hub holds the units)."""
    first = upload(hub, files())
    assert first.space == "app-base" and first.space_created
    assert {u.slug for u in hub.list_units("app-base")} == {"namespace", "web"}
    again = upload(hub, files())
    assert not again.changed and not again.space_created
    assert hub.get_unit("app-base", "web").head_revision == 1


def test_updates_make_revisions_and_restore_writes_an_old_one_back(hub):
    upload(hub, files())
    hub.update_unit("app-base", "web", dump_docs([{**DEPLOY, "spec": {"replicas": 5}}]), "five")
    assert hub.get_unit("app-base", "web").head_revision == 2
    assert [r.num for r in hub.history("app-base", "web")] == [1, 2]
    assert "replicas: 1" in hub.unit_data("app-base", "web", 1)
    restored = hub.restore("app-base", "web", 1)
    assert restored.head_revision == 3
    assert replicas_of(hub, "app-base") == 1


def test_a_variant_keeps_its_upstream_and_promote_brings_upstream_changes(hub, tmp_path):
    upload(hub, files())
    target = with_target(hub, tmp_path)
    space = hub.variant_create("dev", "app-base", target=target)
    assert space.slug == "app-dev" and space.release_target == target
    assert "app-dev" in hub.variants_of("app")
    clone, base = hub.get_unit("app-dev", "web"), hub.get_unit("app-base", "web")
    assert clone.upstream_unit_id == base.unit_id and clone.unit_id != base.unit_id
    assert clone.validation_errors == ("cluster/no-placeholders/vet-placeholders",)
    upload(hub, files(replicas=3))
    report = hub.variant_promote("app-dev")
    assert "web" in report.updated
    assert replicas_of(hub, "app-dev") == 3


def test_functions_change_what_they_select_and_say_what_changed(hub):
    upload(hub, files())
    result = hub.invoke("app-base", "set-replicas", ["4"], unit="web")
    assert result.changed == ("web",)
    assert replicas_of(hub, "app-base") == 4
    same = hub.invoke("app-base", "set-replicas", ["4"], where="Slug = 'web'")
    assert same.changed == ()


PROFILE = {
    "apiVersion": "x/v1",
    "kind": "PlatformProfile",
    "metadata": {"name": "p"},
    "spec": {"region": "eu-west-1"},
}
LINK = {
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


def test_one_link_per_unit_pair_resolves_the_value_and_is_deleted(hub):
    upload(hub, files())
    hub.variant_upload(
        "prof", "base", UploadSource("t", {"profile.yaml": dump_docs([PROFILE]).encode()})
    )
    first = hub.set_link("app-base", "web", "prof-base", "profile", LINK)
    again = hub.set_link("app-base", "web", "prof-base", "profile", LINK)
    assert first.link_id == again.link_id
    assert [lk.slug for lk in hub.list_links("app-base")] == [first.slug]
    assert hub.resolve("app-base", "web") is True
    assert hub.resolve("app-base", "web") is False  # nothing left to write
    assert "eu-west-1" in hub.unit_data("app-base", "web")
    assert not hub.get_unit("app-base", "web").placeholders
    hub.delete_link("app-base", first.slug)
    assert hub.list_links("app-base") == []


def test_publish_is_gated_then_released_then_has_no_changes(hub, tmp_path):
    upload(hub, files())
    target = with_target(hub, tmp_path)
    hub.variant_create("dev", "app-base", target=target)
    assert hub.get_target(target).ref == target
    with pytest.raises(GateBlocked) as blocked:
        hub.publish("app-dev")
    assert blocked.value.exit_code == 3 and blocked.value.units == ["web"]
    hub.invoke("app-dev", "set-env-var", ["web", "REGION", "us-west-2"], unit="web")
    release = hub.publish("app-dev")
    assert release.release_num == 1
    assert [r.release_num for r in hub.list_releases("app-dev")] == [1]
    with pytest.raises(NoChanges):
        hub.publish("app-dev")


def test_deleting_a_space_with_contents_needs_recursive(hub, request):
    """A refusal is exit 3 (contract): the space is left as it was."""
    if hub.name == "cub":
        # Known difference: CubHub does not recognise cub's "not empty" failure and reports it
        # as the hub being unavailable (exit 4). Strict: this fails loudly once it is fixed.
        request.applymarker(pytest.mark.xfail(strict=True, reason="cub: not-empty is exit 4"))
    upload(hub, files())
    with pytest.raises(HubError) as refused:
        hub.delete_space("app-base")
    assert refused.value.exit_code == 3
    assert hub.space_exists("app-base")
    hub.delete_space("app-base", recursive=True)
    assert hub.space_exists("app-base") is False
