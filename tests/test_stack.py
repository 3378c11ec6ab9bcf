"""components.yaml and versions.env: every rule, with its message and exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eksinf.errors import CONTRACT, USAGE, EksinfError
from eksinf.model.stack import load_stack, parse_versions

COMPONENTS = """\
components:
  - name: profile
    plane: hub
    order: 0
    render: copy
  - name: network
    plane: mgmt
    order: 0
    render: copy
  - name: controllers
    plane: mgmt
    order: 1
    render: helm
    charts:
      - name: ctl
        chart: ctl-chart
        repo: oci://127.0.0.1:9/charts
        version: CTL_VERSION
        release: ctl
        namespace: ctl-system
  - name: apps
    plane: workload
    order: 0
    render: copy
"""
VERSIONS = "RENDER_KUBE_VERSION=1.31.0\nCTL_VERSION=1.2.3\n"


def make_stack(tmp_path: Path, components: str = COMPONENTS, versions: str = VERSIONS) -> Path:
    root = tmp_path / "stack"
    root.mkdir(exist_ok=True)
    (root / "components.yaml").write_text(components)
    (root / "versions.env").write_text(versions)
    return root


def load_error(root: Path) -> EksinfError:
    with pytest.raises(EksinfError) as err:
        load_stack(root)
    return err.value


def test_valid_stack_loads_in_apply_order(tmp_path):
    stack = load_stack(make_stack(tmp_path))
    assert [c.name for c in stack.components] == ["profile", "network", "controllers", "apps"]
    spec = stack.component("controllers").charts[0]
    assert spec.version == "1.2.3"
    assert spec.source == "oci://127.0.0.1:9/charts/ctl-chart"
    assert stack.kube_version == "1.31.0"


@pytest.mark.parametrize(
    ("components", "message"),
    [
        pytest.param(
            COMPONENTS.replace("order: 1\n", "order: [1\n"),
            "components.yaml:13:11: YAML syntax error: did not find expected ',' or ']'",
            id="malformed-yaml",
        ),
        pytest.param(
            COMPONENTS.replace("    plane: hub\n", "    plane: hub\n    plane: hub\n"),
            'components.yaml:4:5: duplicate key "plane", first defined at components.yaml:3:5',
            id="duplicate-key",
        ),
        pytest.param(
            COMPONENTS.replace("    order: 1\n", "\torder: 1\n"),
            "components.yaml:12:1: tab character in indentation",
            id="tab",
        ),
        pytest.param(
            COMPONENTS.replace("order: 1\n", 'order: "x"\n'),
            "components.yaml: components[2].order: 'x' is not of type 'integer'",
            id="wrong-type",
        ),
        pytest.param(
            COMPONENTS.replace("plane: hub", "plane: edge"),
            "components.yaml:2: component 'profile': unknown plane 'edge'",
            id="unknown-plane",
        ),
        pytest.param(
            COMPONENTS.replace("order: 1\n", "order: 0\n"),
            "components.yaml:10: components 'network' and 'controllers' both have order 0 "
            "in plane mgmt",
            id="duplicate-order",
        ),
        pytest.param(
            COMPONENTS.replace(
                "render: copy\n  - name: network", "render: kustomize\n  - name: network"
            ),
            "components.yaml:2: component 'profile': unknown renderer 'kustomize'",
            id="unknown-renderer",
        ),
        pytest.param(
            COMPONENTS.replace("plane: workload\n    order: 0", "plane: mgmt\n    order: 2"),
            "components.yaml: plane workload has no components",
            id="empty-workload-plane",
        ),
        pytest.param(
            COMPONENTS.replace("plane: mgmt\n    order: 0", "plane: hub\n    order: 1").replace(
                "plane: mgmt\n    order: 1", "plane: hub\n    order: 2"
            ),
            "components.yaml: plane mgmt has no components",
            id="empty-mgmt-plane",
        ),
        pytest.param(
            COMPONENTS.replace("version: CTL_VERSION", "version: NOPE_VERSION"),
            "components.yaml:10: component 'controllers' chart 'ctl' names version key "
            "NOPE_VERSION, which versions.env does not define",
            id="unknown-version-key",
        ),
        pytest.param(
            COMPONENTS.replace("  - name: apps\n", "  - name: network\n"),
            "component name 'network' is used twice",
            id="duplicate-name",
        ),
        pytest.param(
            COMPONENTS.replace("    render: helm\n", "    render: copy\n"),
            "component 'controllers' lists charts but uses the copy renderer",
            id="charts-with-copy",
        ),
        pytest.param(
            COMPONENTS + "    extra: 1\n",
            "components.yaml: components[3]: Additional properties are not allowed ('extra'",
            id="unknown-field",
        ),
    ],
)
def test_components_yaml_errors(tmp_path, eksinf, components, message):
    root = make_stack(tmp_path, components)
    error = load_error(root)
    assert error.exit_code == CONTRACT
    assert message in error.message
    result = eksinf("components", cwd=root)  # the CLI shows the same message, with exit 3
    assert result.code == CONTRACT
    assert f"eksinf: {error.message}" in result.err
    assert "hint:" in result.err


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        pytest.param(
            VERSIONS + "not a pair\n",
            "versions.env:3: malformed line 'not a pair'",
            id="malformed-line",
        ),
        pytest.param(
            VERSIONS + "CTL_VERSION=9\n",
            "versions.env:3: duplicate key CTL_VERSION (first set on line 2)",
            id="duplicate-key",
        ),
        pytest.param(
            "CTL_VERSION=1.2.3\n",
            "versions.env: missing key RENDER_KUBE_VERSION",
            id="missing-kube-version",
        ),
    ],
)
def test_versions_env_errors(tmp_path, eksinf, versions, message):
    root = make_stack(tmp_path, versions=versions)
    error = load_error(root)
    assert error.exit_code == CONTRACT
    assert message in error.message
    result = eksinf("components", cwd=root)
    assert result.code == CONTRACT
    assert message in result.err


def test_versions_env_is_not_evaluated_by_a_shell():
    values, lines = parse_versions(
        Path("versions.env"),
        "# comment\nexport A=$HOME\nB='$(whoami)'\nC=\"x y\"\nD=1.0 # trailing comment\nE=\n",
    )
    assert values == {"A": "$HOME", "B": "$(whoami)", "C": "x y", "D": "1.0", "E": ""}
    assert lines == {"A": 2, "B": 3, "C": 4, "D": 5, "E": 6}


def test_missing_versions_env(tmp_path):
    root = make_stack(tmp_path)
    (root / "versions.env").unlink()
    error = load_error(root)
    assert error.exit_code == CONTRACT
    assert "versions.env: missing" in error.message


def test_no_stack_here_is_a_usage_error(tmp_path, eksinf):
    result = eksinf("components", cwd=tmp_path)
    assert result.code == USAGE
    assert f"no components.yaml in {tmp_path.resolve()}" in result.err
    assert "--stack DIR" in result.err


def test_stack_option_points_at_another_directory(tmp_path, eksinf):
    root = make_stack(tmp_path)
    result = eksinf("--stack", str(root), "components", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    assert [r["name"] for r in json.loads(result.out)["components"]] == [
        "profile",
        "network",
        "controllers",
        "apps",
    ]


def test_components_filtered_by_plane_as_json(tmp_path, eksinf):
    root = make_stack(tmp_path)
    result = eksinf("components", "--plane", "mgmt", "--json", cwd=root)
    assert result.code == 0, result.err
    rows = json.loads(result.out)["components"]
    assert [(r["name"], r["plane"], r["order"]) for r in rows] == [
        ("network", "mgmt", 0),
        ("controllers", "mgmt", 1),
    ]
    assert rows[1]["charts"] == ["ctl-chart 1.2.3"]


def test_unknown_plane_filter_is_a_usage_error(tmp_path, eksinf):
    result = eksinf("components", "--plane", "edge", cwd=make_stack(tmp_path))
    assert result.code == USAGE
    assert "unknown plane 'edge'" in result.err


@pytest.mark.parametrize("command", ["guard", "verify"])
def test_unknown_component_filter(tmp_path, eksinf, command):
    result = eksinf(command, "--component", "nope", cwd=make_stack(tmp_path))
    assert result.code == CONTRACT
    assert "eksinf: unknown component 'nope'" in result.err
    assert "Known components: profile, network, controllers, apps." in result.err


def test_version_json(eksinf):
    result = eksinf("version", "--json")
    assert result.code == 0
    info = json.loads(result.out)
    assert set(info) == {"version", "commit", "engine"}
    assert info["engine"].startswith("helm-python-sdk 0.2.2 (Helm v4.")
    assert len(info["commit"].removesuffix("-dirty")) == 40
