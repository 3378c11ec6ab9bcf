"""`eksinf validate`: the API server's admission, offline.

The rules checked come from the API server: built-in kinds from the Kubernetes OpenAPI schemas
at RENDER_KUBE_VERSION (kubernetes-validate's strict copies), quantities from
k8s.io/apimachinery/pkg/api/resource/quantity.go, names from apimachinery's
pkg/util/validation, custom resources from their CRD's openAPIV3Schema and CEL
x-kubernetes-validations (the CRDs committed in configs/, Karpenter 1.14.0 and ACK).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import MIRROR

from eksinf.build.validate import cel
from eksinf.errors import CONTRACT, FAILURE

NODEPOOLS = "configs/karpenter/nodepools.yaml"
NODECLASSES = "configs/karpenter/nodeclasses.yaml"
VLLM = "configs/inference-workloads/vllm.yaml"


def edit(root: Path, unit: str, name: str, change) -> None:
    """Apply `change(doc)` to the document named `name` in a committed unit (a copy's)."""
    path = root / unit
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    [doc] = [d for d in docs if d["metadata"]["name"] == name and d["kind"] != "Service"]
    change(doc)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def run(eksinf, root: Path) -> tuple[int, dict]:
    result = eksinf("validate", "--json", cwd=root)
    return result.code, json.loads(result.out)


def invalid(report: dict) -> list[dict]:
    return [
        f
        for part in ("raw", "resolved")
        for f in report[part]["findings"]
        if f["status"] == "invalid"
    ]


def test_the_committed_stack_is_admissible_raw_and_resolved(stack_dir, eksinf):
    code, report = run(eksinf, stack_dir)
    assert code == 0, invalid(report)
    assert report["invalid"] == 0
    assert report["notEvaluated"] == 0
    assert report["celRulesEvaluated"] > 100  # Karpenter's and ACK's rules, on every object
    assert 0 < report["celRulesDistinct"] <= report["celRulesEvaluated"]
    assert report["schemas"].keys() == {"builtin", "crd", "pinned"}
    # raw units hold the profile's placeholders, each at a bound path; resolved units none
    raw = report["raw"]
    assert raw["unresolved"] > 0
    assert {f["rule"] for f in raw["findings"] if f["status"] == "unresolved"} >= {
        "bound by a profile link"
    }
    assert report["resolved"]["unresolved"] == 0
    assert report["resolved"]["findings"] == []

    text = eksinf("validate", cwd=stack_dir)
    assert text.code == 0
    assert " 0 invalid, " in text.err and " 0 not evaluated; " in text.err
    assert (
        f"{report['celRulesEvaluated']} CEL rule evaluations "
        f"({report['celRulesDistinct']} distinct rules)"
    ) in text.err


def test_a_broken_nodepool_nodeclass_and_deployment_exit_3_naming_each(stack_dir, eksinf):
    def requirement(doc):
        reqs = doc["spec"]["template"]["spec"]["requirements"]
        [gen] = [r for r in reqs if r["key"] == "karpenter.k8s.aws/instance-generation"]
        gen["values"] = ["four"]

    def hop_limit(doc):
        doc["spec"]["metadataOptions"]["httpPutResponseHopLimit"] = 99

    def quantity(doc):
        [vllm] = doc["spec"]["template"]["spec"]["containers"]
        vllm["resources"]["requests"]["memory"] = "12GB"

    edit(stack_dir, NODEPOOLS, "general", requirement)
    edit(stack_dir, NODECLASSES, "general", hop_limit)
    edit(stack_dir, VLLM, "vllm", quantity)
    code, report = run(eksinf, stack_dir)
    assert code == CONTRACT
    got = {
        (f["unit"], f["resource"], f["path"], f["rule"], json.dumps(f["value"]))
        for f in report["raw"]["findings"]
        if f["status"] == "invalid"
    }
    assert got == {
        (
            NODEPOOLS,
            "karpenter.sh/v1 NodePool general",
            "spec.template.spec.requirements",
            "x-kubernetes-validations: self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' "
            "|| x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && "
            "int(x.values[0]) >= 0) : true)",
            json.dumps(
                next(yaml.safe_load_all((stack_dir / NODEPOOLS).read_text()))["spec"]["template"][
                    "spec"
                ]["requirements"]
            ),
        ),
        (
            NODECLASSES,
            "karpenter.k8s.aws/v1 EC2NodeClass general",
            "spec.metadataOptions.httpPutResponseHopLimit",
            "maximum: 64",
            "99",
        ),
        (
            VLLM,
            "apps/v1 Deployment inference/vllm",
            "spec.template.spec.containers.0.resources.requests.memory",
            "format: quantity",
            '"12GB"',
        ),
    }
    # the resolved units carry the same three
    assert len(invalid(report)) == 6

    text = eksinf("validate", cwd=stack_dir)
    assert text.code == CONTRACT
    assert "3 invalid" not in text.err and "6 invalid" in text.err
    assert (
        f"invalid: {VLLM} apps/v1 Deployment inference/vllm "
        "spec.template.spec.containers.0.resources.requests.memory [format: quantity] value '12GB'"
    ) in text.out


# One CEL rule per Karpenter CRD kind the stack uses (NodePool, EC2NodeClass), each broken by a
# change the schema alone allows. Rules quoted from configs/karpenter/karpenter-crds.yaml.
CEL_BREAKS = [
    (
        NODEPOOLS,
        "general",
        lambda d: d["spec"]["template"]["spec"]["requirements"].append(
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}
        ),
        "spec.template.spec.requirements.4.key",
        'self != "kubernetes.io/hostname"',
    ),
    (
        NODEPOOLS,
        "general",
        lambda d: d["spec"]["template"]["spec"]["requirements"][0].update(values=[]),
        "spec.template.spec.requirements",
        "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
    ),
    (
        NODEPOOLS,
        "general",
        lambda d: d["spec"]["template"]["spec"]["requirements"].append(
            {"key": "karpenter.sh/unknown", "operator": "Exists"}
        ),
        "spec.template.spec.requirements.4.key",
        'self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || '
        '!self.find("^([^/]+)").endsWith("karpenter.sh")',
    ),
    (
        NODECLASSES,
        "general",
        lambda d: d["spec"]["tags"].update({"karpenter.sh/nodepool": "x"}),
        "spec.tags",
        "self.all(k, k != 'karpenter.sh/nodepool')",
    ),
    (
        NODECLASSES,
        "general",
        lambda d: d["spec"].update(amiSelectorTerms=[{"alias": "ubuntu@latest"}]),
        "spec.amiSelectorTerms.0.alias",
        "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']",
    ),
    (
        NODECLASSES,
        "general",
        lambda d: d["spec"].update(instanceProfile="p"),
        "spec",
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
    ),
]


