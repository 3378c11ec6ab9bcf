"""CubHub against a fake `cub` executable on PATH (tests/fakecub.py).

The fake answers in cub's real shapes: the Go structs of confighub/sdk's `goclient-new`
(`ExtendedSpace`, `ExtendedUnit`, `ExtendedTarget`, ...) and the text cub prints, each taken from
the source file named in tests/fixtures/cub/README.md. Before answering it checks every command
line against cub's command table (tests/fixtures/cub/commands.json, read from cub's source), so a
subcommand or flag cub does not have fails here. Scenario replays are strict: CubHub must make
exactly the recorded calls, in order, with the recorded JSON bodies.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakecub import FIXTURES, TABLE, CubFailure, FakeCub, parse

from eksinf.errors import EksinfError
from eksinf.flows import deploy
from eksinf.hub.cub import MIN_VERSION, CubHub, parse_version
from eksinf.hub.protocol import (
    GateBlocked,
    HubError,
    NoChanges,
    ReferencedElsewhere,
    Unavailable,
    UploadSource,
)
from eksinf.model.names import OWNER


@pytest.fixture
def cub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCub]:
    fake = FakeCub(tmp_path, monkeypatch)
    yield fake
    fake.close()


def hub_for(cub: FakeCub, scenario: str, root: Path) -> CubHub:
    cub.replay(scenario, root)
    return CubHub(root)


def test_absence_only_on_a_recognised_not_found(cub, tmp_path):
    hub = hub_for(cub, "absence", tmp_path)
    assert hub.space_exists("karpenter-dev") is False
    assert hub.space_exists("karpenter-base") is True
    with pytest.raises(Unavailable) as err:
        hub.space_exists("aws-network-dev")
    assert err.value.exit_code == 4 and "HTTP 503" in str(err.value)
    cub.done()


def test_unit_envelope_reads_unit_id_by_path_and_old_field_names(cub, tmp_path):
    hub = hub_for(cub, "unit-envelope", tmp_path)
    unit = hub.get_unit("karpenter-dev", "nodeclasses")
    assert unit.unit_id == "u-variant"  # not UpstreamUnit.UnitID
    assert unit.validation_errors == ("c1/no-placeholders/vet-placeholders",)
    assert unit.last_released_revision == 2 and unit.data_hash == "abc"
    assert unit.target == "c1/target"
    cub.done()


def test_release_target_is_read_from_release_target_id(cub, tmp_path):
    """`cub space get` names the release target by `Space.ReleaseTargetID` only (a UUID); the
    `<space>/<target>` deploy compares against comes from `cub target list` (Target.SpaceSlug,
    cmd/cub/target_list.go)."""
    hub = hub_for(cub, "release-target", tmp_path)
    assert hub.get_space("karpenter-dev").release_target == "c1/target"
    cub.done()


def test_revision_content_comes_from_cub_revision_data(cub, tmp_path):
    """cmd/cub/revision_data.go: `cub revision data <unit> <revision-num>`; `cub unit data` has
    no --revision flag."""
    hub = hub_for(cub, "revision-data", tmp_path)
    assert "name: general\n" in hub.unit_data("karpenter-dev", "nodepools", 2)
    assert "general-v3" in hub.unit_data("karpenter-dev", "nodepools")
    cub.done()


def test_publish_gate_maps_to_gate_blocked_naming_gate_and_units(cub, tmp_path):
    hub = hub_for(cub, "publish-gated", tmp_path)
    with pytest.raises(GateBlocked) as err:
        hub.publish("karpenter-dev")
    assert err.value.exit_code == 3
    assert err.value.gates == ["c1/no-placeholders/vet-placeholders"]
    assert err.value.units == ["karpenter-controller"]
    cub.done()


def test_publish_reads_the_bare_release_and_reports_no_unit_count(cub, tmp_path):
    """cmd/cub/release_publish.go prints the created Release (not an envelope); cub's Release
    has no unit count, so none is claimed."""
    hub = hub_for(cub, "publish-unchanged", tmp_path)
    release = hub.publish("karpenter-dev")
    assert (release.release_num, release.digest, release.unit_count) == (4, "sha256:aa", None)
    with pytest.raises(NoChanges):
        hub.publish("karpenter-dev")
    cub.done()


def test_release_list_leaves_out_withdrawn_releases(cub, tmp_path):
    """`cub release withdraw` keeps the record with `Published: false`: not listed."""
    hub = hub_for(cub, "release-withdrawn", tmp_path)
    assert [r.release_num for r in hub.list_releases("karpenter-dev")] == [1, 3]
    cub.done()


def test_release_publish_treats_unchanged_as_current(cub, tmp_path):
    hub = hub_for(cub, "publish-unchanged", tmp_path)
    assert deploy.publish(hub, "karpenter-dev")[0] == "published"
    assert deploy.publish(hub, "karpenter-dev")[0] == "current"
    cub.done()


def test_referenced_space_delete_maps_to_referenced_elsewhere(cub, tmp_path):
    hub = hub_for(cub, "delete-referenced", tmp_path)
    with pytest.raises(ReferencedElsewhere) as err:
        hub.delete_space("c1", recursive=True)
    assert err.value.exit_code == 3 and "BridgeWorker" in str(err.value)
    cub.done()


def test_link_is_created_once_then_patched_with_a_json_body(cub, tmp_path):
    hub = hub_for(cub, "link-upsert", tmp_path)
    body = json.loads((FIXTURES / "link-upsert.json").read_text())["calls"][1]["stdin_json"]
    first = hub.set_link("karpenter-dev", "nodeclasses", "platform-profile-dev", "profile", body)
    second = hub.set_link("karpenter-dev", "nodeclasses", "platform-profile-dev", "profile", body)
    assert first.slug == second.slug == "nodeclasses-profile-3f2a"
    assert first.to_space == "platform-profile-dev"
    cub.done()


SOURCE = UploadSource(
    "127.0.0.1:5000/eks-inference/karpenter",
    {"nodeclasses.yaml": b"kind: EC2NodeClass\n", "nodepools.yaml": b"kind: NodePool\n"},
    "sha256:feed",
)


def test_reupload_labels_the_space_and_reports_counts_missing_and_revert(cub, tmp_path):
    """Flags from cmd/cub/variant_upload.go: `--label` is a deprecated alias of --unit-label
    (it labels units), so the space label goes in --space-label; the fixed
    --source-description is the units' external-source identity."""
    hub = hub_for(cub, "upload", tmp_path)
    labels = {"managed-by": "eks-inference"}
    report = hub.variant_upload("karpenter", "base", SOURCE, labels=labels)
    assert (len(report.created), len(report.updated), len(report.emptied)) == (1, 2, 0)
    assert report.missing == ("old-crds",)
    assert report.revert_hint.startswith("cub unit update --patch --space karpenter-base --restore")
    staged = tmp_path / ".eksinf" / "cub-upload" / "karpenter-base"
    assert sorted(p.name for p in staged.glob("*.yaml")) == ["nodeclasses.yaml", "nodepools.yaml"]
    same = hub.variant_upload("karpenter", "base", SOURCE, labels=labels)
    assert not same.changed
    with pytest.raises(HubError) as err:
        hub.variant_upload("karpenter", "base", SOURCE, labels=labels)
    assert err.value.exit_code == 3 and "--granularity minimal" in str(err.value)
    cub.done()
    assert sum(1 for c in cub.calls() if c == ["version"]) == 1  # checked once per hub


