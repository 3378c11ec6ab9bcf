"""Values and units are read as Helm and Kubernetes read them.

Kubernetes and Helm read YAML through sigs.k8s.io/yaml (go-yaml v2's scalar table): `y`, `n`,
`on`, `off` are booleans, `0755` is octal, `1e3` is a number, `1:30` is text. eksinf reads
machine-written YAML the same way, refuses in hand-written units and the profile a plain scalar
that YAML readers disagree on, and never writes a string plainly that a reader would take for
something else. Refusals leave the stack, a decoy folder and the cache byte-identical.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.core import kubeyaml
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs, load_source
from eksinf.errors import CONTRACT, EksinfError

PROFILE = "render/platform-profile/profile.yaml"


@pytest.fixture(autouse=True)
def _mirror(chart_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))


@pytest.fixture
def watched(stack_dir: Path, tmp_path: Path) -> list[Path]:
    """The stack and a decoy folder beside it (a refused render may still have cached the parse
    of other, valid inputs: derived data, so the cache is watched only where nothing is parsed
    before the refusal)."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.yaml").write_text("create: n\n")
    return [tmp_path]


# plain scalar -> what kubectl and helm read (checked against helm template in test_helm.py)
KUBE = {
    "y": True,
    "n": False,
    "on": True,
    "Off": False,
    "0755": 493,
    "1e3": 1000.0,
    "0o17": 15,
    "0b101": 5,
    "1_000": 1000,
    "1:30": "1:30",
    "2024-01-01": "2024-01-01",
    "0x10": 16,
    "08": 8.0,
    "1e400": "1e400",
    "1_a": "1_a",  # not a number: the underscore stays
    "text": "text",
}


def test_machine_yaml_is_read_as_kubernetes_reads_it():
    text = "".join(f"k{i}: {plain}\n" for i, plain in enumerate(KUBE))
    (doc,) = load_docs(text)
    assert list(doc.values()) == list(KUBE.values())
    assert [type(v) for v in doc.values()] == [type(v) for v in KUBE.values()]


def test_text_that_only_starts_like_a_number_is_no_ambiguity():
    for plain in ("1_a", "-A-Za-z0-9_.", "0_x"):
        assert kubeyaml.kube_scalar(plain) == plain
        assert kubeyaml.ambiguity(plain) is None


def test_the_writer_quotes_every_string_another_reader_would_not_read_as_text():
    strings = [*KUBE, "yes", "NO", "1.5e3", "true", "~", "", "plain"]
    text = dump_docs([{s: s for s in strings}])
    for line in text.splitlines()[1:]:
        key, _, value = line.partition(": ")
        # quoted on both sides unless every reader reads the plain form back as the text
        for part in (key, value):
            if not part.startswith(("'", '"')):
                assert kubeyaml.plain_is_text(part) and kubeyaml.yaml11_scalar(part) == part
    assert "\n'y': 'y'\n" in text and "\nplain: plain\n" in text
    assert load_docs(text) == [{s: s for s in strings}]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("on: 1\ntrue: 2\n", 'x.yaml:2:1: duplicate key "true"'),
        ("a:\n  0x10: a\n  16: b\n", "x.yaml:3:3: duplicate key \"16\" (both are the key '16')"),
        ("a:\n  y: 1\n  Yes: 2\n", "x.yaml:3:3: duplicate key \"Yes\" (both are the key 'true')"),
        ("'16': a\n0x10: b\n", "x.yaml:2:1: duplicate key \"0x10\" (both are the key '16')"),
    ],
    ids=["on-true", "hex", "y-yes", "quoted-number"],
)
def test_keys_equal_to_kubernetes_are_duplicates(text, where):
    with pytest.raises(EksinfError) as err:
        load_source(Path("x.yaml"), text)
    assert err.value.exit_code == CONTRACT
    assert where in err.value.message


