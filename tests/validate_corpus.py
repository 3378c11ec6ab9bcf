"""A corpus of units broken in one field: each a copy of a resolved committed unit's document (as
the hub publishes it), or of the Argo CD Application eksinf generates, with one edit.

tests/test_validate_server.py runs every case through the offline check (validate.admission)
and the real kube-apiserver, and asserts they agree. `field` is where the server says the fault
is, in its own notation; SERVER_ONLY names the cases only the server can judge (the reason is
in docs/validate.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

DEL = object()  # an edit's value: remove the field


@dataclass(frozen=True)
class Case:
    id: str
    family: str  # core | karpenter | ack | argocd | hyperpod
    unit: str  # component/unit ("generated/application": the Application eksinf writes)
    kind: str
    name: str
    path: tuple  # the one edited field
    value: Any
    # the field the server names (its notation: `a.b[0].c`, map keys `[key]`); "" when its
    # message names none (a quantity the decoder refuses before validation)
    field: str


C = "spec.template.spec.containers[0]"
VLLM = ("inference-workloads/vllm", "Deployment", "vllm")
SMOKE = ("inference-workloads/smoke-cpu", "Deployment", "smoke-cpu")
POD = ("spec", "template", "spec")
CTR = (*POD, "containers", 0)

CASES: tuple[Case, ...] = (
    # core: the semantic rules no schema says
    Case("requests-over-limits", "core", *VLLM, (*CTR, "resources", "requests", "memory"), "16Gi", f"{C}.resources.requests"),
    Case("selector-mismatch", "core", *VLLM, ("spec", "selector", "matchLabels"), {"app.kubernetes.io/name": "other"}, "spec.template.metadata.labels"),
    Case("deployment-restart-never", "core", *SMOKE, (*POD, "restartPolicy"), "Never", "spec.template.spec.restartPolicy"),
    Case("container-name-upper", "core", *SMOKE, (*CTR, "name"), "Pause", f"{C}.name"),
    Case("env-name-digit", "core", *VLLM, (*CTR, "env", 1, "name"), "1HF_HOME", f"{C}.env[1].name"),
    Case("service-port-range", "core", "inference-workloads/vllm", "Service", "vllm", ("spec", "ports", 0, "port"), 70000, "spec.ports[0].port"),
    Case("container-port-name", "core", *VLLM, (*CTR, "ports", 0, "name"), "Http_Port", f"{C}.ports[0].name"),
    Case("service-port-name", "core", "inference-workloads/vllm", "Service", "vllm", ("spec", "ports", 0, "name"), "HTTP", "spec.ports[0].name"),
    Case("service-target-port-name", "core", "inference-workloads/vllm", "Service", "vllm", ("spec", "ports", 0, "targetPort"), "http--api", "spec.ports[0].targetPort"),
    Case("nodeport-on-clusterip", "core", "inference-workloads/vllm", "Service", "vllm", ("spec", "ports", 0, "nodePort"), 30080, "spec.ports[0].nodePort"),
    Case("pdb-min-and-max", "core", "karpenter/karpenter-controller", "PodDisruptionBudget", "karpenter", ("spec", "minAvailable"), 1, "spec"),
    Case("daemonset-rolling-zero", "core", "gpu-runtime/nvidia-device-plugin-controller", "DaemonSet", "nvidia-device-plugin", ("spec", "updateStrategy", "rollingUpdate"), {"maxUnavailable": 0, "maxSurge": 0}, "spec.updateStrategy.rollingUpdate.maxUnavailable"),
    Case("deployment-rolling-zero", "core", *SMOKE, ("spec", "strategy"), {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": 0}}, "spec.strategy.rollingUpdate.maxUnavailable"),
    Case("daemonset-unavailable-zero", "core", "gpu-runtime/nvidia-device-plugin-controller", "DaemonSet", "nvidia-device-plugin", ("spec", "updateStrategy", "rollingUpdate"), {"maxUnavailable": 0}, "spec.updateStrategy.rollingUpdate.maxUnavailable"),
    Case("selector-expression-mismatch", "core", *SMOKE, ("spec", "selector"), {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "NotIn", "values": ["smoke-cpu"]}]}, "spec.template.metadata.labels"),
    Case("statefulset-restart-onfailure", "core", "argocd/argocd-controller", "StatefulSet", "argocd-application-controller", (*POD, "restartPolicy"), "OnFailure", "spec.template.spec.restartPolicy"),
    Case("container-port-name-digits", "core", *VLLM, (*CTR, "ports", 0, "name"), "8080", f"{C}.ports[0].name"),
    Case("container-port-range", "core", *VLLM, (*CTR, "ports", 0, "containerPort"), 0, f"{C}.ports[0].containerPort"),
    # core: schema, quantities, metadata, unknown fields
    Case("replicas-string", "core", *VLLM, ("spec", "replicas"), "two", "spec.replicas"),
    Case("quantity-grammar", "core", *VLLM, (*CTR, "resources", "limits", "memory"), "14GB", ""),
    Case("deployment-unknown-field", "core", *VLLM, ("spec", "replicaz"), 1, "spec.replicaz"),
    Case("label-value", "core", *VLLM, ("metadata", "labels", "app.kubernetes.io/name"), "vllm server", "metadata.labels"),
    Case("service-clusterip-range", "core", "inference-workloads/vllm", "Service", "vllm", ("spec", "clusterIP"), "10.200.0.10", "spec.clusterIPs"),
    # Karpenter
    Case("nodepool-enum", "karpenter", "karpenter/nodepools", "NodePool", "general", ("spec", "disruption", "consolidationPolicy"), "Sometimes", "spec.disruption.consolidationPolicy"),
    Case("nodepool-weight-range", "karpenter", "karpenter/nodepools", "NodePool", "general", ("spec", "weight"), 1000, "spec.weight"),
    Case("nodepool-requirement-operator", "karpenter", "karpenter/nodepools", "NodePool", "general", ("spec", "template", "spec", "requirements", 0, "operator"), "Maybe", "spec.template.spec.requirements[0].operator"),
    Case("nodepool-unknown-field", "karpenter", "karpenter/nodepools", "NodePool", "general", ("spec", "priority"), 5, "spec.priority"),
    Case("nodeclass-ami-empty", "karpenter", "karpenter/nodeclasses", "EC2NodeClass", "general", ("spec", "amiSelectorTerms"), [], "spec.amiSelectorTerms"),
    Case("nodeclass-hop-limit", "karpenter", "karpenter/nodeclasses", "EC2NodeClass", "general", ("spec", "metadataOptions", "httpPutResponseHopLimit"), 99, "spec.metadataOptions.httpPutResponseHopLimit"),
    Case("nodeclass-role-and-profile", "karpenter", "karpenter/nodeclasses", "EC2NodeClass", "general", ("spec", "instanceProfile"), "some-profile", "spec"),
    # ACK: ec2, iam, eks
    Case("vpc-cidrs-type", "ack", "aws-network/network", "VPC", "inference-demo-vpc", ("spec", "cidrBlocks"), "10.42.0.0/16", "spec.cidrBlocks"),
    Case("vpc-unknown-field", "ack", "aws-network/network", "VPC", "inference-demo-vpc", ("spec", "enableDns"), True, "spec.enableDns"),
    Case("securitygroup-name-missing", "ack", "aws-network/network", "SecurityGroup", "inference-demo-cluster-sg", ("spec", "name"), DEL, "spec.name"),
    Case("iam-role-name-missing", "ack", "eks-cluster/iam-roles", "Role", "inference-demo-cluster-role", ("spec", "name"), DEL, "spec.name"),
    Case("iam-role-policies-type", "ack", "eks-cluster/iam-roles", "Role", "inference-demo-cluster-role", ("spec", "policies"), "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy", "spec.policies"),
    Case("eks-cluster-name-missing", "ack", "eks-cluster/cluster", "Cluster", "inference-demo", ("spec", "name"), DEL, "spec.name"),
    Case("eks-addon-name-type", "ack", "eks-cluster/addons", "Addon", "inference-demo-pod-identity-agent", ("spec", "name"), ["eks-pod-identity-agent"], "spec.name"),
    # Argo CD
    Case("application-destination-missing", "argocd", "generated/application", "Application", "demo-workload", ("spec", "destination"), DEL, "spec.destination"),
    Case("application-prune-type", "argocd", "generated/application", "Application", "demo-workload", ("spec", "syncPolicy", "automated", "prune"), "yes", "spec.syncPolicy.automated.prune"),
    # HyperPod
    Case("iec-replicas-type", "hyperpod", "hyperpod-inference/model", "InferenceEndpointConfig", "vllm", ("spec", "replicas"), "one", "spec.replicas"),
    Case("iec-unknown-field", "hyperpod", "hyperpod-inference/model", "InferenceEndpointConfig", "vllm", ("spec", "gpus"), 8, "spec.gpus"),
    Case("iec-model-source-enum", "hyperpod", "hyperpod-inference/model", "InferenceEndpointConfig", "vllm", ("spec", "modelSourceConfig", "modelSourceType"), "ftp", "spec.modelSourceConfig.modelSourceType"),
)  # fmt: skip

# Only the server can judge these (docs/validate.md says why): excluded from agreement.
SERVER_ONLY = {
    "service-clusterip-range": "the service IP range is the cluster's setting, not the unit's",
}


def broken(case: Case, doc: dict) -> dict:
    """A copy of `doc` with the case's one edit."""
    out = copy.deepcopy(doc)
    node = out
    for key in case.path[:-1]:
        node = node[key]
    if case.value is DEL:
        del node[case.path[-1]]
    else:
        node[case.path[-1]] = copy.deepcopy(case.value)
    return out


def holds(case: Case, doc: dict) -> bool:
    """Whether `doc` carries the case's edit."""
    node: Any = doc
    for key in case.path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return False
    last = case.path[-1]
    present = isinstance(node, dict) and last in node
    return not present if case.value is DEL else present and node[last] == case.value
