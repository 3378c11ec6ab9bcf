"""The one place boto3 clients come from, and the identity every AWS/kubectl/Helm call shares.

A command builds one `AwsSession` from an `AwsIdentity` (AWS profile, region, optional endpoint
URL) and takes every client from it. Anything handed to an external tool (a kubeconfig's exec
plugin env) is derived from the same identity, so an ambient `AWS_PROFILE`
can never make one call in a command act as someone else (DESIGN §1 principle 6).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import boto3
import botocore.exceptions as bce
from botocore.config import Config
from botocore.parsers import ResponseParserError
from botocore.signers import RequestSigner

from ..errors import ENVIRONMENT, FAILURE, EksinfError

ENDPOINT_ENV = "EKSINF_AWS_ENDPOINT_URL"

# Client errors that mean "these credentials are not usable", not "the request was wrong".
_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "AuthFailure",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "RequestExpired",
    }
)
# Everything a boto3 call can raise that is about AWS, not about our code.
AWS_FAILURES = (bce.BotoCoreError, bce.ClientError, ResponseParserError)
_LOGIN_HINT = (
    "Check the AWS identity: `aws sts get-caller-identity` (with --aws-profile if you use one); "
    "for SSO run `aws sso login`."
)


@dataclass(frozen=True)
class AwsIdentity:
    """Who every AWS call in one command acts as, and where it goes."""

    profile: str | None
    region: str
    endpoint_url: str | None = None

    @classmethod
    def resolve(cls, region: str, profile: str | None = None) -> AwsIdentity:
        """Pin the identity once: an explicit profile, else the ambient AWS_PROFILE at start."""
        chosen = profile or os.environ.get("AWS_PROFILE") or None
        endpoint = os.environ.get(ENDPOINT_ENV) or None
        return cls(profile=chosen, region=region, endpoint_url=endpoint)

    def exec_env(self) -> list[dict[str, str]]:
        """The `env` list of a kubeconfig exec plugin, pinning this identity for kubectl."""
        pinned = [{"name": "AWS_REGION", "value": self.region}]
        if self.profile:
            pinned.insert(0, {"name": "AWS_PROFILE", "value": self.profile})
        return pinned


@dataclass(frozen=True)
class Caller:
    account: str
    arn: str
    user_id: str

    @property
    def is_root(self) -> bool:
        return self.arn.endswith(":root")

    @property
    def principal_arn(self) -> str:
        """The ARN EKS access entries accept: an assumed-role session becomes its IAM role."""
        return principal_arn(self.arn)


def principal_arn(arn: str) -> str:
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        role = parts[5].split("/")[1]
        return f"arn:{parts[1]}:iam::{parts[4]}:role/{role}"
    return arn


def translate(exc: Exception, what: str) -> EksinfError:
    """Map a botocore failure onto the one error type: unreachable/credentials exit 4."""
    if isinstance(exc, EksinfError):
        return exc
    if isinstance(
        exc,
        bce.EndpointConnectionError
        | bce.ConnectTimeoutError
        | bce.ReadTimeoutError
        | bce.ConnectionClosedError,
    ):
        return EksinfError(
            f"{what}: AWS endpoint unreachable ({exc})",
            hint="Check the network path to AWS (or EKSINF_AWS_ENDPOINT_URL).",
            exit_code=ENVIRONMENT,
        )
    if isinstance(
        exc,
        bce.NoCredentialsError
        | bce.PartialCredentialsError
        | bce.ProfileNotFound
        | bce.TokenRetrievalError
        | bce.SSOError
        | bce.UnauthorizedSSOTokenError,
    ):
        return EksinfError(
            f"{what}: no usable AWS credentials ({exc})", hint=_LOGIN_HINT, exit_code=ENVIRONMENT
        )
    if isinstance(exc, bce.ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        if code in _CREDENTIAL_CODES:
            return EksinfError(
                f"{what}: AWS rejected the credentials ({code}: {message})",
                hint=_LOGIN_HINT,
                exit_code=ENVIRONMENT,
            )
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return EksinfError(f"{what}: {code or status}: {message.splitlines()[0][:200]}")
    if isinstance(exc, ResponseParserError):
        return EksinfError(f"{what}: the endpoint sent an unreadable answer ({str(exc)[:120]})")
    if isinstance(exc, bce.BotoCoreError):
        return EksinfError(f"{what}: {exc}", exit_code=ENVIRONMENT)
    return EksinfError(f"{what}: {exc}", exit_code=FAILURE)


def error_code(exc: Exception) -> str:
    if isinstance(exc, bce.ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


@contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Run AWS calls; any botocore failure leaves as an EksinfError saying what was attempted."""
    try:
        yield
    except AWS_FAILURES as exc:
        raise translate(exc, what) from exc