def test_a_staging_folder_eksinf_did_not_write_is_never_replaced(cub, tmp_path):
    hub = CubHub(tmp_path)
    mine = tmp_path / ".eksinf" / "cub-upload" / "karpenter-base"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(EksinfError) as err:
        hub._stage("karpenter-base", SOURCE)
    assert err.value.exit_code == 2 and "notes.txt" in err.value.message
    assert (mine / "notes.txt").read_text() == "mine" and cub.calls() == []


def test_cub_older_than_the_floor_is_refused_before_the_reupload(cub, tmp_path):
    hub = hub_for(cub, "old-cub", tmp_path)
    with pytest.raises(Unavailable) as err:
        hub.variant_upload("karpenter", "base", UploadSource("configs/karpenter", {}))
    assert err.value.exit_code == 4
    assert "v0.2.13" in err.value.message and "v0.2.14" in err.value.message
    assert "Upgrade" in err.value.hint and "--recreate" in err.value.hint
    cub.done()  # nothing was uploaded


def test_a_dev_build_of_cub_is_let_through(cub, tmp_path):
    hub = hub_for(cub, "dev-cub", tmp_path)
    assert not hub.variant_upload("karpenter", "base", UploadSource("x", {})).changed
    cub.done()


def test_cub_version_output_parses_both_layouts():
    """cmd/cub/version.go prints the release tag on `Commit:` under `Client Version:`; newer
    builds add `Version: vX.Y.Z` (recorded in confighub/eks-inference cmd/install_test.go)."""
    assert parse_version("Client Version:\n  Version:    v0.2.14\n  Commit: 4784110\n") == (
        0,
        2,
        14,
    )
    assert parse_version("Client Version:\n  Commit:     v0.3.1\n  Build Date: x\n") == (0, 3, 1)
    assert parse_version("Client Version:\n  Version:    dev\n  Commit:     unknown\n") is None
    server_only = "Client Version:\n  Commit: unknown\nServer Version:\n  Commit: v9.9.9\n"
    assert parse_version(server_only) is None
    assert MIN_VERSION == (0, 2, 14)


