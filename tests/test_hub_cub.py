"""CubHub against replayed cub outputs (tests/fixtures/cub/README.md says where they come from).

The replay is strict: CubHub must make exactly the recorded calls, in order, with the recorded
JSON bodies; anything else fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eksinf import deploy
from eksinf.hub.cub import CubHub, CubResult
from eksinf.hub.protocol import (
    GateBlocked,
    HubError,
    NoChanges,
    ReferencedElsewhere,
    Unavailable,
    UploadSource,
)

FIXTURES = Path(__file__).parent / "fixtures" / "cub"


class Replay:
    def __init__(self, scenario: str) -> None:
        self.calls = json.loads((FIXTURES / f"{scenario}.json").read_text())["calls"]
        self.index = 0

    def __call__(self, args: list[str], stdin: str | None) -> CubResult:
        assert self.index < len(self.calls), f"unexpected extra call: cub {args}"
        want = self.calls[self.index]
        self.index += 1
        assert args == want["args"], f"call {self.index}: cub {args} != recorded {want['args']}"
        if "stdin_json" in want:
            assert stdin is not None and json.loads(stdin) == want["stdin_json"]
        return CubResult(want["code"], want["stdout"], want["stderr"])

    def done(self) -> None:
        assert self.index == len(self.calls), f"only {self.index}/{len(self.calls)} calls made"


def hub_for(scenario: str) -> tuple[CubHub, Replay]:
    replay = Replay(scenario)
    return CubHub(runner=replay), replay


def test_absence_only_on_a_recognised_not_found():
    hub, replay = hub_for("absence")
    assert hub.space_exists("karpenter-dev") is False
    assert hub.space_exists("karpenter-base") is True
    with pytest.raises(Unavailable) as err:
        hub.space_exists("aws-network-dev")
    assert err.value.exit_code == 4 and "HTTP 503" in str(err.value)
    replay.done()


def test_unit_envelope_reads_unit_id_by_path_and_old_field_names():
    hub, replay = hub_for("unit-envelope")
    unit = hub.get_unit("karpenter-dev", "nodeclasses")
    assert unit.unit_id == "u-variant"  # not UpstreamUnit.UnitID
    assert unit.validation_errors == ("c1/no-placeholders/vet-placeholders",)
    assert unit.last_released_revision == 2 and unit.data_hash == "abc"
    assert unit.target == "c1/target"
    replay.done()


def test_publish_gate_maps_to_gate_blocked_naming_gate_and_units():
    hub, replay = hub_for("publish-gated")
    with pytest.raises(GateBlocked) as err:
        hub.publish("karpenter-dev")
    assert err.value.exit_code == 3
    assert err.value.gates == ["c1/no-placeholders/vet-placeholders"]
    assert err.value.units == ["karpenter-controller"]
    replay.done()


def test_unchanged_publish_is_no_changes():
    hub, replay = hub_for("publish-unchanged")
    assert hub.publish("karpenter-dev").release_num == 4
    with pytest.raises(NoChanges):
        hub.publish("karpenter-dev")
    replay.done()


def test_release_publish_treats_unchanged_as_current():
    hub, replay = hub_for("publish-unchanged")
    assert deploy.publish(hub, "karpenter-dev")[0] == "published"
    assert deploy.publish(hub, "karpenter-dev")[0] == "current"
    replay.done()


def test_referenced_space_delete_maps_to_referenced_elsewhere():
    hub, replay = hub_for("delete-referenced")
    with pytest.raises(ReferencedElsewhere) as err:
        hub.delete_space("c1", recursive=True)
    assert err.value.exit_code == 3 and "BridgeWorker" in str(err.value)
    replay.done()


def test_link_is_created_once_then_patched_with_a_json_body():
    hub, replay = hub_for("link-upsert")
    body = {
        "DownstreamPaths": [
            {
                "DataType": "string",
                "Evaluator": "template",
                "Expression": "{{.Params.nodeRoleName}}",
                "Parameters": ["nodeRoleName"],
                "Path": "spec.role",
                "Resource": {
                    "ResourceName": "/general",
                    "ResourceType": "karpenter.k8s.aws/v1/EC2NodeClass",
                },
            }
        ],
        "DownstreamSetters": [],
        "UpstreamPaths": [
            {
                "Name": "nodeRoleName",
                "Path": "spec.nodeRoleName",
                "Resource": {
                    "ResourceName": "/inference-demo",
                    "ResourceType": "eks-inference.eksinf.dev/v1/PlatformProfile",
                },
            }
        ],
    }
    first = hub.set_link("karpenter-dev", "nodeclasses", "platform-profile-dev", "profile", body)
    second = hub.set_link("karpenter-dev", "nodeclasses", "platform-profile-dev", "profile", body)
    assert first.slug == second.slug == "nodeclasses-profile-3f2a"
    assert first.to_space == "platform-profile-dev"
    replay.done()


def test_reupload_reports_counts_revert_hint_and_granularity_mismatch():
    hub, replay = hub_for("upload")
    source = UploadSource("oci://127.0.0.1:5000/eks-inference/karpenter", {})
    labels = {"managed-by": "eks-inference"}
    report = hub.variant_upload("karpenter", "base", source, labels=labels)
    assert (len(report.created), len(report.updated), len(report.emptied)) == (1, 2, 0)
    assert report.revert_hint.startswith("cub unit update --patch --space karpenter-base --restore")
    same = hub.variant_upload("karpenter", "base", source, labels=labels)
    assert not same.changed
    with pytest.raises(HubError) as err:
        hub.variant_upload("karpenter", "base", source, labels=labels)
    assert err.value.exit_code == 3 and "--granularity minimal" in str(err.value)
    replay.done()


def test_not_logged_in_is_unavailable_with_the_login_hint():
    hub, replay = hub_for("not-logged-in")
    with pytest.raises(Unavailable) as err:
        hub.list_spaces()
    assert err.value.exit_code == 4 and "cub auth login" in err.value.hint
    replay.done()


def test_variants_are_found_by_component_label_not_name_prefix():
    hub, replay = hub_for("variants")
    assert hub.variants_of("karpenter") == ["karpenter-dev"]
    replay.done()


def test_missing_cub_binary_is_an_environment_error(eksinf, stack_dir, monkeypatch):
    monkeypatch.setenv("PATH", str(stack_dir))
    result = eksinf("hub", "spaces", "--hub", "cub", cwd=stack_dir)
    assert result.code == 4 and "cub is not installed" in result.err


def test_config_file_selects_the_backend(eksinf, stack_dir, monkeypatch):
    (stack_dir / ".eksinf").mkdir()
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    monkeypatch.setenv("PATH", str(stack_dir))
    assert eksinf("hub", "spaces", cwd=stack_dir).code == 4
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: nope\n")
    bad = eksinf("hub", "spaces", cwd=stack_dir)
    assert bad.code == 2 and "unknown hub backend 'nope'" in bad.err
    (stack_dir / ".eksinf" / "config.yaml").write_text("hubb: local\n")
    typo = eksinf("hub", "spaces", cwd=stack_dir)
    assert typo.code == 3 and "unknown key(s) hubb" in typo.err