@pytest.mark.parametrize(("unit", "name", "change", "path", "rule"), CEL_BREAKS)
def test_each_broken_karpenter_cel_rule_is_caught(
    stack_dir, eksinf, unit, name, change, path, rule
):
    edit(stack_dir, unit, name, change)
    code, report = run(eksinf, stack_dir)
    assert code == CONTRACT
    # resolved units must pass fully; raw ones may call a failure over a placeholder unresolved
    cel_findings = [
        (f["unit"], f["path"], f["rule"])
        for f in report["resolved"]["findings"]
        if f["status"] == "invalid" and f["rule"].startswith("x-kubernetes-validations")
    ]
    assert cel_findings == [
        (f"resolved(inference-demo) {unit}", path, f"x-kubernetes-validations: {rule}")
    ]


def test_placeholder_only_at_a_bound_path(stack_dir, eksinf):
    def stray(doc):
        doc["spec"]["metadataOptions"]["httpTokens"] = "confighubplaceholder"

    edit(stack_dir, NODECLASSES, "general", stray)
    code, report = run(eksinf, stack_dir)
    assert code == CONTRACT
    [raw] = [f for f in report["raw"]["findings"] if f["status"] == "invalid"]
    assert (raw["path"], raw["rule"]) == (
        "spec.metadataOptions.httpTokens",
        "placeholder outside a binding",
    )
    [resolved] = [f for f in report["resolved"]["findings"] if f["status"] == "invalid"]
    assert resolved["rule"] == "placeholder in a resolved unit"
    # the bound ones stay `unresolved` in raw units
    bound = [f for f in report["raw"]["findings"] if f["path"] == "spec.role"]
    assert {f["status"] for f in bound} == {"unresolved"}


def test_names_unknown_kinds_and_argo_applications(stack_dir, eksinf):
    unit = stack_dir / "configs/inference-workloads/extra.yaml"
    unit.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "Bad_Name", "namespace": "inference"},
                },
                {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}},
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Application",
                    "metadata": {"name": "app", "namespace": "argocd"},
                    "spec": {
                        "project": "default",
                        "source": {"repoUrl": "oci://x", "path": "."},
                        "destination": {"server": "https://kubernetes.default.svc"},
                    },
                },
            ]
        )
    )
    code, report = run(eksinf, stack_dir)
    assert code == CONTRACT
    got = {
        (f["resource"], f["path"], f["rule"])
        for f in report["raw"]["findings"]
        if f["status"] == "invalid"
    }
    assert ("v1 ConfigMap inference/Bad_Name", "metadata.name", "dns1123_subdomain") in got
    assert ("example.com/v1 Gizmo g", "", "known kind") in got
    # Argo CD's own CRD ships in configs/argocd, so its schema judges the Application: the
    # misspelt field is unknown (server-side apply would refuse it) and the real one is missing.
    app = "argoproj.io/v1alpha1 Application argocd/app"
    assert (app, "spec.source.repoUrl", "unknown field") in got
    assert (app, "spec.source.repoURL", "required") in got