def test_dry_run_reports_what_cub_would_create_update_and_empty(cub, tmp_path):
    """The `--dry-run` report format of cmd/cub/variant_upload_reconcile.go
    (reportUploadDryRun)."""
    hub = hub_for(cub, "dry-run", tmp_path)
    report = hub.variant_upload("karpenter", "base", SOURCE, dry_run=True)
    assert report.created == ("karpenter-crds",)
    assert report.updated == ("nodeclasses", "nodepools")
    assert report.emptied == ("old-crds",) and not report.space_created
    first = hub.variant_upload("karpenter", "dev", SOURCE, dry_run=True)
    assert first.space_created and first.created == ("nodeclasses", "nodepools")
    cub.done()


def test_not_logged_in_is_unavailable_with_the_login_hint(cub, tmp_path):
    hub = hub_for(cub, "not-logged-in", tmp_path)
    with pytest.raises(Unavailable) as err:
        hub.list_spaces()
    assert err.value.exit_code == 4 and "cub auth login" in err.value.hint
    cub.done()


def test_variants_are_found_by_component_label_not_name_prefix(cub, tmp_path):
    hub = hub_for(cub, "variants", tmp_path)
    assert hub.variants_of("karpenter") == ["karpenter-dev"]
    cub.done()


# ---- cub's command table ------------------------------------------------------------------------


def scenario_calls() -> list[list[str]]:
    return [
        [a.replace("$ROOT", "/stack") for a in call["args"]]
        for path in sorted(FIXTURES.glob("*.json"))
        if path.name not in ("commands.json", "go-original-calls.json")
        for call in json.loads(path.read_text())["calls"]
    ]


def test_every_recorded_call_uses_only_commands_and_flags_cub_has():
    calls = scenario_calls()
    assert len(calls) > 30
    for call in calls:
        parse(call)  # CubFailure names the unknown command or flag


@pytest.mark.parametrize(
    "argv, problem",
    [
        (
            ["unit", "data", "nodepools", "--space", "s", "--revision", "2"],
            "unknown flag: --revision",
        ),
        (
            ["variant", "upload", "--component", "c", "--variant", "v", "--labels", "a=b", "d"],
            "--labels",
        ),
        (["space", "frobnicate", "s"], "unknown command"),
        (["revision", "data", "--space", "s", "nodepools"], "wrong number of arguments"),
        (["space", "get", "s", "-o"], "needs an argument"),
    ],
)
def test_the_table_refuses_what_cub_does_not_have(argv, problem):
    with pytest.raises(CubFailure, match=problem):
        parse(argv)


