"""Every contract rule, called directly with facts: no AWS, no cluster. One good set of facts
passes every rule; each case then breaks one fact and names the status the rule must report.

Sources of the rules are cited in docs/contract.md (EKS access entries and the admin policy,
the Pod Identity agent's trust actions, Karpenter's discovery tag, Argo CD's oci:// floor).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from eksinf.aws.contract import ADMIN_POLICY, RULES, Facts, StackNeeds, evaluate
from eksinf.aws.contract.facts import AddonNeed, AssociationRole, IrsaTrust
from eksinf.aws.contract.rules import Context, markdown, rules_for
from eksinf.aws.scope import StackScope
from eksinf.aws.session import Caller

CALLER = Caller("111122223333", "arn:aws:iam::111122223333:user/ops", "AID")
SCOPE = StackScope(
    stack="demo",
    tag_key="eksinf.dev/stack",
    cluster="demo",
    network="demo-net",
    region="us-west-2",
    node_role="demo-node-role",
    gpu_ami_alias="al2023@v20260724",
    gpu_root_volume_gib=200,
    model_cache_gib=40,
    profile_cluster="demo",
    profile_region="us-west-2",
)
NEEDS = StackNeeds(
    pod_identities=(("kube-system", "karpenter"),),
    irsa_accounts=(("ns", "sa"),),
    irsa_roles=(("ns/sa", "reader"),),
    reserved_pools=("gpu-reserved",),
    addons=(AddonNeed("eks-pod-identity-agent", "v1.3.10-eksbuild.2", None),),
    association_role_names=(("kube-system/karpenter", "k"),),
)
POD_TRUST = ("sts:AssumeRole", "sts:TagSession")
ISSUER = "https://oidc.eks.us-west-2.amazonaws.com/id/ABC"


def irsa_trust_doc(issuer_host: str, sub: str = "system:serviceaccount:ns:sa") -> dict:
    return {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": f"arn:aws:iam::1:oidc-provider/{issuer_host}"},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {f"{issuer_host}:sub": sub}},
            }
        ]
    }


CURRENT = ISSUER.removeprefix("https://")
OLD = "oidc.eks.us-west-2.amazonaws.com/id/OLD"


def good() -> Facts:
    return Facts(
        region="us-west-2",
        cluster_name="demo",
        caller=CALLER,
        cluster={
            "status": "ACTIVE",
            "version": "1.33",
            "identity": {"oidc": {"issuer": ISSUER}},
            "resourcesVpcConfig": {"endpointPublicAccess": True, "endpointPrivateAccess": False},
        },
        access_entries=[CALLER.principal_arn],
        access_policies=[(ADMIN_POLICY, "cluster")],
        addon_status="ACTIVE",
        installed_addons={
            "eks-pod-identity-agent": {
                "addonName": "eks-pod-identity-agent",
                "addonVersion": "v1.3.10-eksbuild.2",
                "configurationValues": "{}",
            }
        },
        associations=[("kube-system", "karpenter")],
        association_roles=[
            AssociationRole("kube-system/karpenter", "arn:aws:iam::1:role/k", POD_TRUST)
        ],
        oidc_providers=["arn:aws:iam::1:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"],
        irsa_trusts=[IrsaTrust("ns/sa", "reader", irsa_trust_doc(CURRENT))],
        discovery_subnets=[{"SubnetId": "subnet-1", "MapPublicIpOnLaunch": False}],
        discovery_sgs=[{"GroupId": "sg-1"}],
        cluster_discovery={"subnet subnet-1": "demo-net", "security group sg-1": "demo-net"},
        node_role={"AssumeRolePolicyDocument": "ec2.amazonaws.com", "Path": "/"},
        ami_id="ami-1",
        ami_source="ssm",
        reservations=[{"CapacityReservationId": "cr-1"}],
        version="v1.33.1",
        argocd_image="quay.io/argoproj/argocd:v3.1.0",
    )


def judge(name: str, facts: Facts, needs: StackNeeds = NEEDS, kube_used: bool = True) -> list:
    (entry,) = [r for r in RULES if r.name == name]
    return entry.run(Context(facts, SCOPE, needs, kube_used, "argocd"))


# rule -> (how to break the good facts, the status the rule must then report)
BROKEN: dict[str, tuple[Callable[[Facts], Facts], str]] = {
    "profile-names": (lambda f: replace(f, cluster_discovery={"subnet subnet-1": "old-net"}), "fail"),
    "cluster-active": (lambda f: replace(f, cluster={**(f.cluster or {}), "version": "1.20"}), "fail"),
    "access-entry": (lambda f: replace(f, access_entries=[]), "fail"),
    "access-policy": (lambda f: replace(f, access_policies=[]), "fail"),
    "endpoint-reachable": (lambda f: replace(f, version=None, endpoint_error="timeout"), "fail"),
    "pod-identity-agent": (lambda f: replace(f, addon_status=None), "fail"),
    "addon-drift": (lambda f: replace(f, installed_addons={"eks-pod-identity-agent": {"addonVersion": "v1.3.4-eksbuild.1"}}), "warn"),
    "pod-identity-associations": (lambda f: replace(f, associations=[]), "fail"),
    "pod-identity-trust": (
        lambda f: replace(
            f,
            association_roles=[
                AssociationRole("kube-system/karpenter", "arn:aws:iam::1:role/k", ("sts:AssumeRole",))
            ],
        ),
        "fail",
    ),
    "pod-identity-role": (
        lambda f: replace(
            f,
            association_roles=[
                AssociationRole("kube-system/karpenter", "arn:aws:iam::1:role/other", POD_TRUST)
            ],
        ),
        "fail",
    ),
    "irsa-issuer": (lambda f: replace(f, oidc_providers=[]), "fail"),
    "irsa-trust": (lambda f: replace(f, irsa_trusts=[IrsaTrust("ns/sa", "reader", irsa_trust_doc(OLD))]), "fail"),
    "discovery-tags": (lambda f: replace(f, discovery_sgs=[]), "fail"),
    "node-role": (lambda f: replace(f, node_role=None), "fail"),
    "gpu-ami": (lambda f: replace(f, ami_id=None, ami_error="no such parameter"), "fail"),
    "root-volume": (lambda f: replace(f, live_gpu_volume_gib=50), "warn"),
    "capacity-reservation": (lambda f: replace(f, reservations=[]), "warn"),
    "argocd": (lambda f: replace(f, argocd_image="quay.io/argoproj/argocd:v2.14.0"), "fail"),
}  # fmt: skip


def test_every_rule_has_a_direct_case() -> None:
    """The eks kind's rules (the hyperpod-eks ones are tests/test_hyperpod_contract.py's)."""
    assert [r.name for r in rules_for("eks")] == list(BROKEN)


@pytest.mark.parametrize("name", list(BROKEN))
def test_rule_passes_good_facts_and_flags_the_broken_one(name: str) -> None:
    (check,) = judge(name, good())
    assert (check.name, check.status) == (name, "pass"), check.detail
    breaker, status = BROKEN[name]
    (check,) = judge(name, breaker(good()))
    assert check.status == status, check.detail
    assert check.blocks is (status == "fail" and check.severity == "required")
    if status == "fail":
        assert check.fix, f"{name}: a failing element names its fix"


def test_rules_that_do_not_apply_say_so() -> None:
    none = StackNeeds()
    assert judge("pod-identity-associations", good(), none) == []
    assert judge("pod-identity-trust", good(), none) == []
    assert judge("pod-identity-role", good(), none) == []
    assert judge("addon-drift", good(), none) == []
    assert judge("capacity-reservation", good(), none) == []
    assert judge("irsa-trust", good(), none) == []
    (irsa,) = judge("irsa-issuer", good(), none)
    assert (irsa.status, irsa.severity) == ("skipped", "advisory")
    (endpoint,) = judge("endpoint-reachable", good(), kube_used=False)
    assert (endpoint.status, endpoint.blocks) == ("skipped", False)
    assert judge("argocd", good(), kube_used=False) == []


def test_a_401_is_explained_by_the_missing_access_entry() -> None:
    facts = replace(good(), access_entries=[], version=None, endpoint_status=401)
    (endpoint,) = judge("endpoint-reachable", facts)
    assert (endpoint.status, endpoint.blocks) == ("skipped", False)


def test_an_unexplained_401_names_the_credentials_never_the_network() -> None:
    diagnosis = "cluster https://x does not recognise the credentials of context c (...)"
    facts = replace(
        good(), version=None, endpoint_status=401, endpoint_error=diagnosis, endpoint_hint="log in"
    )
    (endpoint,) = judge("endpoint-reachable", facts)
    # it answered, so what it guards was not read: unknown (blocking), with the diagnosis' fix
    assert (endpoint.status, endpoint.blocks, endpoint.fix) == ("unknown", True, "log in")
    assert endpoint.detail.startswith(diagnosis)


def test_unreadable_facts_are_unknown_and_block() -> None:
    facts = replace(good(), access_entries=None, access_error="AccessDenied")
    (entry,) = judge("access-entry", facts)
    assert (entry.status, entry.blocks) == ("unknown", True)


def test_a_refused_identity_is_not_an_unreachable_endpoint() -> None:
    """A 401 the access checks do not explain (they pass): the endpoint answered, so it is not
    missing; what it guards was not read."""
    error = "cluster https://k refused GET /version: HTTP 401"
    facts = replace(good(), version=None, endpoint_status=401, endpoint_error=error)
    (endpoint,) = judge("endpoint-reachable", facts)
    assert (endpoint.status, endpoint.blocks) == ("unknown", True)
    assert endpoint.detail == (
        f"{error} (the endpoint answered: it refused the kubeconfig's credentials)"
    )
    assert "kubeconfig whose user this cluster accepts" in endpoint.fix


def test_what_an_unread_cluster_hides_is_unknown_never_a_fail() -> None:
    """describe-cluster denied: the add-on was never asked about and the AMI alias had no
    Kubernetes version to resolve against (what gather records then); neither is a FAIL."""
    facts = replace(
        good(),
        cluster=None,
        cluster_error="AccessDeniedException: not authorized to eks:DescribeCluster",
        addon_status=None,
        ami_id=None,
        ami_error="not read: no cluster version to resolve the alias against",
        ami_unread=True,
    )
    checks = {c.name: c for c in evaluate(facts, SCOPE, NEEDS, True, "argocd")}
    agent, ami = checks["pod-identity-agent"], checks["gpu-ami"]
    assert (agent.status, agent.blocks) == ("unknown", True)
    assert "was not read (AccessDeniedException" in agent.detail
    assert (ami.status, ami.blocks) == ("unknown", True)
    # a failed SSM read is unknown too; an alias looked up and not found stays a fail
    (failed,) = judge(
        "gpu-ami", replace(good(), ami_id=None, ami_error="Throttling", ami_unread=True)
    )
    assert failed.status == "unknown"


def test_no_cluster_stops_at_cluster_active() -> None:
    checks = evaluate(replace(good(), cluster=None), SCOPE, NEEDS, True, "argocd")
    assert [(c.name, c.status) for c in checks] == [
        ("profile-names", "pass"),
        ("cluster-active", "fail"),
    ]
    assert len(evaluate(good(), SCOPE, NEEDS, True, "argocd")) == len(rules_for("eks"))


def test_an_entry_without_a_policy_is_not_a_missing_argocd() -> None:
    """Issue 14: an access entry with no access policy authenticates the caller and authorizes
    nothing, so reading argocd-server is 403. That is the access-policy failure with its own fix,
    never "install Argo CD". (EKS access entries and access policies are separate objects:
    CreateAccessEntry, then AssociateAccessPolicy; docs/contract.md.)"""
    facts = replace(
        good(), access_policies=[], argocd_image=None, argocd_error="forbidden", argocd_status=403
    )
    checks = {c.name: c for c in evaluate(facts, SCOPE, NEEDS, True, "argocd")}
    assert checks["access-entry"].status == "pass"
    policy = checks["access-policy"]
    assert (policy.status, policy.blocks) == ("fail", True)
    assert "--grant-access" in policy.fix and "associate-access-policy" in policy.fix
    assert "create-access-entry" not in policy.fix
    argocd = checks["argocd"]
    assert (argocd.status, argocd.blocks) == ("skipped", False)
    assert "install Argo CD" not in argocd.fix and "access policy" in argocd.detail
    assert [c.name for c in checks.values() if c.blocks] == ["access-policy"]


def test_a_missing_entry_names_only_the_entry_fix() -> None:
    facts = replace(good(), access_entries=[], access_policies=None)
    checks = {c.name: c for c in evaluate(facts, SCOPE, NEEDS, True, "argocd")}
    assert "create-access-entry" in checks["access-entry"].fix
    assert "associate-access-policy" not in checks["access-entry"].fix
    assert (checks["access-policy"].status, checks["access-policy"].blocks) == ("skipped", False)


def test_a_policy_at_namespace_scope_or_another_policy_is_not_admin() -> None:
    view = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
    for held in ([(ADMIN_POLICY, "namespace")], [(view, "cluster")]):
        (check,) = judge("access-policy", replace(good(), access_policies=held))
        assert check.status == "fail", held


def test_a_403_with_full_access_is_unknown_with_an_access_fix() -> None:
    facts = replace(good(), argocd_image=None, argocd_error="forbidden", argocd_status=403)
    (check,) = judge("argocd", facts)
    assert (check.status, check.blocks) == ("unknown", True)
    assert "install Argo CD" not in check.fix and "read access" in check.fix


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        (
            {"cluster": "blue"},
            ("'blue'", "clusterName is 'demo'", "spec.clusterName: blue", "--eks-cluster demo"),
        ),
        (
            {"region": "eu-west-1"},
            (
                "'eu-west-1'",
                "region is 'us-west-2'",
                "spec.region: eu-west-1",
                "--region us-west-2",
            ),
        ),
    ],
)
def test_a_cluster_other_than_the_profiles_is_refused(override: dict, fragments: tuple) -> None:
    """Issue 14: enrolling a cluster under another name or region than the profile's configures
    Karpenter for the wrong cluster; the check names both values and both fixes."""
    scope = replace(SCOPE, **override)
    (check,) = [r for r in RULES if r.name == "profile-names"][0].run(
        Context(good(), scope, NEEDS, True, "argocd")
    )
    assert (check.status, check.blocks) == ("fail", True)
    text = check.detail + " | " + check.fix
    assert all(f in text for f in fragments), text


def test_a_cluster_tagged_for_another_network_names_both_values() -> None:
    (check,) = judge("profile-names", replace(good(), cluster_discovery={"subnet subnet-1": "old"}))
    assert "karpenter.sh/discovery='old'" in check.detail and "'demo-net'" in check.detail
    assert "spec.networkName: old" in check.fix


def test_unread_cluster_tags_are_unknown() -> None:
    facts = replace(good(), cluster_discovery=None, cluster_discovery_error="AccessDenied")
    (check,) = judge("profile-names", facts)
    assert (check.status, check.blocks) == ("unknown", True)
    # a name that differs is still named when the tags could not be read
    rule = [r for r in RULES if r.name == "profile-names"][0]
    (check,) = rule.run(Context(facts, replace(SCOPE, cluster="blue"), NEEDS, True, "argocd"))
    assert check.status == "fail" and "'blue'" in check.detail


def test_severity_is_the_tables_and_advisory_never_blocks() -> None:
    """Issue 14: root-volume was documented advisory and blocked. Every evaluated check now
    carries its rule's severity, and an advisory rule's failure only warns."""
    for name, (breaker, _) in BROKEN.items():
        facts = breaker(good())
        (entry,) = [r for r in RULES if r.name == name]
        for check in evaluate(facts, SCOPE, NEEDS, True, "argocd"):
            if check.name == name and check.status != "skipped":
                assert check.severity == entry.severity, name
                if entry.severity == "advisory":
                    assert not check.blocks, name
    (volume,) = [
        c
        for c in evaluate(replace(good(), live_gpu_volume_gib=50), SCOPE, NEEDS, True, "argocd")
        if c.name == "root-volume"
    ]
    assert (volume.status, volume.severity, volume.blocks) == ("warn", "advisory", False)


def test_every_rule_documents_element_call_fix_and_why() -> None:
    for entry in RULES:
        assert all((entry.element, entry.call, entry.fix, entry.why, entry.summary)), entry.name


def test_contract_doc_is_generated_from_the_table() -> None:
    """docs/contract.md's check table is `rules.markdown()` byte for byte (regenerate with
    `eksinf enroll cluster --list-checks --markdown`)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "contract.md").read_text()
    begin, end = "<!-- checks:begin (generated) -->\n", "<!-- checks:end -->"
    assert begin in doc and end in doc
    assert doc.split(begin, 1)[1].split(end, 1)[0] == markdown()