def test_a_plain_y_in_the_profile_is_refused_naming_file_line_and_field(
    stack_dir, eksinf, tmp_path, watched
):
    path = stack_dir / PROFILE
    text = path.read_text()
    assert "  modelId: Qwen/Qwen2.5-7B-Instruct-AWQ\n" in text
    path.write_text(text.replace("modelId: Qwen/Qwen2.5-7B-Instruct-AWQ", "modelId: y"))
    line = path.read_text().splitlines().index("  modelId: y") + 1
    watched = [*watched, Path(os.environ["EKSINF_CACHE_DIR"])]
    before = fingerprint(*watched)
    out = tmp_path / "out"
    result = eksinf("links", "resolve", "--profile", PROFILE, "--out", str(out), cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert f"{PROFILE}:{line}:12: spec.modelId: plain `y` means different things" in result.err
    assert 'Kubernetes and Helm read true, YAML 1.2 readers "y"' in result.err
    assert 'Quote it to mean the text ("y")' in result.err
    assert fingerprint(*watched) == before
    assert not out.exists()


def test_a_quoted_profile_y_is_published_quoted(stack_dir, eksinf, tmp_path):
    """Before, the link engine wrote "y" plain, and Kubernetes reads a plain y as true."""
    path = stack_dir / PROFILE
    text = path.read_text()
    path.write_text(text.replace("  clusterName: inference-demo\n", '  clusterName: "y"\n', 1))
    out = tmp_path / "out"
    result = eksinf("links", "resolve", "--profile", PROFILE, "--out", str(out), cwd=stack_dir)
    assert result.code == 0, result.err
    cluster = (out / "eks-cluster" / "cluster.yaml").read_text()
    assert "\n  name: 'y'\n" in cluster
    (doc,) = load_docs(cluster)  # read as Kubernetes reads it
    assert doc["spec"]["name"] == "y"


@pytest.mark.parametrize(
    ("plain", "how"),
    [
        ("0755", "Kubernetes and Helm read 493, YAML 1.2 readers 755"),
        ("1e3", 'Kubernetes and Helm read 1000.0, YAML 1.1 readers "1e3"'),
        ("1:30", 'Kubernetes and Helm read "1:30", YAML 1.1 readers 90'),
        ("off", 'Kubernetes and Helm read false, YAML 1.2 readers "off"'),
    ],
)
def test_render_refuses_an_ambiguous_scalar_in_a_handwritten_unit(
    stack_dir, eksinf, watched, plain, how
):
    unit = stack_dir / "render" / "aws-network" / "odd.yaml"
    unit.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\n  namespace: default\n"
        f"data:\n  list:\n    - ok\n    - {plain}\n"
    )
    before = fingerprint(*watched)
    result = eksinf("render", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert f"render/aws-network/odd.yaml:9:7: data.list[1]: plain `{plain}`" in result.err
    assert how in result.err
    assert fingerprint(*watched) == before


def test_render_refuses_an_ambiguous_key_in_a_handwritten_unit(stack_dir, eksinf, watched):
    unit = stack_dir / "render" / "aws-network" / "odd.yaml"
    unit.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\ndata:\n  on: x\n")
    before = fingerprint(*watched)
    result = eksinf("render", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "render/aws-network/odd.yaml:6:3: data.on (the key): plain `on`" in result.err
    assert fingerprint(*watched) == before


def test_values_files_may_use_helm_readings_but_not_keys_helm_merges(stack_dir, eksinf, watched):
    """A values file is read by Helm itself (test_helm.py), so `create: n` is allowed there
    and means false; two keys Helm would fold into one are refused."""
    values = sorted((stack_dir / "render").glob("*/values/*.yaml"))[0]
    values.write_text(values.read_text() + "\neksinfProbe:\n  on: 1\n  'true': 2\n")
    before = fingerprint(*watched)
    result = eksinf("render", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "duplicate key \"true\" (both are the key 'true')" in result.err
    assert str(values.relative_to(stack_dir)) in result.err
    assert fingerprint(*watched) == before


# ---- names are checked whole and in ASCII ------------------------------------------------------

NAME_CASES = {
    # field, old line, new line, the refusal
    "cluster-newline": (
        "  clusterName: inference-demo\n",
        '  clusterName: "inference-demo\\n"\n',
        "spec.clusterName: 'inference-demo\\n' is not a valid EKS cluster name",
    ),
    "network-cyrillic": (  # the і is U+0456, a letter to Python's \\w
        "  networkName: inference-demo-net\n",
        "  networkName: іnference-demo-net\n",
        "spec.networkName: 'іnference-demo-net' is not a valid tag value",
    ),
    "model-cyrillic": (
        "  modelId: Qwen/Qwen2.5-7B-Instruct-AWQ\n",
        "  modelId: Qwen/Qwen2.5-7B-Іnstruct-AWQ\n",
        "spec.modelId: 'Qwen/Qwen2.5-7B-Іnstruct-AWQ' is not a Hugging Face model id",
    ),
    "role-accented": (
        "  nodeRoleName: inference-demo-node-role\n",
        "  nodeRoleName: inference-démo-node-role\n",
        "spec.nodeRoleName: 'inference-démo-node-role' is not a valid IAM role name",
    ),
    "role-newline": (
        "  karpenterRoleName: inference-demo-karpenter-controller\n",
        '  karpenterRoleName: "inference-demo-karpenter-controller\\n"\n',
        "spec.karpenterRoleName: 'inference-demo-karpenter-controller\\n' is not a valid IAM",
    ),
    "addon-version-newline": (  # a JSON Schema pattern: `$` must be the end of the string
        "    eks-pod-identity-agent: v1.3.10-eksbuild.2\n",
        '    eks-pod-identity-agent: "v1.3.10-eksbuild.2\\n"\n',
        "spec.addonVersions.eks-pod-identity-agent: 'v1.3.10-eksbuild.2\\n' does not match",
    ),
}


@pytest.mark.parametrize("case", sorted(NAME_CASES))
def test_profile_names_are_checked_whole_and_in_ascii(stack_dir, eksinf, watched, case):
    old, new, refusal = NAME_CASES[case]
    path = stack_dir / PROFILE
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    before = fingerprint(*watched)
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert f"{PROFILE}: {refusal}" in result.out  # a lint finding
    assert fingerprint(*watched) == before


def test_a_component_name_with_a_trailing_newline_is_refused(stack_dir, eksinf, watched):
    path = stack_dir / "components.yaml"
    text = path.read_text()
    assert "  - name: karpenter\n" in text
    path.write_text(text.replace("  - name: karpenter\n", '  - name: "karpenter\\n"\n', 1))
    before = fingerprint(*watched)
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "components.yaml: components[6].name: 'karpenter\\n' does not match" in result.err
    assert fingerprint(*watched) == before


def test_kubernetes_names_are_checked_whole_and_in_ascii():
    from eksinf.build.validate import meta

    assert meta.dns1123_label("chat") is None
    assert meta.dns1123_label("chat\n") is not None
    assert meta.dns1123_subdomain("chat.example\n") is not None
    assert meta.dns1123_label("сhat") is not None  # Cyrillic с
    assert meta.dns1035_label("chat\n") is not None


# ---- unknown tags and documents that are not mappings, at every entry --------------------------

BAD_DOCS = {
    "binary-tag": ("  k: !!binary aGk=\n", "unknown YAML tag 'tag:yaml.org,2002:binary'"),
    "custom-tag": ("  k: !vault secret/x\n", "unknown YAML tag '!vault'"),
    "list-document": ("---\n- a\n- b\n", "is a list, not a mapping"),
}
ODD_UNIT = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\n  namespace: default\ndata:\n"


def hub_content(stack: Path) -> list[str]:
    import sqlite3

    db = stack / ".eksinf" / "hub.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


@pytest.mark.parametrize("case", sorted(BAD_DOCS))
def test_unknown_tags_and_non_mappings_are_refused_at_every_entry(
    stack_dir, eksinf, tmp_path, watched, case
):
    bad, refusal = BAD_DOCS[case]
    text = ODD_UNIT + ("  k: v\n" + bad if bad.startswith("---") else bad)
    assert eksinf("install", cwd=stack_dir).code == 0
    hub_before = hub_content(stack_dir)

    # render: a hand-written unit
    (stack_dir / "render" / "aws-network" / "odd.yaml").write_text(text)
    before = fingerprint(*watched)
    result = eksinf("render", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "render/aws-network/odd.yaml:" in result.err and refusal in result.err
    assert fingerprint(*watched) == before
    (stack_dir / "render" / "aws-network" / "odd.yaml").unlink()

    # bundle, install: a committed unit; hub upload: a folder of units
    (stack_dir / "configs" / "aws-network" / "odd.yaml").write_text(text)
    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "odd.yaml").write_text(text)

    # the hub is compared by content: an open connection's empty -wal/-shm are SQLite's own
    def state() -> dict[str, str]:
        return {k: v for k, v in fingerprint(*watched).items() if "/.eksinf/hub.db-" not in k}

    before = state()
    for args, where in (
        (("bundle",), "configs/aws-network/odd.yaml:"),
        (("install",), "configs/aws-network/odd.yaml:"),
        (("hub", "upload", "aws-network", str(upload)), "odd.yaml:"),
    ):
        result = eksinf(*args, cwd=stack_dir)
        assert result.code == CONTRACT, (args, result.err)
        assert where in result.err and refusal in result.err, (args, result.err)
        assert "Traceback" not in result.err
    assert state() == before
    assert hub_content(stack_dir) == hub_before


def test_units_from_configs_and_uploads_refuse_keys_kubernetes_would_merge(
    stack_dir, eksinf, tmp_path
):
    """configs/ and `hub upload` folders are read by the fast reader; a unit written by hand
    there gets the same duplicate-key rule as render/ (the last key silently won before)."""
    unit = stack_dir / "configs" / "aws-network" / "odd.yaml"
    unit.write_text(ODD_UNIT + "  on: a\n  'true': b\n")
    result = eksinf("bundle", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert (
        "configs/aws-network/odd.yaml:8:3: duplicate key 'true' (the key 'true', first "
        "defined at configs/aws-network/odd.yaml:7:3)" in result.err
    )
    assert not (stack_dir / "bundles").exists()


def test_schema_patterns_are_read_as_go_and_ecma_read_them():
    """One reading of a `pattern` for eksinf's JSON Schemas and the CRD schemas validate
    checks: `$` ends the string and `\\d` is an ASCII digit, as in the API server's Go regexp."""
    from eksinf.model.names import schema_pattern
    from eksinf.model.schema import Schema

    assert schema_pattern("^[a-z]+$").search("abc")
    assert schema_pattern("^[a-z]+$").search("abc\n") is None
    assert schema_pattern(r"^\d+$").search("١٢") is None  # Arabic-Indic digits
    assert schema_pattern("^oci://").search("oci://x")
    schema = Schema({"type": "string", "pattern": "^[a-z]+$"}, "test")
    assert schema.first_error("abc") is None
    assert schema.first_error("abc\n") is not None
    assert Schema({"pattern": "^oci://"}, "test").first_error("oci://é") is not None
