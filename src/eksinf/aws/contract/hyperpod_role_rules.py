"""The hyperpod-eks contract rules on the inference operator itself: its controller, its
enablement, and the trust and policies of the roles it runs as (listed in rules.RULES)."""

from __future__ import annotations

from ...core.types import Doc
from ...model import iam
from ...model.checks import Finding
from .context import Context, check, rule
from .hyperpod import (
    ACM_ACTION,
    ALB_SERVICE_ACCOUNT,
    ANY_NAMESPACE_PROBE,
    CLUSTER_ARN_ENV,
    ENABLEMENT_WINDOW,
    INFERENCE_ADDON,
    INFERENCE_NAMESPACE,
    INFERENCE_POLICY,
    REGISTRATION_KIND,
    STUCK_WATCHER,
    enablement,
    role_checks,
)
from .hyperpod_rules import HP_ANCHOR, HYPERPOD, hyperpod_of, role_missing
from .rules_identity import irsa_refusal


def _env(deploy: Doc, name: str) -> str | None:
    for container in (deploy.get("spec", {}).get("template", {}).get("spec") or {}).get(
        "containers"
    ) or []:
        for env in container.get("env") or []:
            if env.get("name") == name:
                return str(env.get("value") or "")
    return None


def _available(deploy: Doc) -> bool:
    for cond in (deploy.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Available":
            status: object = cond.get("status")
            return status == "True"
    return False


@rule(
    "inference-controller",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element=f"the inference operator's controller-manager Available in `{INFERENCE_NAMESPACE}`, `{CLUSTER_ARN_ENV}` non-empty and equal to the HyperPod cluster's ARN",
    call=f"`GET deployments` in `{INFERENCE_NAMESPACE}` (`*-controller-manager`: `status.conditions`, the `{CLUSTER_ARN_ENV}` env var)",
    fix="set `hyperpodClusterArn` in the add-on configuration (the add-on writes the env var) and let the Deployment roll",
    why=f"an empty `{CLUSTER_ARN_ENV}` crash-loops the controller (the console's Quick Install has left it so); a stale one manages another cluster's endpoints",
)
def inference_controller(ctx: Context) -> list[Finding]:
    """The controller-manager is Available with the right HYPERPOD_CLUSTER_ARN."""
    hp = hyperpod_of(ctx)
    if not ctx.kube_used or not ctx.facts.version:
        return []  # endpoint-reachable speaks
    element = f"the inference controller-manager Available in {INFERENCE_NAMESPACE} with {CLUSTER_ARN_ENV}={hp.arn or '<the cluster ARN>'}"
    call = f"GET deployments in {INFERENCE_NAMESPACE}"
    fix = "set hyperpodClusterArn in the add-on configuration (the add-on writes the env var) and let the Deployment roll"
    if hp.controllers is None:
        return [check(element, "unknown", hp.controllers_error, call, fix)]
    if not hp.controllers:
        return [
            check(
                element,
                "fail",
                f"no *-controller-manager Deployment in {INFERENCE_NAMESPACE}",
                call,
                f"install the {INFERENCE_ADDON} add-on",
            )
        ]
    problems, seen = [], []
    for deploy in hp.controllers:
        name = deploy["metadata"]["name"]
        value = _env(deploy, CLUSTER_ARN_ENV)
        if not value:
            problems.append(f"{name}: {CLUSTER_ARN_ENV} is not set (the controller crash-loops)")
        elif hp.arn and value != hp.arn:
            problems.append(f"{name}: {CLUSTER_ARN_ENV}={value}, not {hp.arn}")
        if not _available(deploy):
            problems.append(f"{name}: not Available")
        seen.append(f"{name} {CLUSTER_ARN_ENV}={value}")
    return [
        check(
            element,
            "fail" if problems else "pass",
            "; ".join(problems or seen),
            call,
            fix if problems else "",
        )
    ]


RECREATE = (
    "recreate the HyperPod cluster through AWS's flow (delete it, wait until it is gone, create "
    "it again with the inference capability): after repeated enable and disable the watcher "
    "stays 'being deleted' and waiting does not clear it; the recreate takes over 15 minutes "
    f"(re-run enroll: it waits up to --wait-enablement, default {ENABLEMENT_WINDOW} s)"
)


@rule(
    "inference-enablement",
    severity="advisory",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element=f"the inference operator's watcher Enabled (not enabling, not '{STUCK_WATCHER}') and every `{REGISTRATION_KIND}` CreationCompleted, as the operator reports them",
    call=f"`GET events` in `{INFERENCE_NAMESPACE}` (the watcher's messages) + `GET {REGISTRATION_KIND.lower()}s` in every namespace (`status.state`, `status.conditions`)",
    fix=f"enabling: wait (enroll waits up to `--wait-enablement`); stuck ('{STUCK_WATCHER}'): recreate the HyperPod cluster; a failed registration: its condition message says why",
    why="the operator enables inference through its own watcher, which reaches Enabled while DescribeCluster's `InferenceConfig` stays empty; a cluster that passes every other check may still be enabling, or be stuck until it is recreated (warned, never blocking: enablement follows the cluster, not the stack)",
)
def inference_enablement(ctx: Context) -> list[Finding]:
    """The operator's watcher is Enabled and its endpoint registrations completed."""
    hp = hyperpod_of(ctx)
    if not ctx.kube_used or not ctx.facts.version:
        return []  # endpoint-reachable speaks
    element = f"the inference operator's watcher Enabled and its {REGISTRATION_KIND}s completed"
    call = f"GET events in {INFERENCE_NAMESPACE} + GET {REGISTRATION_KIND.lower()}s"
    state = enablement(hp)
    if state is None:
        return [check(element, "unknown", hp.enablement_error, call)]
    watcher = {
        "enabled": f"watcher Enabled ({state.watcher_says})",
        "enabling": f"watcher still enabling ({state.watcher_says})",
        "stuck": f"watcher stuck: {state.watcher_says}",
        "unreported": "the operator reports no watcher state",
    }[state.watcher]
    failed = [f"{n} {s}: {m or 'no message'}" for n, s, m in state.registrations if "Failed" in s]
    pending = [
        f"{n} {s}" for n, s, _ in state.registrations if not s.endswith(("Completed", "Failed"))
    ]
    done = [n for n, s, _ in state.registrations if s.endswith("Completed")]
    parts = [watcher]
    if failed:
        parts.append("registration failed: " + "; ".join(failed))
    if pending:
        parts.append("registration in progress: " + ", ".join(pending))
    if done:
        parts.append(f"{len(done)} registration(s) completed")
    if not state.registrations:
        parts.append(f"no {REGISTRATION_KIND} yet (none is made before a model is deployed)")
    detail = "; ".join(parts)
    if state.watcher == "stuck":
        return [check(element, "warn", detail, call, RECREATE)]
    if state.watcher == "enabling" or failed or pending:
        fix = (
            "wait for the watcher (enroll waits up to --wait-enablement)"
            if state.watcher == "enabling"
            else "a failed registration's condition message says why (the execution role's "
            "S3 and ACM permissions, the TLS bucket); one in progress completes on its own"
        )
        return [check(element, "warn", detail, call, fix)]
    return [check(element, "pass", detail, call)]


@rule(
    "inference-role-trust",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element="the execution role trusting the controller-manager's ServiceAccount from the EKS cluster's current OIDC issuer",
    call="`eks:DescribeCluster` (`identity.oidc.issuer`) + `iam:GetRole` (`AssumeRolePolicyDocument`), evaluated as IAM does (`model/iam.py`)",
    fix="point the role's trust at `oidc-provider/<current issuer>` with `<issuer>:sub` = `system:serviceaccount:hyperpod-inference-system:<controller-manager account>`",
    why="a recreated cluster has a new issuer: the operator fails `sts:AssumeRoleWithWebIdentity` and never enables inference",
)
def inference_role_trust(ctx: Context) -> list[Finding]:
    """The execution role trusts the operator's account on the current issuer."""
    hp = hyperpod_of(ctx)
    role = hp.execution_role
    element = f"role {hp.execution_role_name} trusting the inference operator's account from {hp.issuer or 'the current issuer'}"
    call = "eks:DescribeCluster identity.oidc.issuer + iam:GetRole (AssumeRolePolicyDocument)"
    missing = role_missing(role, "execution role")
    if missing:
        status = "fail" if role is not None and role.error == "no such role" else "unknown"
        return [
            check(
                element,
                status,
                missing,
                call,
                f"create role {hp.execution_role_name} (the add-on's executionRoleArn)",
            )
        ]
    assert role is not None
    accounts = sorted(
        {
            str(
                (d.get("spec", {}).get("template", {}).get("spec") or {}).get("serviceAccountName")
                or ""
            )
            for d in hp.controllers or []
        }
        - {""}
    )
    if not accounts:
        return [
            check(
                element,
                "skipped",
                "no controller-manager account read (see inference-controller)",
                call,
            )
        ]
    refusals = (irsa_refusal(role.trust, INFERENCE_NAMESPACE, a, hp.issuer) for a in accounts)
    problems = [r for r in refusals if r]
    fix = (
        f"update the trust of {role.name} to Federated oidc-provider/{hp.issuer} with {hp.issuer}:sub = "
        f"{iam.subject(INFERENCE_NAMESPACE, accounts[0])} (aws iam update-assume-role-policy)"
    )
    detail = "; ".join(problems) or ", ".join(iam.subject(INFERENCE_NAMESPACE, a) for a in accounts)
    return [
        check(
            element,
            "fail" if problems else "pass",
            detail,
            call,
            fix if problems else "",
        )
    ]


@rule(
    "alb-role-trust",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element=f"the ALB controller's role (add-on `alb.serviceAccount.roleArn`) trusting `system:serviceaccount:*:{ALB_SERVICE_ACCOUNT}` on the current issuer; the webhook's namespace reported",
    call="`eks:DescribeAddon` (`configurationValues`) + `iam:GetRole`; `GET serviceaccounts`, `GET mutatingwebhookconfigurations/aws-load-balancer-webhook`",
    fix=f"let the role trust `system:serviceaccount:*:{ALB_SERVICE_ACCOUNT}` (`StringLike`) from the current issuer",
    why="a second ALB controller in another namespace is common, and the one serving the ALB webhook decides which trust matters: a trust pinned to one namespace fails in the other",
)
def alb_role_trust(ctx: Context) -> list[Finding]:
    """The ALB controller's role trusts its account in any namespace."""
    hp = hyperpod_of(ctx)
    if hp.addon is None or hp.config is None:
        return []
    element = f"the ALB controller's role trusting system:serviceaccount:*:{ALB_SERVICE_ACCOUNT} from {hp.issuer or 'the current issuer'}"
    call = "eks:DescribeAddon (alb.serviceAccount.roleArn) + iam:GetRole; GET serviceaccounts, mutatingwebhookconfigurations"
    fix = f"let the role trust system:serviceaccount:*:{ALB_SERVICE_ACCOUNT} (StringLike) from oidc-provider/{hp.issuer}"
    where = []
    if hp.alb_namespaces:
        where.append(f"controller accounts in {', '.join(hp.alb_namespaces)}")
    if hp.webhook_namespace:
        where.append(f"webhook served from {hp.webhook_namespace}")
    suffix = f" ({'; '.join(where)})" if where else ""
    role = hp.alb_role
    if role is None:
        return [
            check(
                element, "skipped", "the add-on names no alb.serviceAccount.roleArn" + suffix, call
            )
        ]
    missing = role_missing(role, "ALB role")
    if missing:
        status = "fail" if role.error == "no such role" else "unknown"
        return [check(element, status, missing + suffix, call, fix)]
    namespaces = [
        ANY_NAMESPACE_PROBE,
        *(hp.alb_namespaces or []),
        *([hp.webhook_namespace] if hp.webhook_namespace else []),
    ]
    refused = [
        ns
        for ns in dict.fromkeys(namespaces)
        if iam.admits(role.trust, iam.irsa_request(ns, ALB_SERVICE_ACCOUNT, hp.issuer)) is not True
    ]
    if not refused:
        return [check(element, "pass", f"{role.name} admits any namespace{suffix}", call)]
    shown = ", ".join("any other namespace" if ns == ANY_NAMESPACE_PROBE else ns for ns in refused)
    detail = f"{role.name} does not admit {ALB_SERVICE_ACCOUNT} in {shown}{suffix}"
    return [check(element, "fail", detail, call, fix)]


@rule(
    "inference-role-policies",
    severity="required",
    kinds=HYPERPOD,
    anchor=HP_ANCHOR,
    element=f"the execution role holding `{INFERENCE_POLICY.rsplit('/', 1)[-1]}`, S3 access to the TLS bucket and `{ACM_ACTION}`",
    call="`iam:ListAttachedRolePolicies` + `iam:SimulatePrincipalPolicy` (s3:PutObject/GetObject/PutObjectTagging on the bucket's objects, s3:ListBucket on the bucket, acm:AddTagsToCertificate)",
    fix=f"attach `{INFERENCE_POLICY}` and allow s3:PutObject/GetObject/PutObjectTagging on `arn:aws:s3:::<bucket>/*`, s3:ListBucket on `arn:aws:s3:::<bucket>` and `{ACM_ACTION}`",
    why="without them the operator cannot write the endpoint's TLS certificate or tag the imported certificate, and the endpoint never completes",
)
def inference_role_policies(ctx: Context) -> list[Finding]:
    """The execution role's policies allow what the operator does."""
    hp = hyperpod_of(ctx)
    role = hp.execution_role
    element = f"role {hp.execution_role_name} with {INFERENCE_POLICY.rsplit('/', 1)[-1]}, S3 on {hp.tls_bucket} and {ACM_ACTION}"
    call = "iam:ListAttachedRolePolicies + iam:SimulatePrincipalPolicy"
    if role is None or role.trust is None:
        return []  # inference-role-trust speaks
    if role.attached is None or role.decisions is None:
        return [check(element, "unknown", role.error, call)]
    problems = []
    if INFERENCE_POLICY not in role.attached:
        problems.append(f"{INFERENCE_POLICY} is not attached")
    for action, resource in role_checks(hp.tls_bucket):
        decision = role.decisions.get(f"{action} {resource}", "unread")
        if decision != "allowed":
            problems.append(f"{action} on {resource}: {decision}")
    fix = (
        f"attach {INFERENCE_POLICY} and allow s3:PutObject/GetObject/PutObjectTagging on "
        f"arn:aws:s3:::{hp.tls_bucket}/*, s3:ListBucket on arn:aws:s3:::{hp.tls_bucket} and "
        f"{ACM_ACTION}"
    )
    return [
        check(
            element,
            "fail" if problems else "pass",
            "; ".join(problems) or "allowed",
            call,
            fix if problems else "",
        )
    ]
