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
# certificate to the bucket and tag the imported ACM certificate.
TLS_ACTIONS = ("s3:PutObject", "s3:GetObject")
ACM_ACTION = "acm:AddTagsToCertificate"
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
    # What the profile expects (spec.hyperpod) and the pinned add-on version (versions.env).
    instance_type: str = ""
    execution_role_name: str = ""
    tls_bucket: str = ""
    addon_version: str = ""
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
    execution_role: RoleFacts | None = None
    alb_role: RoleFacts | None = None

    @property
    def arn(self) -> str:
        """The HyperPod cluster's ARN as SageMaker reports it ("" when unread)."""
        return str((self.cluster or {}).get("ClusterArn", ""))


ADDON_VERSION_KEY = "HYPERPOD_INFERENCE_ADDON_VERSION"  # versions.env


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
    if ADDON_VERSION_KEY not in versions:
        raise EksinfError(
            f"versions.env: missing key {ADDON_VERSION_KEY}",
            hint=f"Pin the inference add-on version, e.g. {ADDON_VERSION_KEY}=v1.0.0-eksbuild.1.",
            exit_code=CONTRACT,
        )
    return HyperPodFacts(
        name=cluster or block.cluster_name,
        instance_type=block.instance_type,
        execution_role_name=block.execution_role_name,
        tls_bucket=block.tls_bucket,
        addon_version=versions[ADDON_VERSION_KEY],
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
    """(action, resource) the execution role must be allowed, for `bucket` (the TLS bucket)."""
    return [(a, f"arn:aws:s3:::{bucket}/*") for a in TLS_ACTIONS] + [(ACM_ACTION, "*")]


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