def test_an_irsa_trust_naming_the_old_issuer_is_named() -> None:
    """Issue 14 (live): a recreated cluster has a new issuer; the trust still names the old one."""
    facts = replace(good(), irsa_trusts=[IrsaTrust("ns/sa", "reader", irsa_trust_doc(OLD))])
    (check,) = judge("irsa-trust", facts)
    assert check.status == "fail" and OLD in check.detail and CURRENT in check.fix
    assert check.detail == (
        f"ns/sa -> reader: the trust does not admit system:serviceaccount:ns:sa from {CURRENT} "
        f"(it names {OLD})"
    )
    wildcard = irsa_trust_doc(CURRENT, "system:serviceaccount:*:sa")
    wildcard["Statement"][0]["Condition"] = {
        "StringLike": {f"{CURRENT}:sub": "system:serviceaccount:*:sa"}
    }
    (check,) = judge("irsa-trust", replace(good(), irsa_trusts=[IrsaTrust("ns/sa", "r", wildcard)]))
    assert check.status == "pass", check.detail
    other = irsa_trust_doc(CURRENT, "system:serviceaccount:other:sa")
    (check,) = judge("irsa-trust", replace(good(), irsa_trusts=[IrsaTrust("ns/sa", "r", other)]))
    assert check.status == "fail" and "does not admit system:serviceaccount:ns:sa" in check.detail
    unread = IrsaTrust("ns/sa", "r", None, "AccessDenied")
    (check,) = judge("irsa-trust", replace(good(), irsa_trusts=[unread]))
    assert (check.status, check.blocks) == ("unknown", True)


