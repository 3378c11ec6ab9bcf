"""`eksinf teardown` against moto; the management cluster, where needed, is `FakeKubeApi`
(tests/aws_stubs.py: no Kubernetes API server exists on these machines). IAM answers as AWS does
through `IamAsOnAws` (aws_stubs.py 4: no tags in ListInstanceProfiles*; ListInstanceProfileTags and
SimulatePrincipalPolicy, which moto lacks, stubbed in botocore's response shape)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from aws_stubs import IamAsOnAws, iam_caller_as_on_aws, odd_answers, ref_path
from safety import fingerprint
from teardown_kit import controllers_key, give_controllers, mgmt_cluster, stack_policy

from eksinf.aws import creds as creds_mod
from eksinf.aws import leftovers as lf
from eksinf.aws import teardown as td
from eksinf.aws import teardown_iam as tdi
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.model.profile import ORIGINAL_STACK_TAG_KEY, STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack

ARGO = "/apis/apps/v1/namespaces/argocd/statefulsets/argocd-application-controller"


@pytest.fixture(autouse=True)
def iam(request, monkeypatch) -> IamAsOnAws | None:
    """For AWS tests: IAM as on AWS, the caller a real moto IAM user (aws_stubs.py)."""
    if "aws_env" not in request.fixturenames:
        return None
    request.getfixturevalue("aws_env")
    return iam_caller_as_on_aws(monkeypatch)


@pytest.fixture
def scope(stack_dir) -> StackScope:
    return StackScope.from_profile(load_profile(load_stack(stack_dir)), STACK_TAG_KEY)


def session_for(scope: StackScope) -> AwsSession:
    return AwsSession(AwsIdentity.resolve(scope.region))


def seed_vpc(ec2, cidr: str, tags: dict[str, str]) -> tuple[str, str]:
    spec = [{"ResourceType": "vpc", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    vpc = ec2.create_vpc(CidrBlock=cidr, **({"TagSpecifications": spec} if tags else {}))
    vpc_id = vpc["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr.replace("0.0/16", "1.0/24"))
    return vpc_id, subnet["Subnet"]["SubnetId"]


def tag_spec(kind: str, tags: dict[str, str]) -> list[dict]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


def seed_orphans(scope: StackScope) -> dict[str, list[str]]:
    """Our VPC with the stack's detached ENIs and its cluster's EKS security group, plus things
    that must survive: in our VPC another cluster `<cluster>-blue` (whose group EKS names with our
    cluster's name as a prefix), another team's detached interface and a hand-made group; and
    another stack's VPC. Tags are the ones EKS and the VPC CNI set (moto accepts the `aws:` key,
    which on AWS only EKS itself can set)."""
    session = session_for(scope)
    ec2, iam = session.client("ec2"), session.client("iam")
    ours, subnet = seed_vpc(ec2, "10.42.0.0/16", {STACK_TAG_KEY: scope.stack})
    theirs, their_subnet = seed_vpc(ec2, "10.43.0.0/16", {STACK_TAG_KEY: "other-stack"})

    def eni(subnet_id: str, description: str = "", **tags: str) -> str:
        extra = {"TagSpecifications": tag_spec("network-interface", tags)} if tags else {}
        made = ec2.create_network_interface(SubnetId=subnet_id, Description=description, **extra)
        return made["NetworkInterface"]["NetworkInterfaceId"]

    def group(name: str, vpc: str, cluster: str | None = None) -> str:
        tags = {f"kubernetes.io/cluster/{cluster}": "owned", lf.EKS_CLUSTER_NAME_TAG: cluster}
        extra = {"TagSpecifications": tag_spec("security-group", tags)} if cluster else {}
        return ec2.create_security_group(GroupName=name, Description="x", VpcId=vpc, **extra)[
            "GroupId"
        ]

    blue = f"{scope.cluster}-blue"
    cni_eni = eni(subnet, "aws-K8S-i-0abc", **{"cluster.k8s.amazonaws.com/name": scope.cluster})
    eks_eni = eni(subnet, f"Amazon EKS {scope.cluster}")
    team_eni = eni(subnet, "team-b cache")
    blue_eni = eni(subnet, f"Amazon EKS {blue}")
    sg = group(f"eks-cluster-sg-{scope.cluster}-abc", ours, scope.cluster)
    blue_sg = group(f"eks-cluster-sg-{blue}-123", ours, blue)
    hand = group("hand-made", ours)
    their_eni = eni(their_subnet)
    their_sg = group(f"eks-cluster-sg-{scope.cluster}-zzz", theirs, scope.cluster)
    iam.create_role(RoleName=scope.node_role, AssumeRolePolicyDocument="{}")
    iam.create_instance_profile(
        InstanceProfileName=f"{scope.cluster}_1234",
        Tags=[{"Key": scope.cluster_tag, "Value": "owned"}],
    )
    iam.add_role_to_instance_profile(
        InstanceProfileName=f"{scope.cluster}_1234", RoleName=scope.node_role
    )
    iam.create_instance_profile(InstanceProfileName="someone-elses")
    return {
        "swept": [cni_eni, eks_eni, sg],
        "kept": [team_eni, blue_eni, blue_sg, hand, their_eni, their_sg],
        "listed": [team_eni, blue_eni, blue_sg, hand],
        "vpcs": [ours, theirs],
    }


def snapshot(scope: StackScope) -> str:
    session = session_for(scope)
    ec2, iam = session.client("ec2"), session.client("iam")
    state = {
        "vpcs": ec2.describe_vpcs()["Vpcs"],
        "enis": ec2.describe_network_interfaces()["NetworkInterfaces"],
        "sgs": ec2.describe_security_groups()["SecurityGroups"],
        "instances": ec2.describe_instances()["Reservations"],
        "profiles": iam.list_instance_profiles()["InstanceProfiles"],
        "addresses": ec2.describe_addresses()["Addresses"],
    }
    return json.dumps(state, sort_keys=True, default=str)


def test_without_yes_prints_the_plan_and_changes_nothing(eksinf, stack_dir, scope, aws_env):
    seed_orphans(scope)
    before = snapshot(scope)
    result = eksinf("teardown", cwd=stack_dir)
    assert result.code == 0, result.err
    assert "nothing changed; re-run with --yes" in result.err
    assert "delete" in result.out and f"{lf.EKS_CLUSTER_NAME_TAG}={scope.cluster}" in result.out
    assert "(never by name)" in result.out
    assert "now blocking a VPC delete: detached ENI eni-" in result.out
    assert snapshot(scope) == before
    as_json = eksinf("teardown", "--plane", "mgmt", "--json", cwd=stack_dir)
    body = json.loads(as_json.out)
    assert body["changed"] is False and body["current"]["blockers"]
    assert snapshot(scope) == before


def test_mgmt_sweeps_only_the_stack_vpc_and_ends_clean(eksinf, stack_dir, scope, aws_env):
    seeded = seed_orphans(scope)
    eip = session_for(scope).client("ec2").allocate_address(Domain="vpc")["PublicIp"]
    result = eksinf("teardown", "--plane", "mgmt", "--yes", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    body = json.loads(result.out)
    final = body["planes"][0]["final"]
    assert body["clean"] and final["blockers"] == [] and final["billing"] == []
    assert [e["publicIp"] for e in final["idleElasticIPs"]] == [eip]
    assert f"idle Elastic IP {eip}" in result.err
    ec2 = session_for(scope).client("ec2")
    enis = {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    sgs = {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}
    assert not (set(seeded["swept"]) & (enis | sgs))
    assert set(seeded["kept"]) <= (enis | sgs)
    profiles = [
        p["InstanceProfileName"]
        for p in session_for(scope).client("iam").list_instance_profiles()["InstanceProfiles"]
    ]
    assert profiles == ["someone-elses"]


def test_teardown_reaches_only_the_stack(eksinf, stack_dir, scope, aws_env, tmp_path):
    """cluster `<cluster>-blue` (its EKS security group is named with ours as a
    prefix) and another team's detached interface in the stack's VPC survive and are listed as
    left, with id and why, in the plan and in the result; the stack's own are deleted. The
    stack and a decoy folder are byte-identical afterwards."""
    seeded = seed_orphans(scope)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("mine\n")
    files = fingerprint(stack_dir, decoy)
    ec2 = session_for(scope).client("ec2")
    kept_before = {
        "enis": ec2.describe_network_interfaces(NetworkInterfaceIds=seeded["kept"][:2])[
            "NetworkInterfaces"
        ],
        "sgs": ec2.describe_security_groups(GroupIds=[seeded["kept"][2]])["SecurityGroups"],
    }
    blue = f"{scope.cluster}-blue"
    team_eni, blue_eni, blue_sg, hand = seeded["listed"]

    plan = eksinf("teardown", "--plane", "mgmt", cwd=stack_dir)
    assert plan.code == 0, plan.err
    left = [line for line in plan.out.splitlines() if line.startswith("left: not the stack's: ")]
    assert left == [
        f"left: not the stack's: ENI {e} ({why})"
        for e, why in sorted(
            [
                (
                    team_eni,
                    f"nothing ties it to stack {scope.stack} or cluster {scope.cluster}; "
                    "description team-b cache; requester AIDAIT2UOQQY3AUEMOTO",
                ),
                (
                    blue_eni,
                    f"nothing ties it to stack {scope.stack} or cluster {scope.cluster}; "
                    f"description Amazon EKS {blue}; requester AIDAIT2UOQQY3AUEMOTO",
                ),
            ]
        )
    ] + [
        f"left: not the stack's: security group {g} ({why})"
        for g, why in sorted(
            [
                (blue_sg, f"tagged kubernetes.io/cluster/{blue}=owned"),
                (
                    hand,
                    f"nothing ties it to stack {scope.stack} or cluster {scope.cluster}; "
                    "description x",
                ),
            ]
        )
    ]
    swept_line = next(x for x in plan.out.splitlines() if x.startswith("now blocking"))
    assert all(item in swept_line for item in seeded["swept"])
    assert not any(item in swept_line for item in seeded["kept"])

    result = eksinf("teardown", "--plane", "mgmt", "--yes", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    final = json.loads(result.out)["planes"][0]["final"]
    assert final["clean"] and final["blockers"] == []
    assert sorted(n["id"] for n in final["notTheStacks"]) == sorted(seeded["listed"])
    assert {n["id"]: n["why"] for n in final["notTheStacks"]}[blue_sg] == (
        f"tagged kubernetes.io/cluster/{blue}=owned"
    )
    enis = {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    sgs = {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}
    assert not (set(seeded["swept"]) & (enis | sgs))
    assert set(seeded["kept"]) <= (enis | sgs)
    assert kept_before == {
        "enis": ec2.describe_network_interfaces(NetworkInterfaceIds=seeded["kept"][:2])[
            "NetworkInterfaces"
        ],
        "sgs": ec2.describe_security_groups(GroupIds=[seeded["kept"][2]])["SecurityGroups"],
    }
    text = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert text.code == 0, text.err
    assert f"left: not the stack's: security group {blue_sg} (tagged" in text.out
    assert f"left: not the stack's: ENI {team_eni} (nothing ties it" in text.out
    assert fingerprint(stack_dir, decoy) == files


def test_ownership_is_exact_and_shared_is_not_owned(scope):
    """The rules themselves, on answers in EC2's shape (TagSet for interfaces, Tags for groups)."""

    def tags(**kv: str) -> list[dict[str, str]]:
        return [{"Key": k, "Value": v} for k, v in kv.items()]

    ours = {"TagSet": tags(**{"cluster.k8s.amazonaws.com/name": scope.cluster})}
    assert lf.is_stack_eni(ours, scope)
    assert lf.is_stack_eni({"Description": f"Amazon EKS {scope.cluster}"}, scope)
    assert not lf.is_stack_eni({"Description": f"Amazon EKS {scope.cluster}-blue"}, scope)
    assert not lf.is_stack_eni({"Description": f"Amazon EKS {scope.cluster}\n"}, scope)
    shared = {"TagSet": tags(**{scope.cluster_tag: "shared"})}
    assert not lf.is_stack_eni(shared, scope)
    other_stack = {
        "TagSet": tags(**{STACK_TAG_KEY: "other", "cluster.k8s.amazonaws.com/name": scope.cluster})
    }
    assert not lf.is_stack_eni(other_stack, scope)
    assert lf.not_ours_why(other_stack, scope) == f"tagged {STACK_TAG_KEY}=other"
    odd = {"TagSet": [{"Value": "no key"}, "junk"], "Description": "a\nb"}
    assert not lf.is_stack_eni(odd, scope)
    assert "description 'a\\nb'" in lf.not_ours_why(odd, scope)
    assert not lf.cluster_owned(
        {f"kubernetes.io/cluster/{scope.cluster}-blue": "owned"}, scope, (lf.EKS_CLUSTER_NAME_TAG,)
    )


