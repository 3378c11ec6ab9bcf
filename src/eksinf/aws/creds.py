"""Credentials for the ACK controllers on the management cluster.

The controllers read an INI file from the Secret `aws-creds` (key `credentials`, profile
`default`) in the ACK namespace. That Secret is written here, straight to the cluster, and is
never a hub unit (units are published; a credential must not be). The SDK reads the file once
at start, so every write is followed by a rollout restart of the ACK Deployments.

`create-user` makes a dedicated IAM user with the scoped policy from `iam/`. It rotates only the
access key it created itself (recorded as a tag on the user and an annotation on the Secret), so
a key someone else made on that user is never deleted behind their back.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import botocore.exceptions as bce

from ..errors import CONTRACT, ENVIRONMENT, FAILURE, EksinfError
from ..kube.client import KubeClient, resource_path
from .scope import StackScope
from .session import (
    AwsIdentity,
    AwsSession,
    aws_errors,
    error_code,
    tags_of,
    translate,
)

SECRET_NAME = "aws-creds"
SECRET_KEY = "credentials"
INLINE_POLICY = "eksinf-ack-controllers"
KEY_TAG = "eksinf.dev/access-key-id"  # the key create-user made: the only one it may rotate
ANN_EXPIRES = "eksinf.dev/expires-at"
ANN_KEY_ID = "eksinf.dev/access-key-id"
ANN_SOURCE = "eksinf.dev/credentials-source"
RESTART_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
PASSROLE_SERVICE_KEYS = ("iam:passedtoservice",)


# ---- the scoped policy -----------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _grants_passrole(action: str) -> bool:
    action = action.lower()
    return action in ("*", "iam:*", "iam:passrole") or (
        action.startswith("iam:")
        and "*" in action
        and "passrole".startswith(action[4:].rstrip("*"))
    )


def lint_policy(doc: Any) -> list[str]:
    """Problems in an IAM policy document: any Allow of iam:PassRole without a PassedToService
    condition (PassRole + CreateRole unconditioned is privilege escalation)."""
    problems: list[str] = []
    if not isinstance(doc, dict) or "Statement" not in doc:
        return ["not an IAM policy document (no Statement)"]
    for index, stmt in enumerate(_as_list(doc["Statement"])):
        label = stmt.get("Sid") or f"Statement[{index}]"
        if stmt.get("Effect") != "Allow":
            continue
        if "NotAction" in stmt:
            passrole = not any(_grants_passrole(a) for a in _as_list(stmt["NotAction"]))
        else:
            passrole = any(_grants_passrole(a) for a in _as_list(stmt.get("Action", [])))
        if not passrole:
            continue
        keys = {
            key.lower()
            for operator in (stmt.get("Condition") or {}).values()
            if isinstance(operator, dict)
            for key in operator
        }
        if not keys.intersection(PASSROLE_SERVICE_KEYS):
            problems.append(
                f"{label}: allows iam:PassRole without an iam:PassedToService condition"
            )
    return problems


@dataclass(frozen=True)
class Policy:
    path: Path
    text: str
    doc: dict[str, Any]


def load_policy(stack_root: Path) -> Policy:
    """The ACK controllers' scoped policy from the stack's `iam/` directory, linted."""
    folder = stack_root / "iam"
    preferred = folder / "ack-controllers-policy.json"
    candidates = [preferred] if preferred.is_file() else sorted(folder.glob("*.json"))
    if len(candidates) != 1:
        raise EksinfError(
            f"expected one IAM policy document in {folder}, found {len(candidates)}",
            hint="The stack ships the ACK controllers' scoped policy as iam/ack-controllers-policy.json.",
            exit_code=CONTRACT,
        )
    path = candidates[0]
    text = path.read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EksinfError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}", exit_code=CONTRACT
        ) from exc
    problems = lint_policy(doc)
    if problems:
        raise EksinfError(
            f"{path}: " + "; ".join(problems),
            hint="Condition PassRole on iam:PassedToService (eks, ec2, pods.eks).",
            exit_code=CONTRACT,
        )
    return Policy(path, text, doc)


# ---- the Secret (pure) -----------------------------------------------------------------------


def credentials_ini(creds: dict[str, str]) -> str:
    lines = [
        "[default]",
        f"aws_access_key_id = {creds['AccessKeyId']}",
        f"aws_secret_access_key = {creds['SecretAccessKey']}",
    ]
    if creds.get("SessionToken"):
        lines.append(f"aws_session_token = {creds['SessionToken']}")
    return "\n".join(lines) + "\n"


def namespace_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def credentials_secret(
    creds: dict[str, str], namespace: str, source: str, expires_at: str | None
) -> dict[str, Any]:
    annotations = {ANN_KEY_ID: creds["AccessKeyId"], ANN_SOURCE: source}
    if expires_at:
        annotations[ANN_EXPIRES] = expires_at
    body = base64.b64encode(credentials_ini(creds).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": SECRET_NAME,
            "namespace": namespace,
            "annotations": annotations,
            "labels": {"app.kubernetes.io/managed-by": "eksinf"},
        },
        "data": {SECRET_KEY: body},
    }


def restart_patch(when: str) -> dict[str, Any]:
    """What `kubectl rollout restart` sends: a pod-template annotation change."""
    return {"spec": {"template": {"metadata": {"annotations": {RESTART_ANNOTATION: when}}}}}


def minutes_left(expires_at: str | None) -> int | None:
    if not expires_at:
        return None
    try:
        end = dt.datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((end - dt.datetime.now(dt.UTC)).total_seconds() // 60)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---- writing to the management cluster -------------------------------------------------------


def write_secret(kube: KubeClient, namespace: str, creds: dict[str, str], source: str) -> list[str]:
    """Apply the namespace and Secret, then restart the ACK Deployments. Returns their names."""
    kube.apply(namespace_manifest(namespace))
    kube.apply(credentials_secret(creds, namespace, source, creds.get("Expiration")))
    return restart_controllers(kube, namespace)


def restart_controllers(kube: KubeClient, namespace: str) -> list[str]:
    deployments = kube.items(resource_path("apps/v1", "Deployment", namespace))
    names = sorted(d["metadata"]["name"] for d in deployments)
    when = _now()
    for name in names:
        kube.patch(resource_path("apps/v1", "Deployment", namespace, name), restart_patch(when))
    return names


@dataclass(frozen=True)
class SecretInfo:
    present: bool
    access_key_id: str | None = None
    temporary: bool = False
    expires_at: str | None = None
    source: str | None = None
    expired: bool = False


def _ini_fields(obj: dict[str, Any]) -> dict[str, str]:
    """The key = value lines of the Secret's INI file (one profile: `default`)."""
    ini = base64.b64decode((obj.get("data") or {}).get(SECRET_KEY, "")).decode(errors="replace")
    return dict(
        (k.strip(), v.strip()) for k, _, v in (ln.partition("=") for ln in ini.splitlines()) if _
    )


