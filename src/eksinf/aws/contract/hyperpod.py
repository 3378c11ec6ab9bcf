"""The HyperPod half of the contract's facts (target kind hyperpod-eks): what SageMaker, the
inference add-on, IAM and the cluster say about a consumed SageMaker HyperPod cluster, gathered
once with the caller's session. Judging them is rules.py's job (the `hyperpod-*`, `addon-*` and
`inference-*` rules).

Response shapes are botocore's (sagemaker DescribeCluster / ListClusterNodes, eks DescribeAddon,
iam GetRole / ListAttachedRolePolicies / SimulatePrincipalPolicy). `InferenceConfig` of
DescribeCluster is never read: it is absent on working clusters too, and botocore's sagemaker
model does not carry it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...errors import CONTRACT, EksinfError
from ...kube.client import KubeClient, KubeError, resource_path
from ..session import AWS_FAILURES, AwsSession, error_code, paginate, translate

# Facts from the operator's chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart/
# charts/inference-operator at 011ca927123e) and the EKS add-on that wraps it.
INFERENCE_ADDON = "amazon-sagemaker-hyperpod-inference"
INFERENCE_NAMESPACE = "hyperpod-inference-system"
CONTROLLER_SUFFIX = "-controller-manager"  # add-on: hyperpod-inference-..., Helm: ...-operator-...
CLUSTER_ARN_ENV = "HYPERPOD_CLUSTER_ARN"
ALB_SERVICE_ACCOUNT = "aws-load-balancer-controller"
ALB_WEBHOOK_NAME = "aws-load-balancer-webhook"  # the ALB controller's mutating webhook
INFERENCE_POLICY = "arn:aws:iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess"
# What the execution role does besides the managed policy: write the endpoint's TLS
# certificate to the bucket (tagging the object as it writes it: the findings' AccessDenied was
# s3:PutObjectTagging), list the bucket, and tag the imported ACM certificate.
TLS_OBJECT_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:PutObjectTagging")
TLS_BUCKET_ACTIONS = ("s3:ListBucket",)
ACM_ACTION = "acm:AddTagsToCertificate"
# The operator's view of enablement and registration: its SageMakerEndpointRegistration objects
# (status.state, status.conditions; the CRD pinned beside the InferenceEndpointConfig's) and the
# Events it records in its namespace.
REGISTRATION_API = "inference.sagemaker.aws.amazon.com/v1"
REGISTRATION_KIND = "SageMakerEndpointRegistration"
# What the operator says when its watcher is stuck after repeated enable and disable; only
# recreating the HyperPod cluster recovers it (the findings saw a recreate take over 15 minutes).
STUCK_WATCHER = "Underlying watcher service is being deleted"
ENABLEMENT_WINDOW = 20 * 60  # seconds enroll waits for a watcher still enabling (--wait-enablement)
# Probed namespace for "the ALB trust admits the controller's account in any namespace".
ANY_NAMESPACE_PROBE = "eksinf-any-namespace"


@dataclass(frozen=True)
class RoleFacts:
    """One IAM role the inference stack runs as: its trust, managed policies and what IAM's
    policy simulator says about the actions it needs (None = unread)."""

    name: str
    trust: Any = None  # AssumeRolePolicyDocument; None = absent or unread
    attached: tuple[str, ...] | None = None  # managed policy ARNs
    decisions: dict[str, str] | None = None  # "action resource" -> EvalDecision
    error: str = ""  # "no such role" when absent


@dataclass
class HyperPodFacts:
    """Everything the HyperPod rules look at (I/O in `gather_hyperpod`)."""

    name: str  # the HyperPod cluster as enrolled: a name or an ARN
    # What the profile expects (spec.hyperpod) and the add-on versions versions.env accepts.
    instance_type: str = ""
    fallback_instance_types: tuple[str, ...] = ()  # in order, after instance_type
    execution_role_name: str = ""
    tls_bucket: str = ""
    addon_floor: str = ""
    addon_known: tuple[str, ...] = ()  # oldest first
    eks_arn: str = ""  # the enrolled EKS cluster's ARN ("" when unread)
    issuer: str = ""  # the EKS cluster's current OIDC issuer host
    cluster: dict[str, Any] | None = None  # sagemaker DescribeCluster; None = absent/unread
    cluster_error: str = ""
    nodes: list[dict[str, Any]] | None = None  # ListClusterNodes ClusterNodeSummaries
    nodes_error: str = ""
    addon: dict[str, Any] | None = None  # eks DescribeAddon `addon`; None = absent/unread
    addon_error: str = ""
    config: dict[str, Any] | None = None  # the add-on's configurationValues, parsed
    config_error: str = ""
    controllers: list[dict[str, Any]] | None = None  # *-controller-manager Deployments
    controllers_error: str = ""
    service_accounts: dict[str, dict[str, Any]] = field(default_factory=dict)  # ns/name -> SA
    alb_namespaces: list[str] | None = None  # namespaces holding an ALB controller account
    webhook_namespace: str | None = None  # namespace of the ALB webhook's service
    kube_error: str = ""
    registrations: list[dict[str, Any]] | None = None  # None = unread (no kubeconfig, error)
    operator_events: list[dict[str, Any]] | None = None  # Events in INFERENCE_NAMESPACE
    enablement_error: str = ""
    execution_role: RoleFacts | None = None
    alb_role: RoleFacts | None = None

    @property
    def arn(self) -> str:
        """The HyperPod cluster's ARN as SageMaker reports it ("" when unread)."""
        return str((self.cluster or {}).get("ClusterArn", ""))


