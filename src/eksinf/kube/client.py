"""The one thin Kubernetes client: a few REST calls over `requests`, nothing more.

Manifests are produced elsewhere by pure functions; this layer only gets, applies (server-side
apply PATCH), merge-patches, lists and deletes them. An EKS kubeconfig whose user runs
`aws eks get-token` is served with a token signed by the command's own `AwsSession`, so kube
calls act as the same identity as the AWS calls (DESIGN §1 principle 6).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import requests
import urllib3
import yaml

from eksinf.core.atomic import write_file
from eksinf.core.net import is_loopback

from ..errors import CONTRACT, ENVIRONMENT, FAILURE, EksinfError
from .kubeconfig import KubeAuth as KubeAuth  # re-exported: callers name it beside the client
from .kubeconfig import exec_credential, forget_credential, read_token_file
from .kubeconfig import parse_kubeconfig as parse_kubeconfig
from .kubeconfig import read_kubeconfig as read_kubeconfig

FIELD_MANAGER = "eksinf"
MAX_RESPONSE_BYTES = 64 << 20  # the largest list eksinf reads (CRDs) is a few MB


class KubeError(EksinfError):
    """A Kubernetes API failure, with the HTTP status when the server answered."""

    def __init__(self, message: str, status: int | None, hint: str = "", exit_code: int = FAILURE):
        super().__init__(message, hint=hint, exit_code=exit_code)
        self.status = status


@dataclass(frozen=True)
class ResourceRef:
    """One object (`name` set) or a collection of one kind, as the API names it.

    Its REST path is the client's business: the plural and the scope come from the server's
    discovery (`KubeClient.path`), never from guessing English (`NATGateway` is served as
    `natgateways`, not `natgatewaies`)."""

    api_version: str
    kind: str
    namespace: str | None = None
    name: str | None = None

    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name or '(all)'}"


def resource_path(
    api_version: str, kind: str, namespace: str | None = None, name: str | None = None
) -> ResourceRef:
    """A kind's collection (optionally in a namespace) or one object of it."""
    return ResourceRef(api_version, kind, namespace, name)


def object_ref(doc: dict[str, Any]) -> ResourceRef:
    meta = doc.get("metadata", {})
    return ResourceRef(doc["apiVersion"], doc["kind"], meta.get("namespace"), meta.get("name"))


@dataclass(frozen=True)
class ApiResource:
    """What discovery says about one kind: its plural and whether it lives in a namespace."""

    plural: str
    namespaced: bool


class TokenSource(Protocol):
    """Mints a bearer token for an EKS cluster (the command's own AWS identity signs it)."""

    def eks_token(self, cluster: str) -> str: ...


class KubeAccessError(KubeError):
    """The server answered 401 (it does not know the credentials) or 403 (RBAC denies them)."""


# `User "x" cannot list resource "namespaces" in API group "" at the cluster scope`, as the RBAC
# authorizer words a 403 (k8s.io/apiserver endpoints/handlers/responsewriters: forbiddenMessage)
_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)?'
)


def _status_message(resp: requests.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300]
    return str(body.get("message", "")) if isinstance(body, dict) else ""