def test_odd_aws_answers_are_one_line_errors_and_never_guessed(
    eksinf, stack_dir, scope, aws_env, monkeypatch
):
    """a NAT gateway answered without its id is an environment error (exit 4,
    one line), in the plan's current state and in the run; interfaces and groups answered
    without an id or with odd tags are skipped or left, never deleted."""
    seeded = seed_orphans(scope)
    ec2 = session_for(scope).client("ec2")
    ours = seeded["vpcs"][0]
    subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [ours]}])["Subnets"][0]
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    ec2.create_nat_gateway(SubnetId=subnet["SubnetId"], AllocationId=eip)

    def no_nat_id(parsed) -> None:
        for nat in parsed.get("NatGateways", []):
            nat.pop("NatGatewayId", None)

    def odd_interfaces(parsed) -> None:
        for eni in parsed.get("NetworkInterfaces", []):
            eni["TagSet"] = [{"Value": "no key"}, "junk"]

    odd_answers(monkeypatch, "DescribeNatGateways", no_nat_id)
    odd_answers(monkeypatch, "DescribeNetworkInterfaces", odd_interfaces)
    before = snapshot(scope)  # read as the command reads it
    plan = eksinf("teardown", "--plane", "mgmt", cwd=stack_dir)
    assert plan.code == 0 and "Traceback" not in plan.err
    why = "AWS answered ec2 describe-nat-gateways with NatGatewayId missing"
    assert f"current state UNKNOWN: {why}" in plan.err
    assert snapshot(scope) == before  # the plan changes nothing
    done = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert done.code == 4 and "Traceback" not in done.err
    (line,) = [x for x in done.err.splitlines() if x.startswith("eksinf: ")]
    assert why in line
    # Unreadable tags tie nothing to the stack: the VPC CNI interface (its tag unreadable now)
    # is left with the other team's and cluster -blue's; only EKS's described one went.
    cni_eni, eks_eni, _ = seeded["swept"]
    team_eni, blue_eni = seeded["listed"][:2]
    after = {
        e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]
    }
    assert {cni_eni, team_eni, blue_eni} <= after and eks_eni not in after