# versions.env: the oldest add-on version the contract accepts, and the versions known to work
# (comma-separated). A version above the floor that is not known passes with an advisory.
ADDON_FLOOR_KEY = "HYPERPOD_INFERENCE_ADDON_FLOOR"
ADDON_KNOWN_KEY = "HYPERPOD_INFERENCE_ADDON_KNOWN"
# EKS add-on versions read v<major>.<minor>.<patch>-eksbuild.<n>.
_ADDON_VERSION = re.compile(r"v(\d+)\.(\d+)\.(\d+)-eksbuild\.(\d+)")


def addon_version(text: str) -> tuple[int, int, int, int] | None:
    """An EKS add-on version as numbers to compare (None: not v<x.y.z>-eksbuild.<n>)."""
    match = _ADDON_VERSION.fullmatch(text.strip())
    if not match:
        return None
    major, minor, patch, build = (int(g) for g in match.groups())
    return major, minor, patch, build


def addon_versions(versions: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """(floor, known-good versions) from versions.env, each checked; the floor is below or
    equal to every known version."""
    for key in (ADDON_FLOOR_KEY, ADDON_KNOWN_KEY):
        if key not in versions:
            raise EksinfError(
                f"versions.env: missing key {key}",
                hint=f"Set {ADDON_FLOOR_KEY} (the oldest accepted inference add-on version, "
                f"e.g. v1.0.0-eksbuild.1) and {ADDON_KNOWN_KEY} (the versions known to work, "
                "comma-separated, e.g. v1.0.0-eksbuild.1,v2.1.0-eksbuild.1).",
                exit_code=CONTRACT,
            )
    floor = versions[ADDON_FLOOR_KEY].strip()
    known = tuple(v.strip() for v in versions[ADDON_KNOWN_KEY].split(",") if v.strip())
    for key, value in [(ADDON_FLOOR_KEY, floor)] + [(ADDON_KNOWN_KEY, v) for v in known]:
        if addon_version(value) is None:
            raise EksinfError(
                f"versions.env: {key}: {value!r} is not an EKS add-on version",
                hint="Write it as EKS does: v<major>.<minor>.<patch>-eksbuild.<n>.",
                exit_code=CONTRACT,
            )
    below = [v for v in known if (addon_version(v) or ()) < (addon_version(floor) or ())]
    if not known or below:
        raise EksinfError(
            f"versions.env: {ADDON_KNOWN_KEY} "
            + (f"lists {', '.join(below)}, below the floor {floor}" if below else "is empty"),
            hint=f"List at least one known-good version at or above {ADDON_FLOOR_KEY}.",
            exit_code=CONTRACT,
        )
    return floor, tuple(sorted(known, key=lambda v: addon_version(v) or ()))


def expected(profile: Any, versions: dict[str, str], cluster: str | None = None) -> HyperPodFacts:
    """What a hyperpod-eks target must be, from the profile's `spec.hyperpod` and versions.env;
    `cluster` (--hyperpod-cluster, a name or an ARN) overrides the profile's clusterName."""
    block = getattr(profile, "hyperpod", None)
    if block is None:
        raise EksinfError(
            "the profile has no spec.hyperpod block: a hyperpod-eks target needs it",
            hint="Add spec.hyperpod (clusterName, instanceType, executionRoleName, "
            "tlsCertificateS3Uri) to render/platform-profile/profile.yaml; see docs/hyperpod.md.",
            exit_code=CONTRACT,
        )
    floor, known = addon_versions(versions)
    return HyperPodFacts(
        name=cluster or block.cluster_name,
        instance_type=block.instance_type,
        fallback_instance_types=block.fallback_instance_types,
        execution_role_name=block.execution_role_name,
        tls_bucket=block.tls_bucket,
        addon_floor=floor,
        addon_known=known,
    )


def _parse_config(text: str | None) -> tuple[dict[str, Any] | None, str]:
    """configurationValues is JSON or YAML text (eks CreateAddon); absent = {}."""
    if not text:
        return {}, ""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return None, f"configurationValues is neither JSON nor YAML: {str(exc).splitlines()[0]}"
    if not isinstance(value, dict):
        return None, "configurationValues is not a mapping"
    return value, ""


def role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1] if ":role/" in arn else ""