def test_a_rule_the_engine_cannot_evaluate_is_not_a_pass(stack_dir, eksinf):
    path = stack_dir / "configs/karpenter/karpenter-crds.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    [pools] = [d for d in docs if d["metadata"]["name"] == "nodepools.karpenter.sh"]
    spec = pools["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"].append({"rule": "self.weight.frobnicate()", "message": "m"})
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code, report = run(eksinf, stack_dir)
    assert code == FAILURE
    missing = [f for f in report["raw"]["findings"] if f["status"] == "not-evaluated"]
    assert {f["rule"] for f in missing} == {"x-kubernetes-validations: self.weight.frobnicate()"}
    assert "no function or variable 'frobnicate'" in missing[0]["message"]


@pytest.mark.parametrize(
    ("rule", "value", "status"),
    [
        ('self.find("^([^/]+)")  == "karpenter.sh"', "karpenter.sh/x", cel.PASS),
        ('self.find("[0-9]+") == ""', "abc", cel.PASS),
        ("self.split('@') == ['al2023', 'v1']", "al2023@v1", cel.PASS),
        ("self.findAll('[a-z]') == ['a', 'b']", "a1b", cel.PASS),
        ("self.lowerAscii() == 'abc'", "AbC", cel.PASS),
        ("['a', 'b'].join('-') == self", "a-b", cel.PASS),
        ("quantity(self).isLessThan(quantity('1Gi'))", "512Mi", cel.PASS),
        ("quantity(self).compareTo(quantity('1000m')) == 0", "1", cel.PASS),
        ("isQuantity(self)", "12GB", cel.FAIL),
        ("self.isSorted() && self.sum() == 6", [1, 2, 3], cel.PASS),
        ("int(self) > 0", "x", cel.FAIL),  # an evaluation error rejects, as on the server
        ("self.missing == 1", {}, cel.FAIL),
        ("self == oldSelf", 1, cel.TRANSITION),
        ("self.frobnicate()", 1, cel.NOT_EVALUATED),
    ],
)
def test_kubernetes_cel_libraries(rule, value, status, tmp_path, monkeypatch):
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path))
    assert cel.Engine([rule]).evaluate(rule, value).status == status
    # and the same from the parse cache (no grammar built)
    assert cel.Engine([rule]).evaluate(rule, value).status == status


def test_release_publish_refuses_a_release_the_api_server_would_not_admit(stack_dir, eksinf):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    before = eksinf("release", "list", "karpenter-sandbox", "--json", cwd=stack_dir)
    args = ("karpenter.sh/v1/NodePool", "spec.limits.cpu", "lots", "--space", "karpenter-sandbox")
    assert eksinf("fn", "set-string-path", *args, "--unit", "nodepools", cwd=stack_dir).code == 0

    result = eksinf("release", "publish", "karpenter-sandbox", cwd=stack_dir)
    assert result.code == CONTRACT
    assert "release of karpenter-sandbox refused" in result.err
    assert (
        "release karpenter-sandbox/nodepools.yaml karpenter.sh/v1 NodePool general spec.limits.cpu"
    ) in result.err
    assert "value 'lots'" in result.err
    # nothing was published
    after = eksinf("release", "list", "karpenter-sandbox", "--json", cwd=stack_dir)
    assert json.loads(after.out) == json.loads(before.out)


def test_the_releases_of_one_command_share_one_read_and_honour_their_own_crds(
    stack_dir, monkeypatch
):
    """A ReleaseGate reads configs/ once for every release it checks, and a release carrying a
    CRD that differs from the committed one is checked against its own, even after releases
    with the committed CRD were checked."""
    import copy

    from eksinf.build.validate.release import ReleaseGate
    from eksinf.model import configs
    from eksinf.model.stack import load_stack

    reads = []
    real_read = configs.read_units
    monkeypatch.setattr(
        configs, "read_units", lambda *a, **k: reads.append(a) or real_read(*a, **k)
    )
    committed = real_read(stack_dir / "configs", ["karpenter"])
    crds = committed["karpenter/karpenter-crds"]
    pools = committed["karpenter/nodepools"]
    gate = ReleaseGate(load_stack(stack_dir))
    for space in ("karpenter-a", "karpenter-b"):
        report = gate.check(space, {"nodepools": pools, "karpenter-crds": crds})
        assert report.ok and report.by_schema.get("crd") == len(pools), report.findings
    assert len(reads) == 1
    # the release's own NodePool CRD no longer knows spec.weight: that release is refused
    narrowed = copy.deepcopy(crds)
    nodepool = next(d for d in narrowed if d["spec"]["names"]["kind"] == "NodePool")
    for version in nodepool["spec"]["versions"]:
        del version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["weight"]
    report = gate.check("karpenter-c", {"nodepools": pools, "karpenter-crds": narrowed})
    assert not report.ok
    assert {f.path for f in report.findings if f.status == "invalid"} == {"spec.weight"}
    assert len(reads) == 1