def test_the_table_names_its_source_for_every_command():
    for name, spec in TABLE["commands"].items():
        assert spec["sources"], name
        assert all("@" in s for s in spec["sources"]), name


# ---- the CLI ------------------------------------------------------------------------------------


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


def test_owner_label_is_one_value_for_bases_and_enrolled_spaces(cub, stack_dir):
    """The enrolled cluster space (enroll's hub half), its apps space and the bases all carry
    the one Owner value, model.names.OWNER."""
    from eksinf.flows.enroll import hub_target
    from eksinf.model.stack import load_stack
    from eksinf.model.targets import KINDS

    cub.simulate()
    (stack_dir / ".eksinf").mkdir()
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    assert hub_target(stack_dir, "c1", "", KINDS["eks"]) == "c1/target"
    hub = CubHub(stack_dir)
    hub.variant_upload(
        "karpenter", "base", deploy.source_for("karpenter", None, load_stack(stack_dir))
    )
    owners = {s.slug: s.labels.get("Owner") for s in hub.list_spaces()}
    assert owners == {"c1": OWNER, "c1-argo-apps": OWNER, "karpenter-base": OWNER}


def test_the_generator_reads_commands_flags_helpers_and_persistent_flags(tmp_path):
    """gen_commands.py on a miniature of cub's layout (cobra declarations, helpers, init)."""
    sys.path.insert(0, str(FIXTURES))
    import gen_commands

    (tmp_path / "main.go").write_text(
        "func enableQuietFlag(cmd *cobra.Command) {\n"
        '\tcmd.Flags().BoolVar(&quiet, "quiet", false, "")\n}\n'
        "func addStandardGetFlags(cmd *cobra.Command) {\n"
        "\tenableQuietFlag(cmd)\n"
        '\tcmd.Flags().StringVar(&selectFields, "select", "", "")\n}\n'
    )
    (tmp_path / "space.go").write_text(
        'var spaceCmd = &cobra.Command{\n\tUse:   "space",\n}\n'
        "func init() {\n"
        '\tspaceCmd.PersistentFlags().StringVar(&spaceFlag, "space", "", "")\n'
        "\trootCmd.AddCommand(spaceCmd)\n}\n"
        'var spaceGetCmd = &cobra.Command{\n\tUse:   "get <name or id>",\n'
        "\tArgs:  cobra.ExactArgs(1),\n}\n"
        "func init() {\n\taddStandardGetFlags(spaceGetCmd) // with a comment\n"
        '\tspaceGetCmd.Flags().StringVarP(&kind, "kind", "k", "", "")\n'
        "\tspaceCmd.AddCommand(spaceGetCmd)\n}\n"
    )
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(gen_commands, "COMMANDS", ("space get",))
    monkeypatch.setattr(gen_commands, "FROM_CALLS", ())
    monkeypatch.setattr(gen_commands, "CONSTRUCTED", {})
    try:
        table = gen_commands.generate(gen_commands.read_sources([f"{tmp_path}@0123456789ab"]))
    finally:
        monkeypatch.undo()
        sys.path.remove(str(FIXTURES))
    spec = table["commands"]["space get"]
    assert spec["args"] == [1, 1]
    assert spec["flags"] == {
        "--kind": "string",
        "--quiet": "bool",
        "--select": "string",
        "--space": "string",
        "-k": "string",
    }
    assert spec["sources"][0] == "cmd/cub/space.go@0123456789ab"


def test_enroll_records_the_target_kind_in_cub_labels(cub, stack_dir):
    """The cub hub stores the kind as the target space's label too, and a re-enroll with
    another kind updates it (`cub space update --patch --label`)."""
    from eksinf.flows.enroll import hub_target
    from eksinf.model.targets import KINDS, kind_of

    cub.simulate()
    (stack_dir / ".eksinf").mkdir()
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    hub_target(stack_dir, "c1", "", KINDS["eks"])
    assert kind_of(CubHub(stack_dir).get_space("c1").labels).name == "eks"
    hub_target(stack_dir, "c1", "", KINDS["eks-byo"])
    assert CubHub(stack_dir).get_space("c1").labels["TargetKind"] == "eks-byo"
