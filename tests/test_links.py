"""Profile links: binding files, addressing by path and by setter, pure resolution, the CLI."""

from __future__ import annotations

import copy
import json

import pytest

from eksinf.errors import CONTRACT, EksinfError
from eksinf.links import (
    Binding,
    load_bindings,
    resolve_units,
)
from eksinf.links.engine import Target, write
from eksinf.model import paths
from eksinf.model.configs import read_units
from eksinf.model.placeholder import PLACEHOLDER
from eksinf.model.placeholder import scan as placeholders
from eksinf.model.profile import load_profile
from eksinf.model.resources import find_resource
from eksinf.model.stack import load_stack

NETWORK_BINDINGS = "render/aws-network/links/bindings.yaml"


def apply_binding(b: Binding, doc: dict, value) -> bool:
    return write(doc, Target.of(b), value)


def binding(**kw) -> Binding:
    base = dict(
        component="c",
        source="region",
        unit="u",
        kind="Deployment",
        name="ns/app",
        path=None,
        container=None,
        env=None,
        file="f.yaml",
        line=1,
    )
    base.update(kw)
    return Binding(**base)


DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "app", "namespace": "ns"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {"name": "sidecar", "env": [{"name": "AWS_REGION", "value": "x"}]},
                    {
                        "name": "controller",
                        "env": [
                            {"name": "A", "value": "1"},
                            {"name": "AWS_REGION", "value": PLACEHOLDER},
                        ],
                    },
                ]
            }
        }
    },
}


def test_committed_bindings_load_with_lines(stack_dir):
    bindings = load_bindings(load_stack(stack_dir))
    assert len(bindings) >= 60
    first = bindings[0]
    assert first.file.endswith("links/bindings.yaml")
    for b in bindings:  # each binding's line is its `- source:` line
        lines = (stack_dir / b.file).read_text().splitlines()
        assert lines[b.line - 1].strip() == f"- source: {b.source}", b
    escaped = [b for b in bindings if b.path and "~1" in b.path]
    assert any("karpenter~1sh/discovery" in b.path for b in escaped)


def test_setter_writes_by_container_and_env_name_not_position():
    doc = copy.deepcopy(DEPLOY)
    b = binding(container="controller", env="AWS_REGION")
    assert apply_binding(b, doc, "eu-west-1") is True
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert containers[1]["env"][1]["value"] == "eu-west-1"
    assert containers[0]["env"][0]["value"] == "x"  # same env name, other container: untouched
    assert apply_binding(b, doc, "eu-west-1") is False  # unchanged the second time


def test_setter_missing_env_var_is_an_error():
    b = binding(container="controller", env="CLUSTER_NAME")
    with pytest.raises(paths.PathError) as info:
        apply_binding(b, copy.deepcopy(DEPLOY), "v")
    assert "no env var 'CLUSTER_NAME'" in info.value.message
    assert "A, AWS_REGION" in info.value.message


def test_setter_missing_container_is_an_error():
    b = binding(container="manager", env="AWS_REGION")
    with pytest.raises(paths.PathError) as info:
        apply_binding(b, copy.deepcopy(DEPLOY), "v")
    assert "no container named 'manager'" in info.value.message


def test_path_binding_never_creates_a_field():
    doc = {"kind": "X", "metadata": {"name": "a"}, "spec": {"tags": {"karpenter.sh/discovery": 1}}}
    with pytest.raises(paths.PathError):
        apply_binding(binding(path="spec.tags.karpenter.sh/discovery"), doc, "net")
    assert doc["spec"]["tags"] == {"karpenter.sh/discovery": 1}
    assert apply_binding(binding(path="spec.tags.karpenter~1sh/discovery"), doc, "net")
    assert doc["spec"]["tags"] == {"karpenter.sh/discovery": "net"}


def test_find_resource_by_namespace_and_cluster_scope():
    docs = [
        {"kind": "EC2NodeClass", "apiVersion": "karpenter.k8s.aws/v1", "metadata": {"name": "gpu"}},
        {"kind": "Role", "apiVersion": "rbac/v1", "metadata": {"name": "r", "namespace": "a"}},
        {"kind": "Role", "apiVersion": "iam/v1", "metadata": {"name": "r", "namespace": "b"}},
    ]
    assert find_resource(docs, "EC2NodeClass", "/gpu") is docs[0]
    assert find_resource(docs, "EC2NodeClass", "gpu") is docs[0]
    assert find_resource(docs, "Role", "b/r") is docs[2]
    assert find_resource(docs, "iam/v1/Role", "b/r") is docs[2]
    assert find_resource(docs, "iam/v1/Role", "a/r") is None


def test_resolve_units_is_pure_and_clears_every_placeholder(stack_dir):
    stack = load_stack(stack_dir)
    units = read_units(stack.configs_dir)
    before = copy.deepcopy(units)
    profile = load_profile(stack)
    resolved = resolve_units(units, profile.spec, load_bindings(stack))
    assert units == before
    left = [p for docs in resolved.values() for d in docs for p in placeholders(d)]
    assert left == []
    vpc = find_resource(resolved["aws-network/network"], "VPC", "aws-inference/inference-demo-vpc")
    assert vpc["spec"]["cidrBlocks"] == [profile.vpc_cidr]
    gpu = find_resource(resolved["karpenter/nodeclasses"], "EC2NodeClass", "/gpu")
    assert gpu["spec"]["subnetSelectorTerms"][0]["tags"] == {
        "karpenter.sh/discovery": profile.network_name
    }