def test_running_stack_instance_is_billing_and_not_clean(eksinf, stack_dir, scope, aws_env):
    ec2 = session_for(scope).client("ec2")
    ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType="g6.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": STACK_TAG_KEY, "Value": scope.stack}]}
        ],
    )
    result = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert result.code == 1
    assert "left: instance i-" in result.out
    assert "teardown incomplete" in result.err


def test_workload_wait_is_bounded_and_names_the_instances(eksinf, stack_dir, scope, aws_env):
    ec2 = session_for(scope).client("ec2")
    ids = [
        i["InstanceId"]
        for i in ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType="g6.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": scope.cluster_tag, "Value": "owned"}],
                }
            ],
        )["Instances"]
    ]
    result = eksinf(
        "teardown", "--plane", "workload", "--yes", "--wait-timeout", "0", cwd=stack_dir
    )
    assert result.code == 1
    assert ids[0] in result.err and "would orphan them" in result.err


def test_endpoint_down_plan_says_unknown(eksinf, stack_dir, monkeypatch, aws_env):
    from conftest import free_port

    monkeypatch.setenv("EKSINF_AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    result = eksinf("teardown", "--plane", "mgmt", cwd=stack_dir)
    assert result.code == 0  # the plan itself needs no AWS; the current state is UNKNOWN
    assert "current state UNKNOWN" in result.err
    done = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert done.code == 4 and "unreachable" in done.err


@pytest.fixture
def mgmt(tmp_path, stack_dir):
    with mgmt_cluster(tmp_path, stack_dir) as api:
        yield api


def test_mgmt_deletes_ack_objects_dependents_first(eksinf, stack_dir, scope, mgmt, aws_env):
    # The controllers' key: a moto user with the stack's scoped policy (simulated before any delete).
    give_controllers(mgmt, controllers_key(scope, {"scoped": stack_policy(stack_dir)}))
    result = eksinf(
        "teardown",
        "--plane",
        "mgmt",
        "--yes",
        "--kubeconfig",
        str(mgmt.config),
        "--poll",
        "0",
        cwd=stack_dir,
    )
    assert result.code == 0, result.err
    objects = mgmt.objects_seeded
    assert objects and [p for p, _ in mgmt.deletes] == [ref_path(o.path) for o in objects]
    waves = [o.wave for o in objects]
    assert waves == sorted(waves, reverse=True)
    patches = [p for m, p in mgmt.log if m == "PATCH"]
    assert patches[0] == ARGO  # Argo CD stopped before the first object is touched
    assert mgmt.objects[ARGO]["spec"]["replicas"] == 0
    assert "left stopped" in result.err


def test_mgmt_preflight_blocks_before_anything_is_deleted(eksinf, stack_dir, scope, mgmt, aws_env):
    seeded = seed_orphans(scope)  # the Secret is missing: the controllers would be stranded
    before = snapshot(scope)
    result = eksinf(
        "teardown", "--plane", "mgmt", "--yes", "--kubeconfig", str(mgmt.config), cwd=stack_dir
    )
    assert result.code == 4
    assert "strand every AWS resource" in result.err
    assert mgmt.deletes == [] and not [m for m, _ in mgmt.log if m == "PATCH"]
    assert snapshot(scope) == before and seeded["swept"]


def test_ack_objects_come_from_configs_in_reverse_wave_order(stack_dir):
    objects = td.ack_objects(stack_dir / "configs", ["aws-network", "eks-cluster", "karpenter-aws"])
    kinds = [o.kind for o in objects]
    assert kinds.index("PodIdentityAssociation") < kinds.index("Cluster") < kinds.index("VPC")
    assert kinds[-1] == "VPC"


def released_docs(hub, space: str) -> list[dict]:
    """The documents of the space's latest release, as pulled back from the registry."""
    import io
    import tarfile

    from eksinf.core.yamlio import load_docs
    from eksinf.publish import oci

    release = hub.list_releases(space)[-1]
    blob = oci.pull(release.ref, expect_digest=release.manifest_digest).blob
    docs = []
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            text = tar.extractfile(member).read().decode("utf-8")
            docs += [d for d in load_docs(text) if isinstance(d, dict)]
    return docs


def test_workload_drain_goes_through_the_hub(eksinf, stack_dir, scope, aws_env):
    from eksinf.core.yamlio import load_docs
    from eksinf.hub import open_hub

    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0  # a real hub with both planes
    hub = open_hub(stack_dir)
    before_releases = len(hub.list_releases("karpenter-sandbox"))
    assert not [
        d
        for d in released_docs(hub, "karpenter-sandbox")
        if d.get("kind") == "NodePool" and d["spec"]["limits"].get("cpu") == "0"
    ]
    result = eksinf(
        "teardown", "--plane", "workload", "--variant", "sandbox", "--yes", "--json", cwd=stack_dir
    )
    assert result.code == 0, result.err
    body = json.loads(result.out)
    limits, drain, instances = body["planes"][0]["steps"]
    assert limits["step"] == "limits" and "karpenter-sandbox" in limits["detail"]
    assert drain["step"] == "drain" and "inference-workloads-sandbox" in drain["detail"]
    assert "karpenter-sandbox" not in drain["detail"]  # Karpenter keeps running to drain nodes
    assert instances["step"] == "instances"
    replicas = [
        doc["spec"]["replicas"]
        for unit in hub.list_units("inference-workloads-sandbox")
        for doc in load_docs(hub.unit_data("inference-workloads-sandbox", unit.slug))
        if doc.get("kind") == "Deployment"
    ]
    assert replicas and set(replicas) == {0}
    assert len(hub.list_releases("inference-workloads-sandbox")) == 2
    # Karpenter's space got one new release: every NodePool limited to zero cpu, nothing else
    # (its controller Deployment keeps its replicas, so it can remove the emptied nodes).
    assert len(hub.list_releases("karpenter-sandbox")) == before_releases + 1
    released = released_docs(hub, "karpenter-sandbox")
    pools = [d for d in released if d.get("kind") == "NodePool"]
    assert {p["metadata"]["name"] for p in pools} == {"general", "quantized-gpu", "h200"}
    assert all(p["spec"]["limits"]["cpu"] == "0" for p in pools)
    controllers = [d for d in released if d.get("kind") == "Deployment"]
    assert controllers and all(d["spec"].get("replicas") != 0 for d in controllers)


def test_mgmt_deletion_is_authorised_through_the_hub(eksinf, stack_dir, scope, mgmt, aws_env):
    from eksinf.core.yamlio import load_docs
    from eksinf.hub import open_hub

    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    # The controllers' key: a moto user with the stack's scoped policy (simulated before any delete).
    give_controllers(mgmt, controllers_key(scope, {"scoped": stack_policy(stack_dir)}))
    result = eksinf(
        "teardown",
        "--plane",
        "mgmt",
        "--variant",
        "sandbox",
        "--yes",
        "--kubeconfig",
        str(mgmt.config),
        "--poll",
        "0",
        cwd=stack_dir,
    )
    assert result.code == 0, result.err
    hub = open_hub(stack_dir)
    docs = [
        doc
        for unit in hub.list_units("aws-network-sandbox")
        for doc in load_docs(hub.unit_data("aws-network-sandbox", unit.slug))
        if ".services.k8s.aws/" in str(doc.get("apiVersion"))
    ]
    assert docs and all(d["metadata"]["annotations"][td.DELETION_POLICY] == "delete" for d in docs)
    assert "deletion-policy=delete published on" in result.err


def test_hub_plane_is_a_usage_error(eksinf, stack_dir, aws_env):
    result = eksinf("teardown", "--plane", "hub", cwd=stack_dir)
    assert result.code == 2
    assert "the hub plane creates nothing to tear down" in result.err


def test_mgmt_alone_refuses_while_karpenter_nodes_run(eksinf, stack_dir, scope, aws_env):
    seeded = seed_orphans(scope)
    session_for(scope).client("ec2").run_instances(
        ImageId="ami-12345678",
        InstanceType="g6.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": scope.cluster_tag, "Value": "owned"},
                    {"Key": "karpenter.sh/nodepool", "Value": "quantized-gpu"},
                ],
            }
        ],
    )
    before = snapshot(scope)
    result = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert result.code == 3
    assert "Tear the workload plane down first" in result.err
    assert snapshot(scope) == before and seeded["swept"]