def _role(
    iam: Any, name: str, checks: list[tuple[str, str]], with_policies: bool = False
) -> RoleFacts:
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except AWS_FAILURES as exc:
        if error_code(exc) == "NoSuchEntity":
            return RoleFacts(name, error="no such role")
        return RoleFacts(name, error=translate(exc, "iam get-role").message)
    attached: tuple[str, ...] | None = None
    decisions: dict[str, str] | None = None
    error = ""
    if with_policies:
        try:
            listed = paginate(iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name)
            attached = tuple(sorted(p["PolicyArn"] for p in listed))
            decisions = {}
            for action, resource in checks:
                answer = iam.simulate_principal_policy(
                    PolicySourceArn=role["Arn"], ActionNames=[action], ResourceArns=[resource]
                )
                for result in answer.get("EvaluationResults") or []:
                    decisions[f"{action} {resource}"] = result.get("EvalDecision", "")
        except AWS_FAILURES as exc:
            error = translate(
                exc, "iam list-attached-role-policies/simulate-principal-policy"
            ).message
    return RoleFacts(name, role.get("AssumeRolePolicyDocument"), attached, decisions, error)


def role_checks(bucket: str) -> list[tuple[str, str]]:
    """(action, resource) the execution role must be allowed, for `bucket` (the TLS bucket):
    object actions on its objects, ListBucket on the bucket itself."""
    return (
        [(a, f"arn:aws:s3:::{bucket}/*") for a in TLS_OBJECT_ACTIONS]
        + [(a, f"arn:aws:s3:::{bucket}") for a in TLS_BUCKET_ACTIONS]
        + [(ACM_ACTION, "*")]
    )


def gather_hyperpod(
    session: AwsSession,
    expected: HyperPodFacts,
    eks_cluster: dict[str, Any] | None,
    kube: KubeClient | None,
) -> HyperPodFacts:
    """Fill `expected` (name and expectations set) with what AWS and the cluster say."""
    facts = expected
    name = facts.name
    eks_cluster = eks_cluster or {}
    facts.eks_arn = str(eks_cluster.get("arn", ""))
    issuer = (eks_cluster.get("identity") or {}).get("oidc", {}).get("issuer", "")
    facts.issuer = str(issuer).removeprefix("https://")
    sagemaker, eks, iam = session.client("sagemaker"), session.client("eks"), session.client("iam")
    try:
        facts.cluster = sagemaker.describe_cluster(ClusterName=name)
    except AWS_FAILURES as exc:
        if error_code(exc) != "ResourceNotFound":
            facts.cluster_error = translate(exc, "sagemaker describe-cluster").message
    if facts.cluster is not None:
        try:
            facts.nodes = paginate(
                sagemaker, "list_cluster_nodes", "ClusterNodeSummaries", ClusterName=name
            )
        except AWS_FAILURES as exc:
            facts.nodes_error = translate(exc, "sagemaker list-cluster-nodes").message
    eks_name = eks_cluster.get("name")
    if eks_name:
        try:
            facts.addon = eks.describe_addon(clusterName=eks_name, addonName=INFERENCE_ADDON)[
                "addon"
            ]
        except AWS_FAILURES as exc:
            if error_code(exc) != "ResourceNotFoundException":
                facts.addon_error = translate(exc, "eks describe-addon").message
    if facts.addon is not None:
        facts.config, facts.config_error = _parse_config(facts.addon.get("configurationValues"))
    facts.execution_role = _role(
        iam, facts.execution_role_name, role_checks(facts.tls_bucket), with_policies=True
    )
    alb_arn = (((facts.config or {}).get("alb") or {}).get("serviceAccount") or {}).get("roleArn")
    if alb_arn and role_name(str(alb_arn)):
        facts.alb_role = _role(iam, role_name(str(alb_arn)), [])
    if kube is not None:
        _gather_kube(kube, facts)
    return facts