def test_resolve_units_skips_units_not_given(stack_dir):
    stack = load_stack(stack_dir)
    units = read_units(stack.configs_dir)
    only = {"karpenter/nodeclasses": units["karpenter/nodeclasses"]}
    out = resolve_units(only, load_profile(stack).spec, load_bindings(stack))
    assert list(out) == ["karpenter/nodeclasses"]


def test_resolve_units_names_binding_of_missing_resource(stack_dir):
    stack = load_stack(stack_dir)
    b = binding(component="aws-network", unit="network", kind="VPC", name="aws-inference/nope")
    b = Binding(**{**b.__dict__, "path": "spec.cidrBlocks.0"})
    with pytest.raises(EksinfError) as info:
        resolve_units(read_units(stack.configs_dir), load_profile(stack).spec, [b])
    assert info.value.exit_code == CONTRACT
    assert "VPC aws-inference/nope not found in unit aws-network/network.yaml" in str(info.value)


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ("    path: spec.cidrBlocks.0\n", "give exactly one of `path` or `setter`"),
        ("    kind: VPC\n", "`kind` is required"),
    ],
)
def test_malformed_binding_file_names_line(stack_dir, eksinf, replace, message):
    path = stack_dir / NETWORK_BINDINGS
    text = path.read_text()
    assert replace in text
    path.write_text(text.replace(replace, "", 1))
    result = eksinf("links", "list", cwd=stack_dir)
    assert result.code == CONTRACT
    assert message in result.err
    assert f"{NETWORK_BINDINGS}:" in result.err


def test_unknown_binding_key_is_refused(stack_dir, eksinf):
    path = stack_dir / NETWORK_BINDINGS
    path.write_text(path.read_text().replace("    path: spec.cidrBlocks.0\n", "    paht: x\n", 1))
    result = eksinf("links", "list", cwd=stack_dir)
    assert result.code == CONTRACT
    assert "unknown key(s) paht" in result.err


def test_links_list_json(stack_dir, eksinf):
    result = eksinf("links", "list", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    rows = json.loads(result.out)["bindings"]
    setters = [r for r in rows if "setter" in r]
    assert {"container": "controller", "env": "CLUSTER_NAME"} in [r["setter"] for r in setters]


def test_links_resolve_writes_resolved_units(stack_dir, eksinf, tmp_path):
    out = tmp_path / "resolved"
    profile = stack_dir / "render/platform-profile/profile.yaml"
    result = eksinf("links", "resolve", "--profile", str(profile), "--out", str(out), cwd=stack_dir)
    assert result.code == 0, result.err
    text = (out / "karpenter/nodeclasses.yaml").read_text()
    assert PLACEHOLDER not in text
    assert "al2023@v20260724" in text
    # configs/ itself is untouched
    assert PLACEHOLDER in (stack_dir / "configs/karpenter/nodeclasses.yaml").read_text()


def test_links_resolve_reports_unresolved_placeholders(stack_dir, eksinf, tmp_path):
    unit = stack_dir / "configs/inference-workloads/smoke-cpu.yaml"
    unit.write_text(unit.read_text().replace('cpu: "3"', f"cpu: {PLACEHOLDER}"))
    out = tmp_path / "resolved"
    profile = stack_dir / "render/platform-profile/profile.yaml"
    result = eksinf("links", "resolve", "--profile", str(profile), "--out", str(out), cwd=stack_dir)
    assert result.code == CONTRACT
    assert "smoke-cpu.yaml: Deployment inference/smoke-cpu" in result.err
    assert (out / "inference-workloads/smoke-cpu.yaml").is_file()  # still written for inspection


def test_links_resolve_rejects_invalid_profile(stack_dir, eksinf, tmp_path):
    profile = tmp_path / "p.yaml"
    src = (stack_dir / "render/platform-profile/profile.yaml").read_text()
    profile.write_text(src.replace("vpcCIDR: 10.42.0.0/16", "vpcCIDR: 10.50.0.0/16"))
    result = eksinf(
        "links", "resolve", "--profile", str(profile), "--out", str(tmp_path / "o"), cwd=stack_dir
    )
    assert result.code == CONTRACT
    assert "spec.publicSubnetCIDRs.0" in result.err and "outside the VPC CIDR" in result.err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("out", ["configs", ".", "render/karpenter", ".."])
def test_links_resolve_never_replaces_the_stack(stack_dir, eksinf, out):
    before = (stack_dir / "configs/karpenter/nodeclasses.yaml").read_text()
    profile = stack_dir / "render/platform-profile/profile.yaml"
    result = eksinf("links", "resolve", "--profile", str(profile), "--out", out, cwd=stack_dir)
    assert result.code == 2
    assert "refusing to replace" in result.err
    assert (stack_dir / "configs/karpenter/nodeclasses.yaml").read_text() == before
    assert (stack_dir / "render/karpenter/nodeclasses.yaml").is_file()