def read_secret(kube: KubeClient, namespace: str) -> SecretInfo:
    obj = kube.get(resource_path("v1", "Secret", namespace, SECRET_NAME))
    if obj is None:
        return SecretInfo(present=False)
    ann = obj.get("metadata", {}).get("annotations") or {}
    fields = _ini_fields(obj)
    expires = ann.get(ANN_EXPIRES)
    expired = False
    if expires:
        try:
            expired = dt.datetime.fromisoformat(expires.replace("Z", "+00:00")) <= dt.datetime.now(
                dt.UTC
            )
        except ValueError:
            expired = False
    return SecretInfo(
        present=True,
        access_key_id=fields.get("aws_access_key_id") or ann.get(ANN_KEY_ID),
        temporary="aws_session_token" in fields,
        expires_at=expires,
        source=ann.get(ANN_SOURCE),
        expired=expired,
    )


def secret_credentials(kube: KubeClient, namespace: str) -> dict[str, str] | None:
    """The key the ACK controllers act with, as their SDK reads it from the Secret (None when
    the Secret is missing or holds no key): what teardown asks AWS who it is."""
    obj = kube.get(resource_path("v1", "Secret", namespace, SECRET_NAME))
    fields = _ini_fields(obj) if obj is not None else {}
    if not fields.get("aws_access_key_id") or not fields.get("aws_secret_access_key"):
        return None
    creds = {
        "AccessKeyId": fields["aws_access_key_id"],
        "SecretAccessKey": fields["aws_secret_access_key"],
    }
    if fields.get("aws_session_token"):
        creds["SessionToken"] = fields["aws_session_token"]
    return creds


