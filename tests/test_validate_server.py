"""`eksinf validate --server` and the agreement of the offline check with a real kube-apiserver.

Every server here is the real one (fixture `kube_plane`, one per session): the corpus's CRDs
are created on it once, and each broken document is applied with dryRun=All, so nothing a case
sends is stored and each is judged as a create.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests
import yaml
from conftest import TOOL_MIRROR
from validate_corpus import CASES, SERVER_ONLY, Case, broken, holds

from eksinf import links
from eksinf.build.validate import server
from eksinf.build.validate.admission import Admission, crds_of, published_units
from eksinf.build.validate.provided import cluster_crd_units
from eksinf.build.validate.semantic import RULES
from eksinf.errors import CONTRACT, FAILURE, EksinfError
from eksinf.kube.client import KubeAuth, KubeClient, object_ref
from eksinf.model import configs
from eksinf.model.profile import load_profile
from eksinf.model.resources import resource_label
from eksinf.model.stack import load_stack
from eksinf.publish import argo

REPO = Path(__file__).resolve().parent.parent
APPLICATION = "generated/application"


@pytest.fixture(scope="module")
def stack_units() -> tuple:
    stack = load_stack(REPO)
    units = configs.read_units(stack.configs_dir)
    _, published = published_units(stack, units, links.load_bindings(stack))
    published = dict(published)
    published[APPLICATION] = list(
        yaml.safe_load_all(
            argo.child_application(
                "demo-workload",
                "registry.example:5000",
                namespace="inference",
                ships_namespace=True,
            )
        )
    )
    provided = cluster_crd_units(stack)
    return stack, published, provided


@pytest.fixture(scope="module")
def admission(stack_units: tuple) -> Admission:
    stack, published, provided = stack_units
    return Admission({**crds_of(provided), **crds_of(published)}, stack.kube_version)


@pytest.fixture(scope="module")
def admin(kube_plane, stack_units: tuple) -> KubeClient:
    """An admin client of the session's server, with every CRD the corpus needs Established
    and the namespaces its documents live in."""
    _, published, provided = stack_units
    client = KubeClient(
        KubeAuth(server=kube_plane.server, ca_file=str(kube_plane.ca_file)),
        token=kube_plane.admin_token,
        timeout=60.0,
    )
    crds = [
        (label, doc)
        for label, docs in {**provided, **published}.items()
        for doc in docs
        if doc.get("kind") == "CustomResourceDefinition"
    ]
    report = server.install_crds(client, "corpus", crds)
    assert not report.findings, [f.line() for f in report.findings]
    for namespace in sorted(
        {c_doc(c, published)["metadata"].get("namespace") for c in CASES} - {None}
    ):
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        assert not server.admit(client, "corpus", "-", ns, dry_run=False, local=True)
    return client


def c_doc(case: Case, published: dict) -> dict:
    return next(
        d
        for d in published[case.unit]
        if d.get("kind") == case.kind and d["metadata"]["name"] == case.name
    )


def _field(text: str) -> str:
    """The server's notation (`a[0].b[key]`) in eksinf's (`a.0.b.key`)."""
    return re.sub(r"\[([^\]]*)\]", r".\1", text)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_offline_agrees_with_the_server(
    case: Case, stack_units: tuple, admission: Admission, admin: KubeClient
) -> None:
    _, published, _ = stack_units
    original = c_doc(case, published)
    doc = broken(case, original)
    # the unbroken document is admitted by both: the case's edit is what each refuses
    assert not server.admit(admin, "corpus", case.unit, original, dry_run=True, local=True)
    found = server.admit(admin, "corpus", case.unit, doc, dry_run=True, local=True)
    offline = admission.check_units({case.unit: [doc]}, lambda key: key).findings
    print(case.id, [(f.field, f.message) for f in found], [(f.path, f.message) for f in offline])
    assert found, "the real server admitted a broken document"
    assert case.field in [f.field for f in found], [f.line() for f in found]
    if case.id in SERVER_ONLY:
        assert not offline
        return
    assert offline, "the offline check admitted what the server refuses"
    # the same field, or one inside it (the server names a label map, eksinf the label)
    want = _field(case.field)
    assert any(
        want in ("", _field(f.path)) or _field(f.path).startswith(want + ".") for f in offline
    ), [f.line() for f in offline]
    # a semantic rule speaks the server's words
    semantic_rules = {r.name for r in RULES}
    for finding in (f for f in offline if f.rule in semantic_rules):
        assert any(finding.message in s.message for s in found), (finding.message, found)


PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.probe.eksinf.dev"},
    "spec": {
        "group": "probe.eksinf.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "free": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_what_the_server_does_with_unknown_fields(admin: KubeClient, kube_plane) -> None:
    """docs/validate.md's account, pinned: server-side apply refuses an unknown field of a
    built-in kind and of a custom resource; a plain create (no fieldValidation) drops it with
    a warning; under x-kubernetes-preserve-unknown-fields it is kept."""
    assert not server.install_crds(admin, "probe", [("probe", PROBE_CRD)]).findings
    widget = {"apiVersion": "probe.eksinf.dev/v1", "kind": "Widget"}
    cases = {
        "builtin": (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "probe", "namespace": "default"},
                "extra": 1,
            },
            "extra",
        ),
        "crd": (
            {**widget, "metadata": {"name": "w1", "namespace": "default"}, "spec": {"colour": "r"}},
            "spec.colour",
        ),
    }
    for doc, where in cases.values():
        assert [(f.field, f.message) for f in server.admit(admin, "p", "u", doc, True, True)] == [
            (where, "field not declared in schema")
        ]
        collection = admin.path(object_ref(doc)).rsplit("/", 1)[0]
        resp = requests.post(
            f"{kube_plane.server}{collection}",
            params={"dryRun": "All"},
            json=doc,
            headers={"Authorization": f"Bearer {kube_plane.admin_token}"},
            verify=str(kube_plane.ca_file),
            timeout=30,
        )
        assert resp.status_code == 201
        assert f'unknown field \\"{where}\\"' in resp.headers["Warning"]  # a quoted header
    kept = {
        **widget,
        "metadata": {"name": "w2", "namespace": "default"},
        "spec": {"free": {"colour": "r"}},
    }
    status, body = admin.admit(kept, dry_run=True)
    assert status == 201 and body["spec"] == {"free": {"colour": "r"}}
    # and the offline check says the same of the CRD's documents
    offline = Admission(crds_of({"probe": [PROBE_CRD]}), "1.31.0")
    assert not offline.check_units({"u": [kept]}, str).findings
    assert [f.path for f in offline.check_units({"u": [cases["crd"][0]]}, str).findings] == [
        "spec.colour"
    ]


def _resolvable(case: Case, stack) -> bool:
    """Whether the profile's links still resolve the broken raw unit: an edit of a field a link
    writes, or of what a link finds its target by (a container's name), breaks the unit for
    the link engine before any server could see it."""
    units = configs.read_units(stack.configs_dir)
    docs = list(units[case.unit])
    [index] = [
        i
        for i, d in enumerate(docs)
        if d["kind"] == case.kind and d["metadata"]["name"] == case.name
    ]
    docs[index] = broken(case, docs[index])
    try:
        resolved = links.resolve_units(
            {case.unit: docs}, load_profile(stack).spec, links.load_bindings(stack)
        )
    except EksinfError:
        return False
    return holds(case, resolved[case.unit][index])


def _break_stack(root: Path, cases: list[Case]) -> None:
    """Apply every case's edit to the committed (raw) units of a stack copy."""
    for unit in sorted({c.unit for c in cases}):
        path = root / "configs" / f"{unit}.yaml"
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for case in (c for c in cases if c.unit == unit):
            [index] = [
                i
                for i, d in enumerate(docs)
                if d["kind"] == case.kind and d["metadata"]["name"] == case.name
            ]
            docs[index] = broken(case, docs[index])
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def test_validate_server_local_names_every_broken_unit(
    stack_dir: Path, eksinf, kube_plane, stack_units: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eksinf validate --server local` on a stack copy broken in every corpus case at once (the
    generated Application is no unit): exit 3, valid JSON, and each broken resource refused
    with its unit and the server's message, nothing else. Two fresh control planes."""
    _, published, _ = stack_units
    monkeypatch.setenv("EKSINF_TOOL_MIRROR", str(TOOL_MIRROR))
    cases = [c for c in CASES if c.unit != APPLICATION and _resolvable(c, stack_units[0])]
    assert len(cases) >= 30
    _break_stack(stack_dir, cases)
    result = eksinf("validate", "--server", "local", "--json", cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    report = json.loads(result.out)
    assert "planes" in report, report
    assert [p["plane"] for p in report["planes"]] == ["mgmt", "workload"]
    assert all(f["message"] for f in report["findings"])
    refused = {(f["unit"], f["resource"]) for f in report["findings"] if f["status"] == "refused"}
    expected = {
        (
            f"configs/{c.unit}.yaml",
            f"{c_doc(c, published)['apiVersion']} {resource_label(c_doc(c, published))}",
        )
        for c in cases
    }
    assert refused == expected


def test_validate_server_kubeconfig_dry_runs_and_never_passes_what_it_cannot_check(
    stack_dir: Path, eksinf, kube_plane, admin: KubeClient, tmp_path: Path
) -> None:
    """`--server KUBECONFIG`: a dry run on the user's cluster (the session's server, which has
    the stack's CRDs but not the Gadget kind, nor the namespace `nowhere`). A kind or namespace
    the cluster lacks is not checkable (exit 1, not a pass); a refusal is exit 3."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kube_plane.kubeconfig()))
    before = admin.get(
        object_ref(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "smoke-cpu", "namespace": "inference"},
            }
        )
    )
    unit = stack_dir / "configs" / "inference-workloads" / "smoke-cpu.yaml"
    docs = [d for d in yaml.safe_load_all(unit.read_text()) if d]
    extra = [
        {
            "apiVersion": "nothere.eksinf.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "inference"},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "nowhere"},
        },
    ]
    unit.write_text(yaml.safe_dump_all([*docs, *extra], sort_keys=False))
    args = ("validate", "--server", str(kubeconfig), "--plane", "workload", "--json")
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == FAILURE, result.err
    report = json.loads(result.out)
    assert report["refused"] == 0 and report["admitted"] > 30
    assert sorted((f["status"], f["resource"], f["field"]) for f in report["findings"]) == [
        ("not-checkable", "nothere.eksinf.dev/v1 Gadget inference/g", ""),
        ("not-checkable", "v1 ConfigMap nowhere/c", "metadata.namespace"),
    ]
    # a dry run stores nothing
    assert admin.get(object_ref(extra[1])) is None
    assert admin.get(object_ref(docs[0])) == before

    docs[0]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    unit.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    [finding] = json.loads(result.out)["findings"]
    assert finding["unit"] == "configs/inference-workloads/smoke-cpu.yaml"
    assert finding["field"] == "spec.template.spec.restartPolicy"
    assert finding["message"] == 'Unsupported value: "Never": supported values: "Always"'


def test_validate_server_fails_in_valid_json(
    stack_dir: Path, eksinf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No server binary (exit 4) or an unknown plane (exit 2): still one JSON object."""
    monkeypatch.setenv("EKSINF_KUBE_APISERVER", str(tmp_path / "missing"))
    result = eksinf("validate", "--server", "local", "--json", cwd=stack_dir)
    assert result.code == 4
    assert json.loads(result.out)["ok"] is False
    assert "EKSINF_KUBE_APISERVER" in json.loads(result.out)["error"]
    result = eksinf("validate", "--server", "local", "--plane", "hub", "--json", cwd=stack_dir)
    assert result.code == 2
    assert "unknown plane 'hub'" in json.loads(result.out)["error"]
