"""The contract's rules for a consumed SageMaker HyperPod cluster (target kind hyperpod-eks):
pure judgements of `HyperPodFacts`, listed in the one table (rules.RULES) for that kind;
the operator's own rules are in hyperpod_role_rules.py.

There is deliberately no rule on DescribeCluster's `InferenceConfig`: it is absent on working
clusters too, so it proves nothing either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from eksinf.core.types import Doc
from eksinf.model.prices import load_catalogue

from ...errors import shell_command
from ...model.addons import load_records, value_errors
from ...model.checks import Finding
from ...model.targets import HYPERPOD_GROUPS, kinds_with
from .context import Context, check, rule
from .hyperpod import (
    ADDON_KNOWN_KEY,
    INFERENCE_ADDON,
    HyperPodFacts,
    RoleFacts,
    addon_version,
    role_name,
)

HYPERPOD = kinds_with(HYPERPOD_GROUPS)
HP_ANCHOR = "docs/hyperpod.md#the-hyperpod-contract"
ADDON_CALL = f"eks:DescribeAddon addonName={INFERENCE_ADDON} (configurationValues)"


def hyperpod_of(ctx: Context) -> HyperPodFacts:
    assert ctx.hyperpod is not None  # evaluate() gathers it for every hyperpod-eks target
    return ctx.hyperpod


def _is_gpu(instance_type: str) -> bool | None:
    """Does an ml.* type carry GPUs? From the instance catalogue when it lists the type, else by
    EC2's accelerated-computing family letters (p and g carry GPUs; trn and inf carry other
    accelerators: neither a GPU nor a CPU group)."""
    ec2 = instance_type.removeprefix("ml.")
    family = ec2.split(".")[0]
    for entry in load_catalogue().get(family, ()):
        if entry.name == ec2:
            return entry.gpus > 0
    if family.startswith(("trn", "inf")):
        return None
    return family.startswith(("p", "g"))


def role_missing(role: RoleFacts | None, what: str) -> str:
    if role is None:
        return f"{what}: not named"
    return f"{what} {role.name}: {role.error}" if role.trust is None else ""


@rule(
    "hyperpod-cluster",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the SageMaker HyperPod cluster (`spec.hyperpod.clusterName` or `--hyperpod-cluster`) InService",
    call="`sagemaker:DescribeCluster` (`ClusterStatus`)",
    fix="create it through AWS's flow (HyperPod console, Quick Install or CloudFormation) or wait until it is InService; eksinf consumes the cluster and never creates it",
    why="a HyperPod cluster assembled by hand or still creating never gets the inference capability attached",
)
def hyperpod_cluster(ctx: Context) -> list[Finding]:
    """The HyperPod cluster exists and is InService."""
    hp = hyperpod_of(ctx)
    element = f"the SageMaker HyperPod cluster {hp.name} InService"
    call = f"sagemaker:DescribeCluster ClusterName={hp.name}"
    fix = (
        "create it through AWS's flow (HyperPod console, Quick Install or CloudFormation) or "
        "wait until it is InService; eksinf consumes it and never creates it"
    )
    if hp.cluster_error:
        return [check(element, "unknown", hp.cluster_error, call, fix)]
    if hp.cluster is None:
        return [check(element, "fail", "no such cluster", call, fix)]
    status = str(hp.cluster.get("ClusterStatus", "?"))
    detail = f"{hp.arn} {status}" + (
        f": {hp.cluster['FailureMessage']}" if hp.cluster.get("FailureMessage") else ""
    )
    ok = status == "InService"
    return [check(element, "pass" if ok else "fail", detail, call, "" if ok else fix)]


@rule(
    "hyperpod-orchestrator",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the HyperPod cluster orchestrated by the enrolled EKS cluster (`Orchestrator.Eks.ClusterArn`)",
    call="`sagemaker:DescribeCluster` (`Orchestrator.Eks.ClusterArn`) vs `eks:DescribeCluster` (`arn`)",
    fix="enroll the EKS cluster that orchestrates the HyperPod cluster (`--eks-cluster`), or name the HyperPod cluster this EKS cluster orchestrates",
    why="the workload would land on a cluster whose nodes are not the HyperPod instance groups",
)
def hyperpod_orchestrator(ctx: Context) -> list[Finding]:
    """The HyperPod cluster's orchestrator is the enrolled EKS cluster."""
    hp = hyperpod_of(ctx)
    if hp.cluster is None:
        return []  # hyperpod-cluster speaks
    element = f"HyperPod cluster {hp.name} orchestrated by EKS cluster {ctx.facts.cluster_name}"
    call = "sagemaker:DescribeCluster Orchestrator.Eks.ClusterArn vs eks:DescribeCluster arn"
    found = str(((hp.cluster.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn", ""))
    if not hp.eks_arn:
        return [check(element, "unknown", "the EKS cluster's ARN is unread", call)]
    if found == hp.eks_arn:
        return [check(element, "pass", found, call)]
    detail = (
        f"it is orchestrated by {found}, not {hp.eks_arn}"
        if found
        else "it names no EKS orchestrator (a Slurm cluster?)"
    )
    fix = (
        f"enroll with --eks-cluster {found.rsplit('/', 1)[-1]}"
        if found
        else "use a HyperPod cluster orchestrated by EKS"
    ) + ", or name the HyperPod cluster this EKS cluster orchestrates"
    return [check(element, "fail", detail, call, fix)]


# What UpdateCluster's InstanceGroups entry (ClusterInstanceGroupSpecification) needs to keep a
# group as it is, from DescribeCluster's ClusterInstanceGroupDetails (botocore's sagemaker model).
CARRIED = (
    "InstanceGroupName",
    "InstanceType",
    "ExecutionRole",
    "LifeCycleConfig",
    "ThreadsPerCore",
)


def update_cluster_fix(hp: HyperPodFacts) -> str:
    """The fix for a missing instance group, with the warning `update-cluster` needs: its
    --instance-groups is taken as the whole set, so every current group is carried over
    (printed as the JSON to start from)."""
    current = [
        {
            **{k: g[k] for k in CARRIED if k in g},
            "InstanceCount": g.get("TargetCount", g.get("CurrentCount", 0)),
        }
        for g in (hp.cluster or {}).get("InstanceGroups") or []
    ]
    return (
        "add the instance group through HyperPod (aws sagemaker update-cluster --cluster-name "
        f"{hp.name} --instance-groups ...). WARNING: update-cluster replaces the whole set of "
        "instance groups with --instance-groups: a group left out is removed with its "
        "instances, so carry over every current group as it is and add the new one. Current "
        f"set: {json.dumps(current, sort_keys=True, separators=(',', ':'))}. eksinf never "
        "changes capacity"
    )


@rule(
    "hyperpod-instance-groups",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="a CPU instance group (controllers) and a GPU instance group of `spec.hyperpod.instanceType` or of one of its `fallbackInstanceTypes`; a GPU type with no running instance anywhere is waiting for capacity (an advisory)",
    call="`sagemaker:DescribeCluster` (`InstanceGroups`) + `sagemaker:ListClusterNodes` (`InstanceStatus`)",
    fix="add the instance group through HyperPod (`aws sagemaker update-cluster`): its `--instance-groups` replaces the whole set, so carry every current group over (the fix lists them); eksinf never changes capacity",
    why="capacity comes from instance groups, not Karpenter: without the GPU group the model never schedules, without a CPU group the operator's controllers compete for GPU nodes; a group still waiting for capacity is not a broken cluster",
)
def hyperpod_instance_groups(ctx: Context) -> list[Finding]:
    """A CPU and a GPU instance group; one without a running instance only waits."""
    hp = hyperpod_of(ctx)
    if hp.cluster is None:
        return []
    wanted = (hp.instance_type, *hp.fallback_instance_types)
    want = " or ".join(wanted)
    element = f"a CPU instance group and a GPU instance group of {want}"
    call = f"sagemaker:DescribeCluster InstanceGroups + sagemaker:ListClusterNodes ClusterName={hp.name}"
    running: dict[str, int] = {}
    for node in hp.nodes or []:
        if (node.get("InstanceStatus") or {}).get("Status") == "Running":
            group = str(node.get("InstanceGroupName", ""))
            running[group] = running.get(group, 0) + 1
    described = []
    cpu: dict[str, int] = {}  # group -> running instances
    gpu: dict[str, int] = {}
    for group in hp.cluster.get("InstanceGroups") or []:
        name, kind = str(group.get("InstanceGroupName", "?")), str(group.get("InstanceType", "?"))
        count = (
            running.get(name, 0) if hp.nodes is not None else int(group.get("CurrentCount") or 0)
        )
        described.append(f"{name} {kind} x{count}")
        if kind in wanted:
            gpu[name] = count
        elif _is_gpu(kind) is False:
            cpu[name] = count
    problems, waiting = [], []
    for label, found in ((f"instance group of {want}", gpu), ("CPU instance group", cpu)):
        if not found:
            problems.append(f"no {label}")
        elif not any(found.values()):
            waiting.append(
                f"{label} {', '.join(sorted(found))} has no running instance: waiting for capacity"
            )
    # The type the operator picks: the first listed with a running instance (said when it is a
    # fallback; falling back is what the list is for, so it passes).
    groups = hp.cluster.get("InstanceGroups") or []
    up = {str(g.get("InstanceType")) for g in groups if gpu.get(str(g.get("InstanceGroupName")))}
    picked = next((kind for kind in wanted if kind in up), None)
    notes = []
    if picked is not None and picked != hp.instance_type:
        notes.append(f"no running {hp.instance_type}: the model falls back to {picked}")
    detail = "; ".join(problems + waiting + notes + [", ".join(described) or "no groups"])
    if hp.nodes is None and hp.nodes_error:
        detail += f"; counts from DescribeCluster (ListClusterNodes: {hp.nodes_error})"
    if problems:
        return [check(element, "fail", detail, call, update_cluster_fix(hp))]
    if waiting:
        fix = (
            "wait for HyperPod to place the instances (sagemaker:ListClusterNodes shows them "
            "Running), or check the group's capacity in the console; enrolling goes ahead and the "
            "model schedules once they run"
        )
        return [check(element, "warn", detail, call, fix)]
    return [check(element, "pass", detail, call)]


@rule(
    "inference-addon",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element=f"the `{INFERENCE_ADDON}` EKS add-on ACTIVE at a known-good version or above the floor (`HYPERPOD_INFERENCE_ADDON_KNOWN`, `HYPERPOD_INFERENCE_ADDON_FLOOR`), its configuration valid against the schema recorded for that version",
    call=f"`eks:DescribeAddon` `{INFERENCE_ADDON}` (`status`, `addonVersion`, `health.issues`, `configurationValues`) + the recorded `eks:DescribeAddonConfiguration` schema",
    fix="install or update it through the HyperPod console or `aws eks update-addon --addon-version <a known-good version>`",
    why="the add-on installs the inference operator and its CRDs; below the floor it may serve a CRD the pinned one does not match (a version above the floor that is not known passes with an advisory)",
)
def inference_addon(ctx: Context) -> list[Finding]:
    """The inference add-on is ACTIVE at a known-good version (or above the floor)."""
    hp = hyperpod_of(ctx)
    newest = hp.addon_known[-1] if hp.addon_known else hp.addon_floor
    element = (
        f"the {INFERENCE_ADDON} add-on ACTIVE at {' or '.join(hp.addon_known) or hp.addon_floor} "
        f"(at least {hp.addon_floor})"
    )
    call = f"eks:DescribeAddon clusterName={ctx.facts.cluster_name} addonName={INFERENCE_ADDON}"
    fix = (
        "install or update it (HyperPod console, or "
        + shell_command(
            "aws",
            "eks",
            "update-addon",
            "--cluster-name",
            ctx.facts.cluster_name,
            "--addon-name",
            INFERENCE_ADDON,
            "--addon-version",
            newest,
        )
        + ")"
    )
    if hp.addon_error:
        return [check(element, "unknown", hp.addon_error, call, fix)]
    if hp.addon is None:
        return [check(element, "fail", "not installed", call, fix)]
    status, version = str(hp.addon.get("status", "?")), str(hp.addon.get("addonVersion", "?"))
    issues = [
        f"{i.get('code')}: {i.get('message')}"
        for i in (hp.addon.get("health") or {}).get("issues") or []
    ]
    problems, notes = [], []
    if status != "ACTIVE":
        problems.append(f"status {status}")
    found, floor = addon_version(version), addon_version(hp.addon_floor)
    if found is None or floor is None or found < floor:
        problems.append(f"version {version}, below the floor {hp.addon_floor}")
    elif version not in hp.addon_known:
        notes.append(
            f"version {version} is above the floor {hp.addon_floor} but not known to work "
            f"(known: {', '.join(hp.addon_known)}): check its CRD against the pinned one and "
            f"add it to {ADDON_KNOWN_KEY} once it does"
        )
    record = load_records().get((INFERENCE_ADDON, version))
    if record is None:
        notes.append(
            f"no configuration schema recorded for {version} (eksinf addon-schemas refresh)"
        )
    elif hp.config is not None:
        problems += [
            f"configurationValues {p} (schema from {record.source})"
            for p in value_errors(record.schema, hp.config)
        ]
    detail = "; ".join(problems) or f"ACTIVE {version}"
    if notes:
        detail += "; " + "; ".join(notes)
    if issues:
        detail += "; health: " + "; ".join(issues)
    state = "fail" if problems else "warn" if version not in hp.addon_known else "pass"
    return [
        check(
            element,
            state,
            detail,
            call,
            fix if state != "pass" else "",
        )
    ]


Judge = Callable[[HyperPodFacts, Doc], tuple[str, str]]  # -> (problem, detail)


def _config_check(ctx: Context, element: str, setting: str, judge: Judge) -> list[Finding]:
    """Shared frame of the add-on configuration rules: unread, absent, then `judge`. The fix
    names the setting with the value it should hold."""
    hp = hyperpod_of(ctx)
    if hp.addon is None:
        return []  # inference-addon speaks
    fix = (
        f"set {setting} in the add-on configuration (aws eks update-addon --cluster-name "
        f"{ctx.facts.cluster_name} --addon-name {INFERENCE_ADDON} --configuration-values ...)"
    )
    if hp.config is None:
        return [check(element, "unknown", hp.config_error, ADDON_CALL, fix)]
    problem, detail = judge(hp, hp.config)
    return [
        check(
            element,
            "fail" if problem else "pass",
            problem or detail,
            ADDON_CALL,
            fix if problem else "",
        )
    ]


@rule(
    "addon-cluster-arn",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the add-on configuration's `hyperpodClusterArn` naming this HyperPod cluster's ARN",
    call=f"`eks:DescribeAddon` `{INFERENCE_ADDON}` (`configurationValues`) vs `sagemaker:DescribeCluster` (`ClusterArn`)",
    fix="set `hyperpodClusterArn` to the cluster's ARN in the add-on configuration (`aws eks update-addon --configuration-values`)",
    why="empty, the controller crash-loops (`HYPERPOD_CLUSTER_ARN environment variable not set`); naming a deleted cluster, the add-on stays ACTIVE and wedges a recreate",
)
def addon_cluster_arn(ctx: Context) -> list[Finding]:
    """The add-on's hyperpodClusterArn is this cluster's ARN (not empty, not stale)."""

    def judge(hp: HyperPodFacts, config: Doc) -> tuple[str, str]:
        found = str(config.get("hyperpodClusterArn") or "")
        if not found:
            return "hyperpodClusterArn is empty or absent: the controller crash-loops", ""
        if hp.arn and found != hp.arn:
            return (
                f"hyperpodClusterArn names {found}, not {hp.arn} (a deleted or other cluster: "
                "the add-on stays ACTIVE and a recreate wedges)",
                "",
            )
        return "", found

    hp = hyperpod_of(ctx)
    return _config_check(
        ctx,
        "the add-on's hyperpodClusterArn naming this cluster",
        f"hyperpodClusterArn: {hp.arn or '<the HyperPod cluster ARN>'}",
        judge,
    )


@rule(
    "addon-execution-role",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the add-on configuration's `executionRoleArn` naming the profile's `spec.hyperpod.executionRoleName`",
    call=f"`eks:DescribeAddon` `{INFERENCE_ADDON}` (`configurationValues`)",
    fix="set `executionRoleArn` in the add-on configuration, or set `spec.hyperpod.executionRoleName` to the role it names",
    why="the operator runs as that role: the stack's trust and policy checks must judge the role actually used",
)
def addon_execution_role(ctx: Context) -> list[Finding]:
    """The add-on's executionRoleArn is the profile's execution role."""

    def judge(hp: HyperPodFacts, config: Doc) -> tuple[str, str]:
        found = str(config.get("executionRoleArn") or "")
        if not found:
            return "executionRoleArn is empty or absent", ""
        if role_name(found) != hp.execution_role_name:
            return f"executionRoleArn is {found}, not role {hp.execution_role_name}", ""
        return "", found

    return _config_check(
        ctx,
        "the add-on's executionRoleArn naming the profile's role",
        f"executionRoleArn: arn:aws:iam::<account>:role/{hyperpod_of(ctx).execution_role_name} (or "
        "spec.hyperpod.executionRoleName to the role it names)",
        judge,
    )


@rule(
    "addon-tls-bucket",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the add-on configuration's `tlsCertificateS3Bucket` naming the bucket of `spec.hyperpod.tlsCertificateS3Uri`",
    call=f"`eks:DescribeAddon` `{INFERENCE_ADDON}` (`configurationValues`)",
    fix="set `tlsCertificateS3Bucket` in the add-on configuration, or point `spec.hyperpod.tlsCertificateS3Uri` at that bucket",
    why="the operator writes each endpoint's TLS certificate there; the model's `tlsCertificateOutputS3Uri` must be a bucket the execution role may write",
)
def addon_tls_bucket(ctx: Context) -> list[Finding]:
    """The add-on's TLS bucket is the profile's."""

    def judge(hp: HyperPodFacts, config: Doc) -> tuple[str, str]:
        found = str(config.get("tlsCertificateS3Bucket") or "")
        bucket = found.removeprefix("s3://").split("/", 1)[0]  # either spelling is accepted
        if not bucket:
            return "tlsCertificateS3Bucket is empty or absent", ""
        if bucket != hp.tls_bucket:
            return f"tlsCertificateS3Bucket is {found}, not {hp.tls_bucket}", ""
        return "", found

    return _config_check(
        ctx,
        "the add-on's tlsCertificateS3Bucket naming the profile's bucket",
        f"tlsCertificateS3Bucket: {hyperpod_of(ctx).tls_bucket} (or spec.hyperpod.tlsCertificateS3Uri "
        "to its bucket)",
        judge,
    )


@rule(
    "addon-gateway",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the add-on configuration's `inferenceGateway.enabled` set explicitly (true or false)",
    call=f"`eks:DescribeAddon` `{INFERENCE_ADDON}` (`configurationValues`)",
    fix="set `inferenceGateway: {enabled: false}` (or true) in the add-on configuration",
    why="an omitted block is not the same as off: the add-on's default decides, and may change with its version",
)
def addon_gateway(ctx: Context) -> list[Finding]:
    """The add-on sets inferenceGateway.enabled explicitly."""

    def judge(hp: HyperPodFacts, config: Doc) -> tuple[str, str]:
        block = config.get("inferenceGateway")
        value = block.get("enabled") if isinstance(block, dict) else None
        if not isinstance(value, bool):
            return (
                "inferenceGateway.enabled is not set (an omitted block is not the same as off)",
                "",
            )
        return "", f"inferenceGateway.enabled: {str(value).lower()}"

    return _config_check(
        ctx,
        "the add-on's inferenceGateway.enabled set explicitly",
        "inferenceGateway: {enabled: false} (or true)",
        judge,
    )