def test_ack_objects_from_another_account_block_the_teardown(
    eksinf, stack_dir, scope, mgmt, aws_env
):
    creds = {"AccessKeyId": "AKIAX", "SecretAccessKey": "s"}
    secret = creds_mod.credentials_secret(creds, "ack-system", "x", None)
    mgmt.put(f"/api/v1/namespaces/ack-system/secrets/{creds_mod.SECRET_NAME}", secret)
    vpc = next(o for o in mgmt.objects_seeded if o.kind == "VPC")
    mgmt.objects[vpc.path]["status"] = {
        "ackResourceMetadata": {"arn": "arn:aws:ec2:us-west-2:999999999999:vpc/vpc-1"}
    }
    result = eksinf(
        "teardown", "--plane", "mgmt", "--yes", "--kubeconfig", str(mgmt.config), cwd=stack_dir
    )
    assert result.code == 3
    assert "account mismatch" in result.err and "999999999999" in result.err
    assert mgmt.deletes == [] and not [m for m, _ in mgmt.log if m == "PATCH"]


def test_set_string_path_writes_only_the_named_type_and_checks_its_arguments():
    from eksinf.errors import EksinfError
    from eksinf.hub import functions

    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "spec": {}}
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}}
    args = ["karpenter.sh/v1/NodePool", "spec.limits.cpu", "0"]
    assert functions.function_for("set-string-path")([pool, other], args) is True
    assert pool["spec"]["limits"] == {"cpu": "0"} and other == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"replicas": 1},
    }
    assert functions.set_string_path([pool], args) is False  # already zero: no new revision
    with pytest.raises(EksinfError) as err:
        functions.set_string_path([pool], args[:2])
    assert err.value.exit_code == 2 and "RESOURCE-TYPE PATH VALUE" in err.value.message