def test_addon_drift_names_the_exact_difference_and_the_command() -> None:
    """Issue 14: add-on drift was unguarded. Live, the installed add-on (eks:DescribeAddon
    addonVersion, configurationValues) is compared with its unit, field by field."""
    facts = replace(
        good(),
        installed_addons={
            "eks-pod-identity-agent": {
                "addonVersion": "v1.3.4-eksbuild.1",
                "configurationValues": '{"tolerations": []}',
            }
        },
    )
    (check,) = judge("addon-drift", facts)
    assert (check.status, check.blocks) == ("warn", False)
    assert check.detail == (
        "eks-pod-identity-agent: addonVersion v1.3.4-eksbuild.1 on the cluster, "
        'v1.3.10-eksbuild.2 in the unit; configurationValues {"tolerations": []} on the '
        "cluster, (none) in the unit"
    )
    assert (
        "`aws eks update-addon --cluster-name demo --addon-name eks-pod-identity-agent "
        "--addon-version v1.3.10-eksbuild.2 --resolve-conflicts OVERWRITE`" in check.fix
    )
    same = replace(
        good(),
        installed_addons={"eks-pod-identity-agent": {"addonVersion": "v1.3.10-eksbuild.2"}},
    )
    (check,) = judge("addon-drift", same)
    assert check.status == "pass"  # no values and "{}" say the same: defaults
    # the values go into the command quoted for a shell, even with a quote inside
    values = '{"env": {"NOTE": "it\'s"}}'
    quoted = replace(
        NEEDS, addons=(AddonNeed("eks-pod-identity-agent", "v1.3.10-eksbuild.2", values),)
    )
    (check,) = judge("addon-drift", facts, quoted)
    command = check.fix.split("`")[1]
    assert shlex.split(command)[-4:] == [
        "--configuration-values",
        values,
        "--resolve-conflicts",
        "OVERWRITE",
    ]