class AwsSession:
    """boto3 session + clients for one identity. Build one per command; never call boto3 elsewhere."""

    def __init__(self, identity: AwsIdentity, credentials: dict[str, str] | None = None) -> None:
        self.identity = identity
        with aws_errors("loading the AWS profile"):
            if credentials:
                # An explicit key (a freshly created one being probed) replaces the profile chain.
                self._boto = boto3.Session(
                    aws_access_key_id=credentials["AccessKeyId"],
                    aws_secret_access_key=credentials["SecretAccessKey"],
                    aws_session_token=credentials.get("SessionToken"),
                    region_name=identity.region,
                )
            else:
                self._boto = boto3.Session(
                    profile_name=identity.profile, region_name=identity.region
                )
        self._clients: dict[str, Any] = {}
        self._config = Config(
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 3, "mode": "standard"},
        )

    def client(self, service: str, region: str | None = None) -> Any:
        """A client in the identity's region, or in `region` for a service that answers from
        fixed regions only (the Price List API)."""
        where = region or self.identity.region
        key = service if region is None else f"{service}@{where}"
        if key not in self._clients:
            self._clients[key] = self._boto.client(
                service,
                region_name=where,
                endpoint_url=self.identity.endpoint_url,
                config=self._config,
            )
        return self._clients[key]

    def has_credentials(self, metadata: bool = True) -> bool:
        """Whether the credential chain finds credentials, without calling AWS. `metadata=False`
        leaves out the instance and container metadata providers, which wait on a network
        timeout where there is no metadata service (a laptop, most CI runners)."""
        with aws_errors("looking for AWS credentials"):
            if not metadata:
                resolver = self._boto._session.get_component("credential_provider")
                for name in ("iam-role", "container-role"):
                    resolver.remove(name)
            return self._boto.get_credentials() is not None

    @cached_property
    def caller(self) -> Caller:
        with aws_errors("checking the caller identity (sts get-caller-identity)"):
            who = self.client("sts").get_caller_identity()
        return Caller(account=who["Account"], arn=who["Arn"], user_id=who["UserId"])

    def credentials(self) -> dict[str, str]:
        """The resolved key of this identity (for writing the controllers' Secret)."""
        with aws_errors("reading the AWS credentials"):
            creds = self._boto.get_credentials()
            if creds is None:
                raise bce.NoCredentialsError()
            frozen = creds.get_frozen_credentials()
        out = {"AccessKeyId": frozen.access_key, "SecretAccessKey": frozen.secret_key}
        if frozen.token:
            out["SessionToken"] = frozen.token
        # Refreshable (SSO, assumed-role) credentials know when they end; botocore keeps that
        # on a private attribute and offers no public accessor.
        expiry = getattr(creds, "_expiry_time", None)
        if expiry is not None:
            out["Expiration"] = expiry.isoformat()
        return out

    def eks_token(self, cluster: str) -> str:
        """A bearer token for the EKS API: a presigned sts:GetCallerIdentity URL for this identity.

        This is what `aws eks get-token` produces; making it here keeps kube calls on the same
        identity as the AWS calls instead of whatever the kubeconfig's exec plugin would pick.
        """
        sts = self.client("sts")
        with aws_errors("signing an EKS token"):
            signer = RequestSigner(
                sts.meta.service_model.service_id,
                self.identity.region,
                "sts",
                "v4",
                self._boto.get_credentials(),
                self._boto.events,
            )
            url = signer.generate_presigned_url(
                {
                    "method": "GET",
                    "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15",
                    "body": {},
                    "headers": {"x-k8s-aws-id": cluster},
                    "context": {},
                },
                region_name=self.identity.region,
                expires_in=60,
                operation_name="",
            )
        encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
        return f"k8s-aws-v1.{encoded}"


def paginate(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    """Every item of a paginated list call (the caller wraps it in `aws_errors`)."""
    items: list[Any] = []
    for page in client.get_paginator(operation).paginate(**kwargs):
        items.extend(page.get(key, []))
    return items


def answer_field(item: Any, path: str, call: str) -> str:
    """A string field AWS's answer always carries (`State.Name` of an instance), or an
    environment error naming the call and the field: an answer without it did not come from AWS
    as documented (a proxy or a stand-in endpoint), and nothing is decided on a guess."""
    value = item
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else f"{value!r}, not a name"
        raise EksinfError(
            f"AWS answered {call} with {path} {shown}",
            hint=f"Check the endpoint answering for AWS ({ENDPOINT_ENV}, a proxy): AWS always "
            f"sends {path} there.",
            exit_code=ENVIRONMENT,
        )
    return value


def tags_of(resource: dict[str, Any]) -> dict[str, str]:
    """EC2/IAM `[{Key, Value}]` tags as a dict (EKS already uses a map). EC2 network interfaces
    answer theirs as `TagSet`, everything else as `Tags`. An entry without a string Key is not a
    tag anyone can match on, so it is skipped rather than trusted."""
    found = resource.get("Tags") or resource.get("TagSet") or []
    return {
        t["Key"]: str(t.get("Value", ""))
        for t in (found if isinstance(found, list) else [])
        if isinstance(t, dict) and isinstance(t.get("Key"), str)
    }
