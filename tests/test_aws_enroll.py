"""`eksinf enroll` against moto, with two documented stand-ins (see tests/aws_stubs.py):
EKS add-ons, access entries and Pod Identity associations come from `EksExtrasFake` (moto
lacks them), and the cluster's Kubernetes API is `FakeKubeApi`. The public EKS AMI SSM
parameter, which AWS owns and moto refuses to let a caller write, is seeded into moto's own
SSM backend; the lookup itself still goes over HTTP through the session factory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import urllib.parse
from pathlib import Path

import kubernetes_validate
import pytest
import requests
import yaml
from aws_stubs import CapacityReservationsFake, EksExtrasFake, FakeKubeApi

from eksinf.aws import contract, enroll
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.core.yamlio import load_docs
from eksinf.hub import open_hub
from eksinf.model.profile import STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack

ACCOUNT = "123456789012"
CALLER = "arn:aws:sts::123456789012:user/moto"  # moto's caller identity
ARGOCD = "/apis/apps/v1/namespaces/argocd/deployments/argocd-server"


@pytest.fixture
def scope(stack_dir) -> StackScope:
    return StackScope.from_profile(load_profile(load_stack(stack_dir)), STACK_TAG_KEY)


def seed_ami(scope: StackScope, version: str) -> None:
    from moto.ssm.models import Parameter, ssm_backends

    name, _ = contract.ami_parameter(scope.gpu_ami_alias, version)
    ssm_backends[ACCOUNT][scope.region]._parameters[name].append(
        Parameter(
            account_id=ACCOUNT,
            name=name,
            value="ami-0gpu",
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=dt.datetime.now(dt.UTC),
            version=1,
            data_type="text",
        )
    )


def seed_cluster(scope: StackScope, tagged: bool = True) -> None:
    session = AwsSession(AwsIdentity.resolve(scope.region))
    ec2, iam, eks = session.client("ec2"), session.client("iam"), session.client("eks")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    tags = [{"Key": "karpenter.sh/discovery", "Value": scope.network}] if tagged else []
    spec = [{"ResourceType": "subnet", "Tags": tags}] if tags else []
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=spec)[
            "Subnet"
        ]["SubnetId"]
        for cidr, zone in [("10.42.64.0/20", "us-west-2a"), ("10.42.80.0/20", "us-west-2b")]
    ]
    sg_spec = [{"ResourceType": "security-group", "Tags": tags}] if tags else []
    ec2.create_security_group(
        GroupName="cluster-sg", Description="d", VpcId=vpc, TagSpecifications=sg_spec
    )
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    iam.create_role(RoleName=scope.node_role, AssumeRolePolicyDocument=json.dumps(trust))
    eks.create_cluster(
        name=scope.cluster,
        version="1.33",
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/cluster",
        resourcesVpcConfig={"subnetIds": subnets},
    )
    seed_ami(scope, "1.33")


@pytest.fixture
def kube(tmp_path):
    with FakeKubeApi(token="t0k") as api:
        api.put(
            ARGOCD,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "argocd-server", "namespace": "argocd"},
                "spec": {
                    "template": {
                        "spec": {"containers": [{"image": "quay.io/argoproj/argocd:v3.4.5"}]}
                    }
                },
            },
        )
        api.config = api.kubeconfig(tmp_path / "given.kubeconfig")
        yield api


def seed_pod_role(scope: StackScope, actions: list[str], name: str = "") -> str:
    """A real (moto) IAM role whose trust lets the Pod Identity agent do `actions`; named
    the profile's karpenterRoleName unless `name` is given."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": actions,
            }
        ],
    }
    iam = AwsSession(AwsIdentity.resolve(scope.region)).client("iam")
    return iam.create_role(
        RoleName=name or scope.karpenter_role, AssumeRolePolicyDocument=json.dumps(trust)
    )["Role"]["Arn"]


def karpenter_association(role_arn: str) -> dict[str, str]:
    return {"namespace": "kube-system", "serviceAccount": "karpenter", "roleArn": role_arn}