def access_error(
    auth: KubeAuth, method: str, path: str, resp: requests.Response
) -> KubeAccessError:
    """The 401/403 diagnosis, from the server's own answer.

    401: the server does not recognise the credentials (expired, or minted for another cluster).
    403: it knows the caller and RBAC forbids the call: the user it reports, the verb and the
    resource are named, with the binding that would allow it."""
    server = auth.server
    message = _status_message(resp)
    if resp.status_code == 401:
        return KubeAccessError(
            f"cluster {server} does not recognise the credentials of context "
            f"{auth.context or '(given)'} ({auth.credential()}): HTTP 401 Unauthorized on "
            f"{method} {path}",
            401,
            hint="The token or certificate is expired, or belongs to another cluster: log in "
            "again (re-run the exec plugin's login, refresh the token file), check the context "
            "names this cluster, and on EKS check that your IAM principal has an access entry "
            "(`eksinf enroll cluster --grant-access`, or `aws eks create-access-entry`).",
            exit_code=ENVIRONMENT,
        )
    found = _FORBIDDEN.search(message)
    if found is None:
        return KubeAccessError(
            f"cluster {server} forbids {method} {path} to the credentials of context "
            f"{auth.context or '(given)'}: HTTP 403 Forbidden: {message[:300]}",
            403,
            hint="The server knows the caller but does not allow this call: grant it through "
            "RBAC (a RoleBinding or ClusterRoleBinding), or on EKS an access policy on its "
            "access entry.",
            exit_code=ENVIRONMENT,
        )
    user, verb, resource = found["user"], found["verb"], found["resource"]
    group = found["group"] or ""
    where = f"in namespace {found['namespace']}" if found["namespace"] else "at the cluster scope"
    qualified = f"{resource}.{group}" if group else resource
    binding = (
        f"kubectl create rolebinding eksinf --namespace {found['namespace']} "
        f'--clusterrole=admin --user="{user}"'
        if found["namespace"]
        else f'kubectl create clusterrolebinding eksinf --clusterrole=cluster-admin --user="{user}"'
    )
    return KubeAccessError(
        f'cluster {server}: user "{user}" may not {verb} {qualified} {where} '
        f"(HTTP 403 Forbidden on {method} {path}): authenticated, but RBAC denies it",
        403,
        hint=f"Grant it a role that allows {verb} on {qualified} (for example: {binding}, or a "
        "narrower Role); on EKS, associate an access policy with its access entry "
        "(`eksinf enroll cluster --grant-access`, or `aws eks associate-access-policy`).",
        exit_code=ENVIRONMENT,
    )


_UNVERIFIED: set[str] = set()  # the servers this process has said it does not verify


def _say_unverified(server: str) -> None:
    if server not in _UNVERIFIED:
        _UNVERIFIED.add(server)
        print(
            f"eksinf: warning: {server}: the server's certificate is not verified "
            "(insecure-skip-tls-verify in the kubeconfig)",
            file=sys.stderr,
        )