def test_delete_config_removes_only_the_torn_down_planes_spaces(eksinf, stack_dir, aws_env):
    from eksinf.hub import open_hub

    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    stack = load_stack(stack_dir)
    # the spaces the (eks-kind) sandbox deployed
    workload = [f"{c.name}-sandbox" for c in stack.select(plane="workload", kind="eks")]
    mgmt_spaces = [f"{c.name}-sandbox" for c in stack.select(plane="mgmt", kind="eks")]
    hub = open_hub(stack_dir)
    assert all(hub.space_exists(s) for s in workload + mgmt_spaces)
    result = eksinf(
        "teardown",
        "--plane",
        "workload",
        "--variant",
        "sandbox",
        "--yes",
        "--delete-config",
        "--json",
        cwd=stack_dir,
    )
    assert result.code == 0, result.err
    config = body_step(json.loads(result.out), "config")
    assert config["status"] == "done"
    assert all(s in config["detail"] for s in workload)
    hub = open_hub(stack_dir)
    assert not [s for s in workload if hub.space_exists(s)]
    assert all(hub.space_exists(s) for s in mgmt_spaces)  # the mgmt plane was not torn down
    assert hub.space_exists("platform-profile-sandbox")  # the mgmt variants still use it
    mgmt = eksinf(
        "teardown", "--plane", "mgmt", "--variant", "sandbox", "--yes", "--delete-config",
        "--json", cwd=stack_dir,
    )  # fmt: skip
    assert mgmt.code == 0, mgmt.err
    detail = body_step(json.loads(mgmt.out), "config")["detail"]
    assert "platform-profile-sandbox (no sandbox variant uses it any more)" in detail
    hub = open_hub(stack_dir)
    assert not [s for s in mgmt_spaces if hub.space_exists(s)]
    assert not hub.space_exists("platform-profile-sandbox")
    assert hub.space_exists("platform-profile-base")  # the base is install's, not teardown's