def test_an_association_to_another_role_names_both_roles() -> None:
    """Issue 14: nothing checked that the role behind the Pod Identity association is the
    stack's (the profile's karpenterRoleName), live."""
    breaker, _ = BROKEN["pod-identity-role"]
    (check,) = judge("pod-identity-role", breaker(good()))
    assert check.detail == (
        "kube-system/karpenter uses role other (arn:aws:iam::1:role/other), the stack names k"
    )
    assert "--role-arn arn:aws:iam::1:role/k" in check.fix and check.blocks


def test_the_byo_association_fix_is_a_command_for_a_cluster_without_an_ack_cluster() -> None:
    """Issue 14: for a bring-your-own cluster the fix said "deploy the karpenter-aws
    component", whose association referenced an ACK Cluster the cluster does not have."""
    from eksinf.model.targets import KINDS

    facts = replace(good(), associations=[])
    (entry,) = [r for r in RULES if r.name == "pod-identity-associations"]
    byo = Context(facts, SCOPE, NEEDS, True, "argocd", kind=KINDS["eks-byo"])
    (check,) = entry.run(byo)
    assert "`eksinf target add mgmt --plane mgmt --kind eks-byo --kubeconfig FILE`" in check.fix
    assert "`eksinf deploy --plane mgmt --target mgmt/target`" in check.fix
    (plain,) = judge("pod-identity-associations", facts)
    assert "--kind eks-byo" in plain.fix  # an eks-kind enroll points at the BYO path too