class KubeClient:
    """REST calls to one cluster. Paths come from discovery; TLS settings from the kubeconfig.

    `requests` lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE replace a session's CA whenever a request
    does not name its own, so every request here names it (`verify=`): the kubeconfig's CA wins
    over the environment, as it does for kubectl. The same for the proxy (`proxy-url`) and the
    client certificate."""

    def __init__(self, auth: KubeAuth, token: str | None = None, timeout: float = 10.0) -> None:
        self.auth = auth
        self.server = auth.server
        self._timeout = timeout
        self._http = requests.Session()
        # A loopback API server is never reached through $HTTPS_PROXY (client-go, hence kubectl,
        # does not proxy loopback either): a proxy set for the internet would swallow it.
        host = urlparse(self.server).hostname or ""
        if not auth.proxy_url and is_loopback(host):
            self._http.trust_env = False
        self._token = token  # minted by the command itself (an EKS token): wins over the user's
        self._file_token: str | None = None
        self._verify: bool | str = False if auth.insecure else (auth.ca_file or True)
        self._proxies = (
            {"https": auth.proxy_url, "http": auth.proxy_url} if auth.proxy_url else None
        )
        self._discovered: dict[str, dict[str, ApiResource] | None] = {}

    @classmethod
    def from_kubeconfig(
        cls, path: Path | None, session: TokenSource | None = None, context: str | None = None
    ) -> KubeClient:
        """The client of `context` (default: the current one) of `path`; with no path, of the
        files KUBECONFIG lists (merged as kubectl merges them), else ~/.kube/config."""
        return cls.from_auth(read_kubeconfig(path, context), session)

    @classmethod
    def from_auth(cls, auth: KubeAuth, session: TokenSource | None = None) -> KubeClient:
        token = None
        if auth.eks_cluster and session is not None:
            token = session.eks_token(auth.eks_cluster)
        return cls(auth, token=token)

    def _credentials(self) -> tuple[str | None, tuple[str, str] | None]:
        """The bearer token and client certificate of the next request."""
        auth = self.auth
        if self._token:
            return self._token, auth.cert
        if auth.exec_plugin is not None:
            minted = exec_credential(auth)
            return minted.token, minted.cert or auth.cert
        if auth.token_file:
            if self._file_token is None:
                self._file_token = read_token_file(auth.token_file)
            return self._file_token, auth.cert
        return auth.token, auth.cert

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        bearer, cert = self._credentials()
        headers = dict(kwargs.pop("headers", None) or {})
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        request = functools.partial(
            self._http.request,
            method,
            url,
            timeout=self._timeout,
            verify=self._verify,
            cert=cert,
            proxies=self._proxies,
            headers=headers,
            **kwargs,
        )
        if self._verify is not False:
            return request()
        # insecure-skip-tls-verify: said once per cluster in eksinf's words (_say_unverified),
        # not as urllib3's warning on every request
        _say_unverified(self.server)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            return request()

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        url = f"{self.server}{path}"
        try:
            resp = self._send(method, url, **kwargs)
            if resp.status_code == 401 and self.auth.exec_plugin is not None and not self._token:
                # a plugin's cached credential may have been revoked early: mint once more
                forget_credential(self.auth)
                resp = self._send(method, url, **kwargs)
        except requests.RequestException as exc:
            via = f" through proxy {self.auth.proxy_url}" if self.auth.proxy_url else ""
            raise KubeError(
                f"cluster {self.server} unreachable{via} ({type(exc).__name__})",
                None,
                hint="Unreachable is not empty: nothing was read or changed on the cluster.",
                exit_code=ENVIRONMENT,
            ) from exc
        if resp.status_code in (401, 403):
            raise access_error(self.auth, method, path, resp)
        return resp

    def _raise(self, resp: requests.Response, what: str) -> None:
        try:
            detail = resp.json().get("message", resp.text)
        except ValueError:
            detail = resp.text
        raise KubeError(f"{what}: HTTP {resp.status_code}: {detail[:300]}", resp.status_code)

    def _json(self, resp: requests.Response) -> Any:
        if len(resp.content) > MAX_RESPONSE_BYTES:
            raise KubeError(
                f"cluster {self.server}: an answer of {len(resp.content)} bytes is larger than "
                f"any eksinf reads ({MAX_RESPONSE_BYTES})",
                resp.status_code,
                exit_code=ENVIRONMENT,
            )
        try:
            return resp.json()
        except ValueError as exc:
            raise KubeError(
                f"cluster {self.server}: answered {resp.request.method} {resp.url} with non-JSON",
                resp.status_code,
                hint="Is the kubeconfig's server a Kubernetes API server?",
                exit_code=ENVIRONMENT,
            ) from exc

    def _object(self, resp: requests.Response) -> dict[str, Any]:
        """`_json` of an answer that must be one JSON object (an object, a list or a Status)."""
        body = self._json(resp)
        if not isinstance(body, dict):
            raise KubeError(
                f"cluster {self.server}: answered {resp.request.method} {resp.url} with JSON "
                f"that is not an object (a {type(body).__name__})",
                resp.status_code,
                hint="Is the kubeconfig's server a Kubernetes API server?",
                exit_code=ENVIRONMENT,
            )
        return body

    def resources(self, api_version: str) -> dict[str, ApiResource] | None:
        """Discovery of one group/version: kind -> plural and scope; None when not served."""
        if api_version not in self._discovered:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            resp = self._call("GET", base)
            if resp.status_code == 404:
                self._discovered[api_version] = None
            elif resp.status_code != 200:
                self._raise(resp, f"discovering {api_version}")
            else:
                served = {}
                for item in self._json(resp).get("resources") or []:
                    if "/" not in str(item.get("name", "")):  # subresources: pods/log, ...
                        served[str(item["kind"])] = ApiResource(
                            str(item["name"]), bool(item.get("namespaced"))
                        )
                self._discovered[api_version] = served
        return self._discovered[api_version]

    def path(self, ref: ResourceRef) -> str | None:
        """The REST path of `ref`; None when the cluster does not serve its kind."""
        found = (self.resources(ref.api_version) or {}).get(ref.kind)
        if found is None:
            return None
        base = (
            f"/api/{ref.api_version}" if "/" not in ref.api_version else f"/apis/{ref.api_version}"
        )
        if found.namespaced and ref.namespace:
            base += f"/namespaces/{ref.namespace}"
        base += f"/{found.plural}"
        return f"{base}/{ref.name}" if ref.name else base

    def _must_path(self, ref: ResourceRef, what: str) -> str:
        path = self.path(ref)
        if path is None:
            raise KubeError(
                f"{what} {ref.label()}: cluster {self.server} does not serve {ref.kind} "
                f"({ref.api_version})",
                404,
                hint="Its CustomResourceDefinition is not installed on the cluster.",
                exit_code=CONTRACT,
            )
        return path

    def forget_discovery(self) -> None:
        """Discovery changes when CRDs are created: read it again on the next call."""
        self._discovered.clear()

    def version(self) -> dict[str, Any]:
        resp = self._call("GET", "/version")
        if resp.status_code != 200:
            self._raise(resp, "reading the cluster version")
        return self._object(resp)

    def get(self, ref: ResourceRef) -> dict[str, Any] | None:
        """The object (or list) `ref` names; None when it (or its kind) does not exist."""
        path = self.path(ref)
        if path is None:
            return None
        resp = self._call("GET", path)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            self._raise(resp, f"GET {path}")
        return self._object(resp)

    def get_path(self, path: str) -> dict[str, Any] | None:
        """GET a path that names no resource (a service proxy, /healthz); None on 404."""
        resp = self._call("GET", path)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            self._raise(resp, f"GET {path}")
        return self._object(resp)

    def items(self, ref: ResourceRef, label_selector: str = "") -> list[dict[str, Any]]:
        """The objects of a collection (those matching `label_selector`, when given)."""
        path = self.path(ref)
        if path is None:
            return []
        resp = self._call(
            "GET", path, params={"labelSelector": label_selector} if label_selector else None
        )
        if resp.status_code == 404:
            return []
        if resp.status_code != 200:
            self._raise(resp, f"GET {path}")
        return list(self._json(resp).get("items") or [])

    def apply(
        self, doc: dict[str, Any], dry_run: bool = False, force: bool = True
    ) -> dict[str, Any]:
        """Server-side apply: create or update to exactly these fields, owned by eksinf.

        `dry_run` asks the server to admit the object without storing it (dryRun=All).
        `force=False` lets the server refuse (HTTP 409) a field another manager owns."""
        path = self._must_path(object_ref(doc), "applying")
        resp = self._apply_patch(path, doc, force=force, dry_run=dry_run)
        if resp.status_code not in (200, 201):
            self._raise(resp, f"applying {doc['kind']} {doc['metadata'].get('name')}")
        return self._object(resp)

    def _apply_patch(
        self, path: str, doc: dict[str, Any], *, force: bool, dry_run: bool
    ) -> requests.Response:
        """The one server-side apply request `apply` and `admit` send."""
        params = {"fieldManager": FIELD_MANAGER}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        return self._call(
            "PATCH",
            path,
            params=params,
            # JSON is YAML, and the API server takes it as an apply patch. Writing Argo CD's
            # three CRDs (1.7 MB) took 5.9 s with PyYAML and 0.05 s with json (measured here).
            data=json.dumps(doc, sort_keys=True),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def admit(self, doc: dict[str, Any], dry_run: bool) -> tuple[int, dict[str, Any]]:
        """Server-side apply like `apply`, but the server's answer is returned, not raised:
        (HTTP status, body). A refusal's body is a Status whose `details.causes` name fields.
        404 with an empty body: the cluster does not serve the kind."""
        path = self.path(object_ref(doc))
        if path is None:
            return 404, {}
        resp = self._apply_patch(path, doc, force=True, dry_run=dry_run)
        body = self._json(resp) if resp.content else {}
        return resp.status_code, body if isinstance(body, dict) else {}

    def patch(self, ref: ResourceRef, body: dict[str, Any]) -> dict[str, Any] | None:
        """JSON merge patch; None when the object does not exist."""
        path = self.path(ref)
        if path is None:
            return None
        resp = self._call(
            "PATCH", path, json=body, headers={"Content-Type": "application/merge-patch+json"}
        )
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            self._raise(resp, f"patching {path}")
        return self._object(resp)

    def delete(self, ref: ResourceRef, propagation: str | None = None) -> bool:
        """Delete; False when it was already gone. `propagation="Orphan"` keeps dependents."""
        path = self.path(ref)
        if path is None:
            return False
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        resp = self._call("DELETE", path, json=body)
        if resp.status_code == 404:
            return False
        if resp.status_code not in (200, 202):
            self._raise(resp, f"deleting {path}")
        return True


def eks_kubeconfig(
    name: str, endpoint: str, ca_data: str, cluster: str, identity: Any
) -> dict[str, Any]:
    """A kubeconfig for an EKS cluster whose exec plugin pins this command's AWS identity."""
    args = ["eks", "get-token", "--cluster-name", cluster, "--region", identity.region]
    if identity.profile:
        args += ["--profile", identity.profile]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [
            {"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": args,
                        "env": identity.exec_env(),
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> None:
    """Write atomically (temp + rename) with mode 0600: it names credentials."""
    write_file(path, yaml.safe_dump(config, sort_keys=True).encode(), mode=0o600)