def test_delete_config_without_a_hub_deletes_nothing_and_creates_no_hub(eksinf, stack_dir, aws_env):
    result = eksinf(
        "teardown", "--plane", "workload", "--yes", "--delete-config", "--json", cwd=stack_dir
    )
    assert result.code == 0, result.err
    config = body_step(json.loads(result.out), "config")
    assert (config["status"], config["detail"]) == ("skipped", "no hub in this stack")
    assert not (stack_dir / ".eksinf" / "hub.db").exists()


def test_teardown_opens_the_hub_hub_names_over_the_config_file(eksinf, stack_dir, aws_env):
    """--hub decides which hub teardown's config half looks for, as for every command: the
    config file names cub, --hub local names the stack's local hub, and a stack without one
    gets none created."""
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub: cub\n")
    result = eksinf(
        "teardown", "--plane", "workload", "--yes", "--delete-config", "--json", "--hub",
        "local", cwd=stack_dir,
    )  # fmt: skip
    assert result.code == 0, result.err
    config = body_step(json.loads(result.out), "config")
    assert (config["status"], config["detail"]) == ("skipped", "no hub in this stack")
    assert not (stack_dir / ".eksinf" / "hub.db").exists()


def body_step(body: dict, name: str) -> dict:
    (step,) = [s for p in body["planes"] for s in p["steps"] if s["step"] == name]
    return step