def _gather_kube(kube: KubeClient, facts: HyperPodFacts) -> None:
    try:
        deployments = kube.items(resource_path("apps/v1", "Deployment", INFERENCE_NAMESPACE))
        facts.controllers = [
            d for d in deployments if d["metadata"]["name"].endswith(CONTROLLER_SUFFIX)
        ]
        for deploy in facts.controllers:
            account = (deploy.get("spec", {}).get("template", {}).get("spec") or {}).get(
                "serviceAccountName"
            )
            if account:
                found = kube.get(
                    resource_path("v1", "ServiceAccount", INFERENCE_NAMESPACE, str(account))
                )
                if found is not None:
                    facts.service_accounts[f"{INFERENCE_NAMESPACE}/{account}"] = found
    except (KubeError, EksinfError) as exc:
        facts.controllers_error = exc.message
        return
    try:
        accounts = kube.items(resource_path("v1", "ServiceAccount"))
        facts.alb_namespaces = sorted(
            a["metadata"].get("namespace", "")
            for a in accounts
            if a["metadata"]["name"] == ALB_SERVICE_ACCOUNT
        )
        hook = kube.get(
            resource_path(
                "admissionregistration.k8s.io/v1",
                "MutatingWebhookConfiguration",
                None,
                ALB_WEBHOOK_NAME,
            )
        )
        for entry in (hook or {}).get("webhooks") or []:
            service = (entry.get("clientConfig") or {}).get("service") or {}
            if service.get("namespace"):
                facts.webhook_namespace = str(service["namespace"])
                break
    except (KubeError, EksinfError) as exc:
        facts.kube_error = exc.message
    gather_enablement(kube, facts)


def gather_enablement(kube: KubeClient, facts: HyperPodFacts) -> None:
    """The operator's own view: every SageMakerEndpointRegistration (all namespaces; none when
    the CRD is not served) and the Events in its namespace. Read again by each poll."""
    try:
        facts.registrations = kube.items(resource_path(REGISTRATION_API, REGISTRATION_KIND))
        facts.operator_events = kube.items(resource_path("v1", "Event", INFERENCE_NAMESPACE))
        facts.enablement_error = ""
    except (KubeError, EksinfError) as exc:
        facts.registrations = facts.operator_events = None
        facts.enablement_error = exc.message


@dataclass(frozen=True)
class Enablement:
    """Enablement and registration as the operator reports them (`enablement`)."""

    watcher: str  # enabled | enabling | stuck | unreported
    watcher_says: str  # the message that decided it ("" when unreported)
    registrations: tuple[tuple[str, str, str], ...]  # (namespace/name, state, condition message)

    @property
    def settled(self) -> bool:
        """Nothing left to wait for: the watcher is not enabling."""
        return self.watcher != "enabling"


def _when(event: dict[str, Any]) -> str:
    """An Event's time as RFC 3339 text (sortable): its last occurrence when it has one."""
    meta = event.get("metadata") or {}
    series = event.get("series") or {}
    return str(
        event.get("lastTimestamp")
        or series.get("lastObservedTime")
        or event.get("eventTime")
        or meta.get("creationTimestamp")
        or ""
    )


def _messages(registration: dict[str, Any]) -> list[str]:
    return [
        str(c.get("message") or "")
        for c in (registration.get("status") or {}).get("conditions") or []
        if c.get("message")
    ]


def enablement(facts: HyperPodFacts) -> Enablement | None:
    """The watcher's latest word in the operator's Events (the stuck message anywhere, Events or
    a registration's conditions, wins: it does not clear by itself), and each registration's
    state. None when unread."""
    if facts.registrations is None or facts.operator_events is None:
        return None
    watcher, says = "unreported", ""
    about = [e for e in facts.operator_events if "watcher" in str(e.get("message", "")).lower()]
    if about:
        latest = max(about, key=_when)
        says = str(latest.get("message", ""))
        lowered = says.lower()
        watcher = (
            "stuck"
            if STUCK_WATCHER.lower() in lowered
            else "enabling"
            if "enabling" in lowered
            else "enabled"
            if "enabled" in lowered
            else "unreported"
        )
    rows = []
    for reg in sorted(
        facts.registrations,
        key=lambda r: (r["metadata"].get("namespace", ""), r["metadata"].get("name", "")),
    ):
        meta = reg["metadata"]
        messages = _messages(reg)
        stuck = [m for m in messages if STUCK_WATCHER.lower() in m.lower()]
        if stuck:
            watcher, says = "stuck", stuck[0]
        state = str((reg.get("status") or {}).get("state") or "no state yet")
        rows.append(
            (f"{meta.get('namespace', '')}/{meta.get('name', '')}", state, "; ".join(messages))
        )
    return Enablement(watcher, says, tuple(rows))


def wait_enablement(
    kube: KubeClient,
    facts: HyperPodFacts,
    timeout: float,
    poll: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Re-read the operator's view while its watcher is still enabling, up to `timeout`
    seconds (a recreated cluster takes over 15 minutes). Never raises on the state: the
    contract's `inference-enablement` reports whatever it is at the end."""
    deadline = clock() + timeout
    while True:
        state = enablement(facts)
        if state is None or state.settled or clock() >= deadline:
            return
        say(
            f"the inference operator's watcher is enabling ({state.watcher_says}); waiting up to "
            f"{int(deadline - clock())} s more"
        )
        sleep(poll)
        gather_enablement(kube, facts)