def conforming_extras(scope: StackScope, monkeypatch) -> EksExtrasFake:
    role = seed_pod_role(scope, ["sts:AssumeRole", "sts:TagSession"])
    fake = EksExtrasFake(
        addons={scope.cluster: {"eks-pod-identity-agent": "ACTIVE"}},
        access_entries={scope.cluster: [CALLER]},
        policies={(scope.cluster, CALLER): [(contract.ADMIN_POLICY, "cluster")]},
        associations={scope.cluster: [karpenter_association(role)]},
    )
    return fake.install(monkeypatch)


def test_cluster_missing_three_elements_prints_exactly_three_lines(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope, tagged=False)
    role = seed_pod_role(scope, ["sts:AssumeRole", "sts:TagSession"])
    EksExtrasFake(associations={scope.cluster: [karpenter_association(role)]}).install(monkeypatch)
    result = eksinf(
        "enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config), cwd=stack_dir
    )
    assert result.code == 3, result.err
    missing = [ln for ln in result.out.splitlines() if ln.startswith("cluster is missing")]
    assert len(missing) == 3, result.out
    assert "an access entry for " + CALLER in missing[0]
    assert "eks-pod-identity-agent add-on" in missing[1]
    assert f"karpenter.sh/discovery={scope.network} tag" in missing[2]
    fixes = [ln for ln in result.out.splitlines() if ln.startswith("  fix: ")]
    assert len(fixes) == 3
    assert "--grant-access" in fixes[0] and "aws eks create-addon" in fixes[1]
    assert "401" in result.out  # the access-entry line explains the 401
    assert not [m for m, _ in kube.log if m != "GET"]  # nothing was wired
    assert not (stack_dir / ".eksinf" / "hub.db").exists()
    assert not (stack_dir / ".eksinf" / "targets" / "prod.json").exists()