def test_a_damaged_cel_cache_changes_no_verdict(stack_dir, eksinf, tmp_path, monkeypatch):
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    # an empty cache: the CRDs the cluster provides come from the offline mirror again
    monkeypatch.setenv("EKSINF_MANIFEST_MIRROR", str(MIRROR.parent / "manifests"))
    code, first = run(eksinf, stack_dir)
    assert code == 0
    [cached] = list((tmp_path / "cache" / "derived" / "cel").iterdir())
    cached.write_bytes(b"not JSON")
    code, again = run(eksinf, stack_dir)
    assert code == 0
    assert again["celRulesEvaluated"] == first["celRulesEvaluated"]
    assert again["raw"]["findings"] == first["raw"]["findings"]


SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": True},
                "size": {"type": "integer", "minimum": 1, "maximum": 10, "format": "int32"},
                "when": {"type": "string", "format": "date-time"},
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
                "items": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["key"],
                    "items": {"type": "object", "properties": {"key": {"type": "string"}}},
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "note": {"type": "string", "nullable": True},
            },
            "x-kubernetes-validations": [
                {"rule": "self.mode == 'a' || has(self.size)", "message": "mode b needs a size"}
            ],
        }
    },
}


@pytest.fixture(scope="module")
def spec_rules() -> cel.Engine:
    return cel.Engine([r["rule"] for r in SCHEMA["properties"]["spec"]["x-kubernetes-validations"]])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"name": "ok", "free": {"any": 1}, "note": None, "port": "http"}, set()),
        ({}, {("spec.name", "required")}),
        ({"name": "Bad"}, {("spec.name", "pattern: ^[a-z]+$")}),
        ({"name": "toolongname"}, {("spec.name", "maxLength: 8")}),
        ({"name": "x", "mode": "c", "size": 2}, {("spec.mode", "enum")}),
        ({"name": "x", "port": 1.5}, {("spec.port", "x-kubernetes-int-or-string")}),
        ({"name": "x", "size": 11}, {("spec.size", "maximum: 10")}),
        ({"name": "x", "size": "3"}, {("spec.size", "type: integer")}),
        ({"name": "x", "when": "yesterday"}, {("spec.when", "format: date-time")}),
        ({"name": "x", "tags": ["a", "a"]}, {("spec.tags.1", "x-kubernetes-list-type: set")}),
        (
            {"name": "x", "items": [{"key": "k"}, {"key": "k"}]},
            {("spec.items.1", "x-kubernetes-list-type: map (keys key)")},
        ),
        ({"name": "x", "colour": "red"}, {("spec.colour", "unknown field")}),
        (
            {"name": "x", "mode": "b"},
            {("spec", "x-kubernetes-validations: self.mode == 'a' || has(self.size)")},
        ),
    ],
)
def test_structural_rules_each_catch_their_case(spec, expected, spec_rules):
    """apiextensions-apiserver's structural validation, one rule at a time (defaults applied
    first: `mode` defaults to 'a', so the CEL rule passes without it)."""
    from eksinf.build.validate import structural

    def evaluate(rule, value):
        outcome = spec_rules.evaluate(rule, value)
        return outcome.status, outcome.detail

    result = structural.check(SCHEMA, {"apiVersion": "x/v1", "kind": "X", "spec": spec}, evaluate)
    assert {(v.path, v.rule) for v in result.violations} == expected
    assert result.rules_evaluated == 1


def test_the_walk_is_bounded():
    from eksinf.build.validate import structural

    schema: dict = {"type": "object"}
    schema["additionalProperties"] = schema  # any depth is allowed by the schema itself
    deep: dict = {}
    node = deep
    for _ in range(structural.MAX_DEPTH + 5):
        node["a"] = {}
        node = node["a"]
    result = structural.check(
        {"type": "object", "properties": {"spec": schema}},
        {"spec": deep},
        lambda _r, _v: ("pass", ""),
    )
    assert [v.rule for v in result.violations] == [f"depth <= {structural.MAX_DEPTH}"]


def test_json_stays_json_when_the_stack_cannot_be_read(stack_dir, eksinf):
    (stack_dir / NODEPOOLS).write_text("a: [1\n")
    result = eksinf("validate", "--json", cwd=stack_dir)
    assert result.code == CONTRACT
    report = json.loads(result.out)
    assert report["ok"] is False
    assert report["error"].startswith(f"{NODEPOOLS}:")