def test_a_kind_is_judged_by_the_rules_of_its_capacity_source():
    """Target kinds carry their behaviour: two kinds with one capacity source are judged by the
    same rules, and every HyperPod rule judges exactly the kinds whose nodes are instance groups."""
    from eksinf.aws.contract.rules import RULES, rules_for
    from eksinf.model.targets import HYPERPOD_GROUPS, KARPENTER, KINDS, kinds_with

    by_source: dict[str, set[tuple[str, ...]]] = {}
    for kind in KINDS.values():
        by_source.setdefault(kind.capacity, set()).add(tuple(r.name for r in rules_for(kind.name)))
    assert set(by_source) == {KARPENTER, HYPERPOD_GROUPS}
    assert all(len(tables) == 1 for tables in by_source.values()), by_source
    karpenter, hyperpod = (next(iter(by_source[s])) for s in (KARPENTER, HYPERPOD_GROUPS))
    karpenter_elements = {"discovery-tags", "node-role", "gpu-ami"}  # what Karpenter's nodes need
    assert karpenter_elements <= set(karpenter) and not karpenter_elements & set(hyperpod)
    hyperpod_only = [r for r in RULES if set(r.kinds) == set(kinds_with(HYPERPOD_GROUPS))]
    assert hyperpod_only and all(r.name in hyperpod for r in hyperpod_only)