def test_conforming_cluster_passes_and_is_wired_idempotently(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    args = ("enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config), "--json")
    first = eksinf(*args, cwd=stack_dir)
    assert first.code == 0, first.err
    report = json.loads(first.out)
    assert report["conforms"] and report["violations"] == []
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["gpu-ami"] == "pass" and statuses["discovery-tags"] == "pass"
    assert statuses["pod-identity-trust"] == "pass"
    trust = next(c for c in report["checks"] if c["name"] == "pod-identity-trust")
    assert "kube-system/karpenter -> arn:aws:iam::" in trust["detail"]
    assert "iam:GetRole" in trust["call"]
    assert statuses["capacity-reservation"] in ("warn", "unknown")  # advisory only
    app_path = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/prod-argo-apps"
    app = kube.objects[app_path]
    assert app["spec"]["source"]["repoURL"].endswith("/space/prod-argo-apps")
    hub = open_hub(stack_dir)
    assert hub.get_target("prod/target").registry
    root_unit = load_docs(hub.unit_data("prod-argo-apps", "root"))[0]
    assert root_unit["spec"] == app["spec"]  # the cluster got exactly the hub's unit
    assert report["wiring"]["server"] == kube.url
    assert report["wiring"]["kind"] == "eks" and hub.get_space("prod").labels["TargetKind"] == "eks"
    revisions = len(hub.history("prod-argo-apps", "root"))
    kubeconfig = stack_dir / ".eksinf" / "clusters" / "prod.kubeconfig"
    assert kubeconfig.stat().st_mode & 0o077 == 0
    before = (kubeconfig.read_bytes(), json.dumps(kube.objects, sort_keys=True))
    second = eksinf(*args, cwd=stack_dir)
    assert second.code == 0, second.err
    assert (kubeconfig.read_bytes(), json.dumps(kube.objects, sort_keys=True)) == before
    assert len(hub.history("prod-argo-apps", "root")) == revisions


def test_grant_access_creates_the_entry(eksinf, stack_dir, scope, kube, monkeypatch, aws_env):
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    fake.access_entries[scope.cluster] = []
    result = eksinf(
        "enroll",
        "cluster",
        "--name",
        "prod",
        "--kubeconfig",
        str(kube.config),
        "--grant-access",
        cwd=stack_dir,
    )
    assert result.code == 0, result.err
    assert fake.access_entries[scope.cluster] == [CALLER]
    assert fake.policies[(scope.cluster, CALLER)] == [(contract.ADMIN_POLICY, "cluster")]


def test_entry_without_policy_is_one_missing_line_and_grant_adds_only_the_policy(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    """Issue 14: the entry exists, no access policy is associated, so the API answers 403 to
    everything but /version. enroll names the access policy (not "install Argo CD");
    --grant-access then associates the policy and creates no second entry."""
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    fake.policies.clear()
    kube.forbidden = True
    args = ("enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config))
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == 3, result.err
    missing = [ln for ln in result.out.splitlines() if ln.startswith("cluster ")]
    assert len(missing) == 1, result.out
    assert "access policy AmazonEKSClusterAdminPolicy" in missing[0]
    assert "associate-access-policy" in result.out and "install Argo CD" not in result.out
    fake.on_associate.append(lambda *_: setattr(kube, "forbidden", False))
    granted = eksinf(*args, "--grant-access", cwd=stack_dir)
    assert granted.code == 0, granted.out + granted.err
    assert fake.access_entries[scope.cluster] == [CALLER]
    assert fake.policies[(scope.cluster, CALLER)] == [(contract.ADMIN_POLICY, "cluster")]


def test_cluster_under_another_name_than_the_profile_is_refused(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    """Issue 14: a conforming cluster enrolled with --eks-cluster other than the profile's
    clusterName was wired, and Karpenter then ran with the profile's CLUSTER_NAME."""
    blue = dataclasses.replace(scope, cluster="blue")
    seed_cluster(blue)
    conforming_extras(blue, monkeypatch)
    result = eksinf(
        "enroll", "cluster", "--name", "prod", "--eks-cluster", "blue",
        "--kubeconfig", str(kube.config), cwd=stack_dir,
    )  # fmt: skip
    assert result.code == 3, result.out + result.err
    assert f"enrolling EKS cluster 'blue' but the profile's clusterName is '{scope.cluster}'" in (
        result.out
    )
    assert f"--eks-cluster {scope.cluster}" in result.out and "spec.clusterName: blue" in result.out
    assert not [m for m, _ in kube.log if m != "GET"]  # nothing was wired


def test_cluster_tagged_for_another_network_names_both_values(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(dataclasses.replace(scope, network="old-net"))
    conforming_extras(scope, monkeypatch)
    result = eksinf(
        "enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config), cwd=stack_dir
    )
    assert result.code == 3, result.out + result.err
    assert "karpenter.sh/discovery='old-net'" in result.out
    assert f"networkName is '{scope.network}'" in result.out
    assert "spec.networkName: old-net" in result.out


def test_absent_cluster_is_one_missing_line(eksinf, stack_dir, scope, monkeypatch, aws_env):
    result = eksinf("enroll", "cluster", "--name", "prod", cwd=stack_dir)
    assert result.code == 3
    assert f"cluster is missing EKS cluster {scope.cluster} in {scope.region}" in result.out


def test_enroll_remove_orphans_workloads(eksinf, stack_dir, scope, kube, monkeypatch, aws_env):
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    args = ("enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config))
    assert eksinf(*args, cwd=stack_dir).code == 0
    plan = eksinf("enroll", "remove", "--name", "prod", cwd=stack_dir)
    assert plan.code == 0 and "nothing changed" in plan.err
    removed = eksinf("enroll", "remove", "--name", "prod", "--yes", cwd=stack_dir)
    assert removed.code == 0, removed.err
    app_path = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/prod-argo-apps"
    assert (app_path, "Orphan") in kube.deletes
    assert open_hub(stack_dir).space_exists("prod")  # kept without --delete-spaces
    again = eksinf("enroll", "remove", "--name", "prod", "--delete-spaces", "--yes", cwd=stack_dir)
    assert again.code == 0, again.err
    assert not open_hub(stack_dir).space_exists("prod")
    assert not open_hub(stack_dir).space_exists("prod-argo-apps")


def test_wiring_manifests_are_schema_valid():
    secret = enroll.repo_creds_secret("prod", "ghcr.io/x", "u", "p", "argocd")
    kubernetes_validate.validate(secret, "1.31.0", strict=True)
    app = enroll.root_application("prod", "ghcr.io/x", "argocd")
    enroll.check_application(app)
    broken = json.loads(json.dumps(app))
    broken["spec"]["syncPolicy"]["automated"]["selfheal"] = True  # a typo Argo would ignore
    with pytest.raises(Exception, match="selfheal"):
        enroll.check_application(broken)


def test_stack_needs_come_from_configs(stack_dir):
    needs = contract.stack_needs(stack_dir / "configs")
    assert ("kube-system", "karpenter") in needs.pod_identities
    assert "h200" in needs.reserved_pools
    assert [(a.name, a.version) for a in needs.addons] == [("eks-pod-identity-agent", None)]
    assert needs.association_role_names == ()  # placeholders until the profile is linked in
    stack = load_stack(stack_dir)
    spec = load_profile(stack).spec
    shipped = contract.needs_for(stack)
    assert [(a.name, a.version, a.values) for a in shipped.addons] == [
        ("eks-pod-identity-agent", spec["addonVersions"]["eks-pod-identity-agent"], None)
    ]
    assert shipped.association_role_names == (("kube-system/karpenter", spec["karpenterRoleName"]),)


def test_installed_addon_drift_is_warned_with_the_exact_difference(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    """Issue 14: enroll compares the cluster's add-ons (eks:DescribeAddon; moto lacks it, so
    EksExtrasFake answers in botocore's DescribeAddon shape) with the units. Advisory: it warns
    with the difference and the command, and does not block."""
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    fake.addon_fields[(scope.cluster, "eks-pod-identity-agent")] = {
        "addonVersion": "v1.3.4-eksbuild.1",
        "configurationValues": '{"agent": {"additionalArgs": {"-b": "169.254.170.23"}}}',
    }
    args = ("enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config), "--json")
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["conforms"] and "addon-drift" in report["warnings"]
    check = next(c for c in report["checks"] if c["name"] == "addon-drift")
    assert check["detail"] == (
        "eks-pod-identity-agent: addonVersion v1.3.4-eksbuild.1 on the cluster, "
        "v1.3.10-eksbuild.2 in the unit; configurationValues "
        '{"agent": {"additionalArgs": {"-b": "169.254.170.23"}}} on the cluster, (none) in the unit'
    )
    assert "aws eks update-addon --cluster-name" in check["fix"]
    assert "warning: addon-drift" in result.err


def test_association_to_a_role_other_than_the_profiles_is_missing(
    eksinf, stack_dir, scope, monkeypatch, aws_env
):
    """Issue 14: the role behind the Pod Identity association was never checked against the
    profile's karpenterRoleName."""
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    other = seed_pod_role(scope, ["sts:AssumeRole", "sts:TagSession"], name="someone-elses")
    fake.associations[scope.cluster] = [karpenter_association(other)]
    result = eksinf("enroll", "cluster", "--name", "prod", "--json", cwd=stack_dir)
    assert result.code == 3
    check = next(c for c in json.loads(result.out)["checks"] if c["name"] == "pod-identity-role")
    assert check["status"] == "fail"
    assert check["detail"] == (
        f"kube-system/karpenter uses role someone-elses ({other}), the stack names "
        f"{scope.karpenter_role}"
    )


def test_principal_of_an_assumed_role_is_its_role():
    from eksinf.aws.session import principal_arn

    arn = "arn:aws:sts::111122223333:assumed-role/Admin/alice"
    assert principal_arn(arn) == "arn:aws:iam::111122223333:role/Admin"
    assert principal_arn(CALLER) == CALLER


def test_written_kubeconfig_pins_the_commands_identity(tmp_path, monkeypatch):
    from eksinf.kube.client import eks_kubeconfig, read_kubeconfig, write_kubeconfig

    monkeypatch.setenv("AWS_PROFILE", "ops")
    identity = AwsIdentity.resolve("eu-west-1")
    monkeypatch.setenv("AWS_PROFILE", "someone-else")  # later ambient changes do not leak in
    config = eks_kubeconfig("prod", "https://127.0.0.1:6443", "", "c1", identity)
    path = tmp_path / "prod.kubeconfig"
    write_kubeconfig(path, config)
    user = config["users"][0]["user"]["exec"]
    assert user["env"] == [
        {"name": "AWS_PROFILE", "value": "ops"},
        {"name": "AWS_REGION", "value": "eu-west-1"},
    ]
    assert user["args"][-2:] == ["--profile", "ops"] and "c1" in user["args"]
    assert read_kubeconfig(path).eks_cluster == "c1"  # eksinf signs its own token for it
    assert path.stat().st_mode & 0o777 == 0o600


def test_association_role_without_tag_session_is_missing(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    role = seed_pod_role(scope, ["sts:AssumeRole"], name="assume-only")
    fake.associations[scope.cluster] = [karpenter_association(role)]
    result = eksinf(
        "enroll", "cluster", "--name", "prod", "--kubeconfig", str(kube.config), cwd=stack_dir
    )
    assert result.code == 3, result.err
    lines = result.out.splitlines()
    (missing,) = [ln for ln in lines if ln.startswith("cluster is missing a role trusting")]
    assert f"kube-system/karpenter -> {role}" in missing and "with sts:TagSession" in missing
    fix = lines[lines.index(missing) + 1]
    assert fix.startswith("  fix: ") and "assume-only" in fix and "sts:TagSession" in fix
    assert not [m for m, _ in kube.log if m != "GET"]  # nothing was wired


def test_association_naming_an_absent_role_is_missing(
    eksinf, stack_dir, scope, monkeypatch, aws_env
):
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    gone = f"arn:aws:iam::{ACCOUNT}:role/deleted-role"
    fake.associations[scope.cluster] = [karpenter_association(gone)]
    result = eksinf("enroll", "cluster", "--name", "prod", "--json", cwd=stack_dir)
    assert result.code == 3
    check = next(c for c in json.loads(result.out)["checks"] if c["name"] == "pod-identity-trust")
    assert check["status"] == "fail" and "deleted-role: no such role" in check["detail"]


def test_trusted_actions_reads_encoded_documents_and_wildcards():
    doc = {
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "*"},
            {
                "Effect": "Allow",
                "Principal": {"Service": ["pods.eks.amazonaws.com"]},
                "Action": "sts:AssumeRole",
            },
        ]
    }
    assert contract.trusted_actions(doc, "pods.eks.amazonaws.com") == ("sts:AssumeRole",)
    encoded = urllib.parse.quote(json.dumps(doc))
    assert contract.trusted_actions(encoded, "ec2.amazonaws.com") == (
        "sts:AssumeRole",
        "sts:TagSession",
    )


def capacity_check(eksinf, stack_dir, kube) -> tuple[object, dict]:
    result = eksinf(
        "enroll",
        "cluster",
        "--name",
        "prod",
        "--kubeconfig",
        str(kube.config),
        "--json",
        cwd=stack_dir,
    )
    report = json.loads(result.out)
    return result, next(c for c in report["checks"] if c["name"] == "capacity-reservation")


def test_h200_reservation_tagged_for_the_stack_passes(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    fake = CapacityReservationsFake().install(monkeypatch)  # moto lacks the call
    fake.add("cr-other", {STACK_TAG_KEY: "other-stack"})
    fake.add("cr-expired", {STACK_TAG_KEY: scope.stack}, state="expired")
    fake.add("cr-ours", {STACK_TAG_KEY: scope.stack})
    result, check = capacity_check(eksinf, stack_dir, kube)
    assert result.code == 0, result.err
    assert "h200" in check["element"]  # the reserved-only pool, read from configs/
    assert (check["status"], check["detail"], check["fix"]) == ("pass", "cr-ours", "")
    assert "capacity-reservation" not in result.err
    assert fake.calls  # the contract asked, through the session's EC2 client


def test_h200_without_a_reservation_warns_with_a_fix(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    fake = CapacityReservationsFake().install(monkeypatch)
    fake.add("cr-other", {STACK_TAG_KEY: "other-stack"})  # another stack's does not count
    result, check = capacity_check(eksinf, stack_dir, kube)
    assert result.code == 0, result.err  # advisory (docs/contract.md): the pool stays idle
    assert check["status"] == "warn" and check["severity"] == "advisory"
    assert "pool h200 will not launch nodes" in check["detail"]
    assert f"tag an ODCR or Capacity Block {STACK_TAG_KEY}={scope.stack}" in check["fix"]
    assert "warning: capacity-reservation: none: pool h200" in result.err
    assert "(fix: tag an ODCR" in result.err


def test_capacity_reservation_query_failing_is_unknown(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env
):
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    CapacityReservationsFake(failure="UnauthorizedOperation").install(monkeypatch)
    result, check = capacity_check(eksinf, stack_dir, kube)
    assert result.code == 0, result.err
    assert check["status"] == "unknown" and check["detail"]
    assert "warning: capacity-reservation:" in result.err


def test_enroll_installs_argocd_when_absent_and_refuses_one_below_the_floor(
    eksinf, stack_dir, scope, monkeypatch, aws_env, kube_plane, tmp_path
):
    """The cluster is the real kube-apiserver (`kube_plane`, namespace argo-enroll of its own).
    It runs no pods: the first enroll installs the pinned Argo CD and says, exit 4, why it is
    not Available; the test then plays the Deployment controller (the Available condition
    written to the status subresource) and the next enroll finds it and converges."""
    from eksinf.kube.client import KubeClient, parse_kubeconfig, resource_path

    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    ns = "argo-enroll"
    given = tmp_path / "given.kubeconfig"
    given.write_text(yaml.safe_dump(kube_plane.kubeconfig()))
    args = ("enroll", "cluster", "--name", "prod", "--kubeconfig", str(given),
            "--argocd-namespace", ns, "--json")  # fmt: skip
    no_argo = eksinf(*args, "--no-argocd", cwd=stack_dir)
    assert no_argo.code == 3 and "argocd-server not found" in no_argo.out
    first = eksinf(*args, "--argocd-timeout", "0", cwd=stack_dir)
    assert first.code == 4, first.err
    assert f"argocd-server in {ns} not Available after 0 s: the cluster has no nodes" in first.out
    kube = KubeClient.from_auth(parse_kubeconfig(kube_plane.kubeconfig(), Path("."), "plane"))
    crd = "applications.argoproj.io"
    assert kube.get(resource_path("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, crd))
    server = resource_path("apps/v1", "Deployment", ns, "argocd-server")
    resp = requests.patch(
        f"{kube.server}{kube.path(server)}/status",
        json={"status": {"conditions": [{"type": "Available", "status": "True"}]}},
        headers={"Content-Type": "application/merge-patch+json",
                 "Authorization": f"Bearer {kube_plane.admin_token}"},
        verify=str(kube_plane.ca_file), timeout=10,
    )  # fmt: skip
    assert resp.status_code == 200, resp.text
    second = eksinf(*args, cwd=stack_dir)
    assert second.code == 0, second.err
    wiring = json.loads(second.out)["wiring"]
    assert (wiring["argocd"]["action"], wiring["argocd"]["image"]) == (
        "present",
        "quay.io/argoproj/argocd:v3.4.7",  # the pinned one, read back from the server
    )
    assert wiring["applied"] == [f"Application {ns}/prod-argo-apps"]
    kube.patch(server, {"spec": {"template": {"spec": {"containers": [
        {"name": "argocd-server", "image": "quay.io/argoproj/argocd:v3.0.6"}]}}}})  # fmt: skip
    below = eksinf(*args, cwd=stack_dir)
    assert below.code == 3 and "argocd-v3.0.6" not in below.out
    assert "quay.io/argoproj/argocd:v3.0.6" in below.out


def test_byo_cluster_fix_is_a_command_that_deploys_the_identity_without_an_ack_cluster(
    eksinf, stack_dir, scope, kube, monkeypatch, aws_env, tmp_path
):
    """Issue 14, BYO: a bring-your-own cluster has no ACK `Cluster` for karpenter-aws's
    association to reference (`clusterRef`). Enrolled with `--kind eks-byo`, the missing
    association's fix is a command; following it deploys the mgmt plane to a target of that
    kind, where the association names the cluster (`clusterName`, the ACK eks-controller
    PodIdentityAssociation field that takes a name) and no unit creates a network or a cluster.
    ACK itself is not running here: the association it would create is added to the fake."""
    seed_cluster(scope)
    fake = conforming_extras(scope, monkeypatch)
    made = fake.associations.pop(scope.cluster)
    args = (
        "enroll",
        "cluster",
        "--name",
        "prod",
        "--kind",
        "eks-byo",
        "--kubeconfig",
        str(kube.config),
    )
    refused = eksinf(*args, cwd=stack_dir)
    assert refused.code == 3, refused.err
    fix = next(ln for ln in refused.out.splitlines() if "--kind eks-byo" in ln)
    add_cmd, deploy_cmd = re.findall(r"`(eksinf [^`]+)`", fix)
    assert add_cmd == "eksinf target add mgmt --plane mgmt --kind eks-byo --kubeconfig FILE"
    assert deploy_cmd == "eksinf deploy --plane mgmt --target mgmt/target"

    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    with FakeKubeApi(token="m") as mgmt:
        mgmt.put(ARGOCD, kube.objects[ARGOCD])
        # the controllers' credentials, as `eksinf creds use-existing` writes them: the mgmt
        # deploy refuses without them
        mgmt.put(
            "/api/v1/namespaces/ack-system/secrets/aws-creds",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-creds"}, "data": {}},
        )
        given = mgmt.kubeconfig(tmp_path / "mgmt.kubeconfig")
        added = eksinf(
            *add_cmd.split()[1:-1],
            str(given),
            "--no-argocd",
            "--json",
            "--oci-registry",
            f"oci-layout:{tmp_path / 'oci'}",
            cwd=stack_dir,
        )
        assert added.code == 0, added.err
        assert json.loads(added.out)["kind"] == "eks-byo"
        deployed = eksinf(*deploy_cmd.split()[1:], "--no-sync", "--json", cwd=stack_dir)
    assert deployed.code == 0, deployed.err
    body = json.loads(deployed.out)
    assert body["kind"] == "eks-byo"
    assert sorted(body["created"]) == ["ack-controllers-dev", "argocd-dev", "karpenter-aws-dev"]
    assert body["byName"] == ["karpenter-aws-dev/controller-identity"]
    hub = open_hub(stack_dir)
    shipped = [
        d
        for space in body["created"]
        for u in hub.list_units(space)
        for d in load_docs(hub.unit_data(space, u.slug))
        if isinstance(d, dict)
    ]
    assert not [d for d in shipped if d.get("kind") == "Cluster"]
    (assoc,) = [d for d in shipped if d.get("kind") == "PodIdentityAssociation"]
    assert assoc["spec"]["clusterName"] == scope.cluster and "clusterRef" not in assoc["spec"]
    assert [
        d["spec"]["name"] for d in shipped if d.get("apiVersion", "").startswith("iam.services")
    ] == [
        load_profile(load_stack(stack_dir)).spec["karpenterRoleName"]
    ]  # linked from the profile as on an eks target
    again = eksinf(*deploy_cmd.split()[1:], "--no-sync", "--json", cwd=stack_dir)
    assert again.code == 0 and json.loads(again.out)["byName"] == []  # idempotent

    fake.associations[scope.cluster] = made  # what ACK creates from that unit
    enrolled = eksinf(*args, "--json", cwd=stack_dir)
    assert enrolled.code == 0, enrolled.err
    assert json.loads(enrolled.out)["wiring"]["kind"] == "eks-byo"
    assert hub.get_space("prod").labels["TargetKind"] == "eks-byo"


def test_addon_schemas_refresh_records_describe_addon_configuration(
    eksinf, stack_dir, scope, monkeypatch, aws_env, tmp_path
):
    """`eksinf addon-schemas refresh` asks eks:DescribeAddonConfiguration (moto lacks it:
    EksExtrasFake answers in botocore's shape, with a stand-in schema that is no add-on's
    real one) for the version each Addon unit pins, and merges the answer into the record that
    lint reads; --dry-run writes nothing, a second run changes nothing."""
    from eksinf.model.addons import RECORD, load_records

    version = load_profile(load_stack(stack_dir)).spec["addonVersions"]["eks-pod-identity-agent"]
    stand_in = '{"$schema":"http://json-schema.org/draft-06/schema#","type":"object"}'
    fake = EksExtrasFake(addon_schemas={("eks-pod-identity-agent", version): stand_in})
    fake.install(monkeypatch)
    record = tmp_path / "addon-schemas.json"
    record.write_bytes(RECORD.read_bytes())
    args = ("addon-schemas", "refresh", "--record", str(record), "--json")
    dry = eksinf(*args, "--dry-run", cwd=stack_dir)
    assert dry.code == 0, dry.err
    assert json.loads(dry.out)["added"] == [f"eks-pod-identity-agent {version}"]
    assert record.read_bytes() == RECORD.read_bytes()
    done = eksinf(*args, cwd=stack_dir)
    assert done.code == 0 and json.loads(done.out)["written"], done.err
    got = load_records(record)[("eks-pod-identity-agent", version)]
    assert (
        got.schema == stand_in and got.source == f"eks:DescribeAddonConfiguration in {scope.region}"
    )
    assert set(load_records(record)) == set(load_records(RECORD)) | {
        ("eks-pod-identity-agent", version)
    }
    assert fake.calls.count("describe_addon_configuration") == 2
    again = eksinf(*args, cwd=stack_dir)
    assert json.loads(again.out) == {
        "added": [], "changed": [], "unchanged": [f"eks-pod-identity-agent {version}"],
        "record": str(record), "written": False,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("token", "status", "element"),
    [("no-rights", 403, "Argo CD 3.1+"), ("unknown", 401, "a reachable API endpoint")],
    ids=["403", "401"],
)
def test_enroll_diagnoses_401_and_403_from_the_real_server(
    eksinf, stack_dir, scope, monkeypatch, aws_env, kube_plane, tmp_path, token, status, element
):
    """The real kube-apiserver's own answers (a user with no RBAC bindings, a token it does not
    know), with every AWS element conforming: what the refused identity could not read is
    "could not check", never "missing", and nothing is wired (exit 3)."""
    seed_cluster(scope)
    conforming_extras(scope, monkeypatch)
    bearer = kube_plane.no_rights_token if token == "no-rights" else "a-token-it-does-not-know"
    given = tmp_path / "given.kubeconfig"
    given.write_text(yaml.safe_dump(kube_plane.kubeconfig(bearer)))
    result = eksinf(
        "enroll", "cluster", "--name", "denied", "--kubeconfig", str(given),
        "--argocd-namespace", f"argo-denied-{status}", cwd=stack_dir,
    )  # fmt: skip
    assert result.code == 3, result.err
    (line,) = [ln for ln in result.out.splitlines() if ln.startswith("cluster ")]
    assert line.startswith(f"cluster may be missing (could not check) {element}")
    assert str(status) in line
    assert "FAIL" not in result.out
    assert not (stack_dir / ".eksinf" / "clusters" / "denied.kubeconfig").exists()