def ack_namespace(versions: Mapping[str, str]) -> str:
    """The namespace of the ACK controllers and their Secret: versions.env's ACK_NAMESPACE."""
    return versions.get("ACK_NAMESPACE", "ack-system")


def require_secret(
    cluster: str, kubeconfigs: list[Path], namespace: str, say: Callable[[str], None]
) -> bool:
    """The mgmt deploy's precheck: the ACK controllers read their credentials once, at start,
    so a plane deployed before the Secret exists reconciles nothing until someone restarts them.
    Refuses (exit 3, with the fix) when the cluster answers and has no Secret, or an expired
    one. A cluster eksinf has no kubeconfig for, or that does not answer, is not checked (said
    on stderr): the original let those through too. Returns whether the Secret was seen."""
    path = next((p for p in kubeconfigs if p.is_file()), None)
    if path is None:
        say(f"credentials not checked: no kubeconfig for cluster {cluster}")
        return False
    try:
        kube = KubeClient.from_kubeconfig(path)
        kube.version()
    except EksinfError as exc:
        if exc.exit_code != ENVIRONMENT:
            raise
        say(f"credentials not checked: cluster {cluster} does not answer ({exc.message})")
        return False
    info = read_secret(kube, namespace)
    fix = (
        f"eksinf creds use-existing --kubeconfig {path} (your identity) or "
        f"eksinf creds create-user --kubeconfig {path} --yes (a scoped IAM user)"
    )
    if not info.present:
        raise EksinfError(
            f"cluster {cluster} has no Secret {namespace}/{SECRET_NAME}: the ACK controllers "
            "read AWS credentials once, at start, and would create nothing",
            hint=f"Write it first: {fix}. To deploy anyway: --no-creds-check.",
            exit_code=CONTRACT,
        )
    if info.expired:
        raise EksinfError(
            f"the credentials in {cluster}'s Secret {namespace}/{SECRET_NAME} expired at "
            f"{info.expires_at}: the ACK controllers cannot reach AWS",
            hint=f"aws sso login && eksinf creds refresh --kubeconfig {path}. "
            "To deploy anyway: --no-creds-check.",
            exit_code=CONTRACT,
        )
    say(f"credentials present in {cluster} ({namespace}/{SECRET_NAME})")
    return True


# ---- modes -----------------------------------------------------------------------------------


def refuse_root(session: AwsSession) -> None:
    if session.caller.is_root:
        raise EksinfError(
            f"refusing to use the account root ({session.caller.arn})",
            hint="Root credentials cannot be scoped or revoked: use an IAM user or role, or "
            "`eksinf creds create-user` for a dedicated, scoped user.",
            exit_code=CONTRACT,
        )


def existing_credentials(session: AwsSession) -> dict[str, str]:
    """The caller's own resolved credentials, after checking they work and are not root."""
    _ = session.caller  # proves the key works before it is written anywhere
    refuse_root(session)
    return session.credentials()


def default_user_name(scope: StackScope) -> str:
    return f"{scope.stack}-ack"


def _get_user(iam: Any, name: str) -> dict[str, Any] | None:
    try:
        # botocore parses GetUser into its output shape: User is a structure (a dict)
        return cast(dict[str, Any], iam.get_user(UserName=name)["User"])
    except bce.ClientError as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise translate(exc, f"reading IAM user {name}") from exc


def _require_ours(iam: Any, scope: StackScope, name: str) -> dict[str, str]:
    tags = {t["Key"]: t["Value"] for t in iam.list_user_tags(UserName=name).get("Tags", [])}
    if tags.get(scope.tag_key) != scope.stack:
        raise EksinfError(
            f"IAM user {name} exists but is not this stack's (tag {scope.tag_key}="
            f"{tags.get(scope.tag_key, '<none>')})",
            hint="Pick another --user-name; eksinf only manages users it created.",
            exit_code=CONTRACT,
        )
    return tags