def test_stalled_ack_deletion_sweeps_the_stack_vpc_orphans(stack_dir, scope, mgmt, aws_env):
    """The VPC's controller cannot finish while a detached ENI and the EKS cluster SG remain:
    once the remaining count has not moved for 6 polls, the loop sweeps them (only in the
    stack's VPC), and the objects go away."""
    from eksinf.kube.client import KubeClient

    seeded = seed_orphans(scope)
    session = session_for(scope)
    ec2 = session.client("ec2")
    objects = [o for o in mgmt.objects_seeded if o.kind == "VPC"]
    assert objects
    # A finalizer holds each deleted object until its VPC can really go.
    mgmt.on_delete.append(lambda path, obj: mgmt.put(path, obj))

    def blockers_left() -> bool:
        enis = {
            e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]
        }
        return bool(set(seeded["swept"]) & enis)

    polls_before_sweep = []

    def sleep(_seconds: float) -> None:
        if blockers_left():
            polls_before_sweep.append(1)
        else:  # the controller finishes now that nothing blocks the VPC
            for obj in objects:
                mgmt.objects.pop(obj.path, None)

    ticks = iter(range(1000))
    said: list[str] = []
    swept = td.delete_ack_objects(
        KubeClient.from_kubeconfig(mgmt.config),
        objects,
        session,
        scope,
        timeout=500,
        poll=0,
        say=said.append,
        sleep=sleep,
        clock=lambda: float(next(ticks)),
    )
    *enis, sg = seeded["swept"]
    # Karpenter's profile holds the node role (whose Role object would stall the same way).
    assert swept == [
        f"instance profile {scope.cluster}_1234",
        *[f"ENI {eni}" for eni in sorted(enis)],
        f"security group {sg}",
    ]
    assert len(polls_before_sweep) == 6  # no sweep while the count was still moving/fresh
    left = {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    left |= {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}
    assert set(seeded["kept"]) <= left
    assert all(mgmt.objects.get(o.path) is None for o in objects)


def test_karpenter_profiles_are_found_through_the_node_role_not_list_tags(
    eksinf, stack_dir, scope, aws_env, iam
):
    """AWS's ListInstanceProfiles returns no tags (the stand-in strips moto's): the profiles come
    from ListInstanceProfilesForRole on the node role, tags from ListInstanceProfileTags, and
    Karpenter 1.x's own IAM path /karpenter/<region>/<cluster>/<nodeclass-uid>/ needs no tags
    (karpenter-provider-aws pkg/providers/instanceprofile: CreateInstanceProfile Path)."""
    real = session_for(scope).client("iam")
    real.create_role(RoleName=scope.node_role, AssumeRolePolicyDocument="{}")
    real.create_role(RoleName="other-role", AssumeRolePolicyDocument="{}")

    def profile(name: str, role: str, path: str = "/", tags: dict | None = None) -> None:
        real.create_instance_profile(
            InstanceProfileName=name,
            Path=path,
            Tags=[{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        )
        real.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)

    profile("by-path", scope.node_role, path=f"/karpenter/{scope.region}/{scope.cluster}/uid-1/")
    profile("by-tag", scope.node_role, tags={"eks:eks-cluster-name": scope.cluster})
    profile("by-stack-tag", scope.node_role, tags={STACK_TAG_KEY: scope.stack})
    profile("hand-made", scope.node_role)
    profile("other-cluster", scope.node_role, tags={"eks:eks-cluster-name": "elsewhere"})
    profile("tagged-elsewhere", "other-role", tags={scope.cluster_tag: "owned"})
    listed = session_for(scope).client("iam").list_instance_profiles()["InstanceProfiles"]
    assert listed and all("Tags" not in p for p in listed)  # the stand-in answers as AWS does
    iam.calls.clear()
    result = eksinf("teardown", "--plane", "mgmt", "--yes", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert body_step(json.loads(result.out), "instance-profiles")["detail"] == (
        "by-path, by-stack-tag, by-tag"
    )
    tag_reads = sorted(kw["name"] for name, kw in iam.calls if name == "list_instance_profile_tags")
    assert tag_reads == ["by-stack-tag", "by-tag", "hand-made", "other-cluster"]
    assert not [c for c in iam.calls if c[0] == "list_instance_profiles"]
    left = sorted(
        p["InstanceProfileName"] for p in real.list_instance_profiles()["InstanceProfiles"]
    )
    assert left == ["hand-made", "other-cluster", "tagged-elsewhere"]


def test_a_gone_node_role_holds_no_profile(scope, aws_env):
    assert tdi.release_instance_profiles(session_for(scope), scope) == []


def test_missing_delete_permissions_stop_teardown_before_anything(
    eksinf, stack_dir, scope, aws_env, iam
):
    """iam:SimulatePrincipalPolicy (stubbed: moto lacks it) says the caller may not delete
    instance profiles or ENIs: exit 3 naming both, and AWS is untouched."""
    seed_orphans(scope)
    before = snapshot(scope)
    iam.denied = {
        "iam:DeleteInstanceProfile": "explicitDeny",
        "ec2:DeleteNetworkInterface": "implicitDeny",
    }
    result = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert result.code == 3, result.err
    assert (
        "may not perform 2 action(s) teardown needs: ec2:DeleteNetworkInterface (implicitDeny), "
        "iam:DeleteInstanceProfile (explicitDeny)"
    ) in result.err
    assert snapshot(scope) == before
    (simulated,) = [kw for name, kw in iam.calls if name == "simulate_principal_policy"]
    assert simulated["arn"].endswith(":user/operator")
    plan = eksinf("teardown", "--plane", "workload", cwd=stack_dir)
    assert "iam:SimulatePrincipalPolicy on the caller for ec2:DescribeInstances (" in plan.out


def test_an_assumed_role_is_simulated_as_its_role(scope, aws_env, monkeypatch):
    """SimulatePrincipalPolicy takes the role ARN (with its path), not the sts session ARN."""
    session = session_for(scope)
    role = session.client("iam").create_role(
        RoleName="ops", Path="/team/", AssumeRolePolicyDocument="{}"
    )["Role"]
    creds = session.client("sts").assume_role(RoleArn=role["Arn"], RoleSessionName="me")
    assumed = AwsSession(AwsIdentity.resolve(scope.region), credentials=creds["Credentials"])
    assert ":assumed-role/ops/me" in assumed.caller.arn
    assert tdi.simulation_arn(assumed) == role["Arn"] and "/team/ops" in role["Arn"]


def test_a_stack_the_original_tagged_is_swept_and_its_instance_is_billing(
    eksinf, stack_dir, scope, aws_env
):
    """A stack the Go original built carries only its stack tag key
    (eks-inference.confighub.com/stack): its VPC is the stack's, so a detached interface with
    that tag is swept; its running instance is billing, so the teardown is not clean."""
    ec2 = session_for(scope).client("ec2")
    _, subnet = seed_vpc(ec2, "10.44.0.0/16", {ORIGINAL_STACK_TAG_KEY: scope.stack})
    eni = ec2.create_network_interface(
        SubnetId=subnet,
        TagSpecifications=tag_spec("network-interface", {ORIGINAL_STACK_TAG_KEY: scope.stack}),
    )["NetworkInterface"]["NetworkInterfaceId"]
    plan = eksinf("teardown", "--plane", "mgmt", cwd=stack_dir)
    assert f"inside VPCs tagged {STACK_TAG_KEY}={scope.stack} or " in plan.out
    assert f"detached ENI {eni}" in plan.out
    swept = eksinf("teardown", "--plane", "mgmt", "--yes", "--json", cwd=stack_dir)
    assert swept.code == 0, swept.err
    assert json.loads(swept.out)["clean"]
    left = {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    assert eni not in left
    ec2.run_instances(
        ImageId="ami-12345678", InstanceType="g6.xlarge", MinCount=1, MaxCount=1,
        TagSpecifications=tag_spec("instance", {ORIGINAL_STACK_TAG_KEY: scope.stack}),
    )  # fmt: skip
    billing = eksinf("teardown", "--plane", "mgmt", "--yes", cwd=stack_dir)
    assert billing.code == 1 and "left: instance i-" in billing.out


def test_the_originals_tag_naming_another_stack_is_not_ours(scope):
    both = dataclasses.replace(scope, also_tag_keys=(ORIGINAL_STACK_TAG_KEY,))
    assert both.tagged_ours({ORIGINAL_STACK_TAG_KEY: scope.stack})
    assert not both.tagged_ours({ORIGINAL_STACK_TAG_KEY: "other-stack"})
    other = {ORIGINAL_STACK_TAG_KEY: "other-stack", scope.cluster_tag: "owned"}
    assert not lf.is_stack_eni({"TagSet": [{"Key": k, "Value": v} for k, v in other.items()]}, both)
