"""`eksinf validate --server` and the agreement of the offline check with a real kube-apiserver.

Every server here is the real one (fixture `kube_plane`, one per session): the corpus's CRDs
are created on it once, and each broken document is applied with dryRun=All, so nothing a case
sends is stored and each is judged as a create.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from validate_corpus import CASES, SERVER_ONLY, Case, broken

from eksinf import argo, links
from eksinf.kube.client import KubeAuth, KubeClient
from eksinf.model import configs
from eksinf.stack import load_stack
from eksinf.validate import server
from eksinf.validate.admission import Admission, crds_of, published_units
from eksinf.validate.provided import cluster_crd_units

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