def probe_key(
    identity: AwsIdentity,
    creds: dict[str, str],
    user_arn: str,
    attempts: int,
    delay: float,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Call sts get-caller-identity with only the new key until IAM accepts it (propagation)."""
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            probe = AwsSession(identity, credentials=creds)
            if probe.caller.arn == user_arn:
                return attempt
            last = f"the key answers as {probe.caller.arn}, not {user_arn}"
        except EksinfError as exc:
            last = exc.message
        if attempt < attempts:
            sleep(delay)
    raise EksinfError(
        f"the new key {creds['AccessKeyId']} never became usable after {attempts} tries ({last})",
        hint="IAM propagation can be slow; re-run create-user (it rotates only its own key).",
        exit_code=ENVIRONMENT,
    )


@dataclass(frozen=True)
class CreatedUser:
    user: str
    arn: str
    access_key_id: str
    rotated: tuple[str, ...]
    probe_attempts: int
    creds: dict[str, str]


def create_user(
    session: AwsSession,
    scope: StackScope,
    policy: Policy,
    user_name: str,
    probe_attempts: int = 12,
    probe_delay: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> CreatedUser:
    refuse_root(session)
    iam = session.client("iam")
    with aws_errors(f"creating IAM user {user_name}"):
        user = _get_user(iam, user_name)
        if user is None:
            user = iam.create_user(
                UserName=user_name, Tags=[{"Key": scope.tag_key, "Value": scope.stack}]
            )["User"]
            tags: dict[str, str] = {}
        else:
            tags = _require_ours(iam, scope, user_name)
        iam.put_user_policy(
            UserName=user_name, PolicyName=INLINE_POLICY, PolicyDocument=policy.text
        )
        keys = [
            k["AccessKeyId"] for k in iam.list_access_keys(UserName=user_name)["AccessKeyMetadata"]
        ]
        ours = tags.get(KEY_TAG)
        rotated = tuple(k for k in keys if k == ours)
        if len(keys) - len(rotated) >= 2:
            raise EksinfError(
                f"IAM user {user_name} already has two access keys eksinf did not create "
                f"({', '.join(sorted(keys))})",
                hint="IAM allows two keys per user; delete one you no longer need, then re-run.",
                exit_code=CONTRACT,
            )
        for key in rotated:
            iam.delete_access_key(UserName=user_name, AccessKeyId=key)
        new = iam.create_access_key(UserName=user_name)["AccessKey"]
        iam.tag_user(UserName=user_name, Tags=[{"Key": KEY_TAG, "Value": new["AccessKeyId"]}])
    creds = {"AccessKeyId": new["AccessKeyId"], "SecretAccessKey": new["SecretAccessKey"]}
    tries = probe_key(session.identity, creds, user["Arn"], probe_attempts, probe_delay, sleep)
    return CreatedUser(user_name, user["Arn"], new["AccessKeyId"], rotated, tries, creds)


@dataclass(frozen=True)
class DeletedUser:
    user: str
    keys: tuple[str, ...]
    policies: tuple[str, ...]


def delete_user(session: AwsSession, scope: StackScope, user_name: str) -> DeletedUser:
    iam = session.client("iam")
    with aws_errors(f"deleting IAM user {user_name}"):
        if _get_user(iam, user_name) is None:
            raise EksinfError(
                f"no IAM user named {user_name}",
                hint="Nothing to delete (pass --user-name if you chose another name).",
                exit_code=FAILURE,
            )
        _require_ours(iam, scope, user_name)
        keys = tuple(
            k["AccessKeyId"] for k in iam.list_access_keys(UserName=user_name)["AccessKeyMetadata"]
        )
        for key in keys:
            iam.delete_access_key(UserName=user_name, AccessKeyId=key)
        inline = tuple(iam.list_user_policies(UserName=user_name)["PolicyNames"])
        for name in inline:
            iam.delete_user_policy(UserName=user_name, PolicyName=name)
        attached = iam.list_attached_user_policies(UserName=user_name)["AttachedPolicies"]
        for pol in attached:
            iam.detach_user_policy(UserName=user_name, PolicyArn=pol["PolicyArn"])
        iam.delete_user(UserName=user_name)
    return DeletedUser(user_name, keys, inline + tuple(p["PolicyName"] for p in attached))


def user_exists(session: AwsSession, user_name: str) -> dict[str, Any] | None:
    iam = session.client("iam")
    with aws_errors(f"reading IAM user {user_name}"):
        user = _get_user(iam, user_name)
        if user is None:
            return None
        keys = iam.list_access_keys(UserName=user_name)["AccessKeyMetadata"]
        tags = tags_of(iam.list_user_tags(UserName=user_name))
    return {"arn": user["Arn"], "keys": sorted(k["AccessKeyId"] for k in keys), "tags": tags}
