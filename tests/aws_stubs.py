"""The only fakes in the AWS tests, and why each exists.

1. `EksExtrasFake`: moto 5.2.5 does not implement EKS add-ons, access entries or Pod Identity
   associations (its server answers 404 HTML). Exactly those operations are served from memory;
   every other EKS call (describe-cluster, ...) still goes to moto through the session factory.
   The IAM roles an association names are real moto roles (iam:GetRole goes to moto).
2. `CapacityReservationsFake`: moto 5.2.5 does not implement EC2 DescribeCapacityReservations.
   Only that one call is served from memory (honouring the `tag:<key>` and `state` filters the
   contract uses); every other EC2 call goes to moto.
3. `FakeKubeApi`: no Kubernetes API server exists on these machines. This is a small werkzeug app
   on 127.0.0.1 that serves only the REST paths `eksinf.aws.kube` calls (GET object/list,
   server-side-apply PATCH, merge PATCH, DELETE, /version), storing objects in memory.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import yaml
from botocore.exceptions import ClientError
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

# ---- 1. EKS operations moto lacks ----------------------------------------------------------

FAKED_EKS_OPERATIONS = (
    "list_addons",
    "describe_addon",
    "create_addon",
    "list_access_entries",
    "create_access_entry",
    "associate_access_policy",
    "list_associated_access_policies",
    "list_pod_identity_associations",
    "describe_pod_identity_association",
)


def _not_found(operation: str, what: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "ResourceNotFoundException", "Message": f"{what} not found"}},
        operation,
    )


@dataclass
class EksExtrasFake:
    addons: dict[str, dict[str, str]] = field(default_factory=dict)  # cluster -> name -> status
    access_entries: dict[str, list[str]] = field(default_factory=dict)  # cluster -> principals
    # (cluster, principal) -> [(policy ARN, access scope type)]
    policies: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    # cluster -> [{namespace, serviceAccount, roleArn?}]; the id is the index, as "a-<n>"
    associations: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    on_associate: list[Any] = field(default_factory=list)  # callbacks(cluster, principal)

    def wrap(self, real: Any) -> Any:
        fake = self

        class Client:
            def get_paginator(self, name: str) -> Any:
                if name not in FAKED_EKS_OPERATIONS:
                    return real.get_paginator(name)
                method = self.__getattr__(name)

                class OnePage:
                    def paginate(self, **kwargs: Any) -> list[dict]:
                        return [method(**kwargs)]

                return OnePage()

            def __getattr__(self, name: str) -> Any:
                if name in FAKED_EKS_OPERATIONS:
                    fake.calls.append(name)
                    return getattr(fake, f"_{name}")
                return getattr(real, name)

        return Client()

    def install(self, monkeypatch: Any) -> EksExtrasFake:
        """Route the session factory's EKS client through this fake for the faked operations."""
        from eksinf.aws.session import AwsSession

        original = AwsSession.client

        def client(session: AwsSession, service: str) -> Any:
            real = original(session, service)
            return self.wrap(real) if service == "eks" else real

        monkeypatch.setattr(AwsSession, "client", client)
        return self

    def _list_addons(self, clusterName: str, **_: Any) -> dict:
        return {"addons": sorted(self.addons.get(clusterName, {}))}

    def _describe_addon(self, clusterName: str, addonName: str) -> dict:
        status = self.addons.get(clusterName, {}).get(addonName)
        if status is None:
            raise _not_found("DescribeAddon", f"add-on {addonName}")
        return {"addon": {"addonName": addonName, "clusterName": clusterName, "status": status}}

    def _create_addon(self, clusterName: str, addonName: str, **_: Any) -> dict:
        self.addons.setdefault(clusterName, {})[addonName] = "ACTIVE"
        return self._describe_addon(clusterName, addonName)

    def _list_access_entries(self, clusterName: str, **_: Any) -> dict:
        return {"accessEntries": list(self.access_entries.get(clusterName, []))}

    def _create_access_entry(self, clusterName: str, principalArn: str, **_: Any) -> dict:
        self.access_entries.setdefault(clusterName, []).append(principalArn)
        return {"accessEntry": {"clusterName": clusterName, "principalArn": principalArn}}

    def _associate_access_policy(
        self, clusterName: str, principalArn: str, policyArn: str, accessScope: dict, **_: Any
    ) -> dict:
        if principalArn not in self.access_entries.get(clusterName, []):
            raise _not_found("AssociateAccessPolicy", f"access entry {principalArn}")
        held = self.policies.setdefault((clusterName, principalArn), [])
        held.append((policyArn, accessScope["type"]))
        for callback in self.on_associate:
            callback(clusterName, principalArn)
        return {"clusterName": clusterName, "principalArn": principalArn}

    def _list_associated_access_policies(self, clusterName: str, principalArn: str, **_: Any):
        if principalArn not in self.access_entries.get(clusterName, []):
            raise _not_found("ListAssociatedAccessPolicies", f"access entry {principalArn}")
        held = self.policies.get((clusterName, principalArn), [])
        return {
            "clusterName": clusterName,
            "principalArn": principalArn,
            "associatedAccessPolicies": [
                {"policyArn": arn, "accessScope": {"type": kind, "namespaces": []}}
                for arn, kind in held
            ],
        }

    def _list_pod_identity_associations(self, clusterName: str, **_: Any) -> dict:
        # The real summary carries no roleArn: only DescribePodIdentityAssociation does.
        return {
            "associations": [
                {
                    "clusterName": clusterName,
                    "namespace": a["namespace"],
                    "serviceAccount": a["serviceAccount"],
                    "associationId": f"a-{index}",
                }
                for index, a in enumerate(self.associations.get(clusterName, []))
            ]
        }

    def _describe_pod_identity_association(self, clusterName: str, associationId: str) -> dict:
        found = self.associations.get(clusterName, [])
        index = int(associationId.removeprefix("a-"))
        if index >= len(found):
            raise _not_found("DescribePodIdentityAssociation", f"association {associationId}")
        return {"association": {**found[index], "associationId": associationId}}


# ---- 2. EC2 capacity reservations (moto lacks DescribeCapacityReservations) ----------------


@dataclass
class CapacityReservationsFake:
    reservations: list[dict[str, Any]] = field(default_factory=list)  # EC2's own shape
    failure: str | None = None  # an error code to answer with instead (e.g. UnauthorizedOperation)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def add(self, reservation_id: str, tags: dict[str, str], state: str = "active") -> None:
        self.reservations.append(
            {
                "CapacityReservationId": reservation_id,
                "InstanceType": "p5e.48xlarge",
                "State": state,
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        )

    def describe_capacity_reservations(self, Filters: Any = (), **_: Any) -> dict:
        self.calls.append({"Filters": list(Filters)})
        if self.failure:
            raise ClientError(
                {"Error": {"Code": self.failure, "Message": "not allowed"}},
                "DescribeCapacityReservations",
            )
        found = []
        for cr in self.reservations:
            tags = {t["Key"]: t["Value"] for t in cr["Tags"]}
            keep = True
            for flt in Filters:
                name, values = flt["Name"], flt["Values"]
                if name.startswith("tag:"):
                    keep &= tags.get(name[4:]) in values
                elif name == "state":
                    keep &= cr["State"] in values
                else:
                    raise AssertionError(f"filter {name} is not faked")
            if keep:
                found.append(copy.deepcopy(cr))
        return {"CapacityReservations": found}

    def install(self, monkeypatch: Any) -> CapacityReservationsFake:
        """Route only describe_capacity_reservations of the session's EC2 client here."""
        from eksinf.aws.session import AwsSession

        original = AwsSession.client
        fake = self

        class Client:
            def __init__(self, real: Any) -> None:
                self._real = real

            def __getattr__(self, name: str) -> Any:
                if name == "describe_capacity_reservations":
                    return fake.describe_capacity_reservations
                return getattr(self._real, name)

        def client(session: AwsSession, service: str) -> Any:
            real = original(session, service)
            return Client(real) if service == "ec2" else real

        monkeypatch.setattr(AwsSession, "client", client)
        return self


# ---- 3. Kubernetes API ---------------------------------------------------------------------


def _merge(into: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


class FakeKubeApi:
    """In-memory objects by REST path; `log` records (method, path) of every request."""

    def __init__(self, token: str | None = None) -> None:
        self.objects: dict[str, dict] = {}
        self.log: list[tuple[str, str]] = []
        self.deletes: list[tuple[str, str | None]] = []
        self.token = token
        # An access entry without an access policy: authenticated, and forbidden everything
        # but /version (EKS maps system:authenticated to system:public-info-viewer).
        self.forbidden = False
        self.on_delete: list[Any] = []  # callbacks(path, obj): simulate a controller
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeKubeApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()  # refuse connections from now on, instead of hanging

    def kubeconfig(self, path: Any, token: str | None = None) -> Any:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "fake",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                    "users": [{"name": "u", "user": {"token": token or self.token or "t"}}],
                }
            )
        )
        return path

    def put(self, path: str, obj: dict) -> None:
        self.objects[path] = copy.deepcopy(obj)

    def _reply(self, status: int, body: Any) -> Response:
        return Response(json.dumps(body), status=status, content_type="application/json")

    def _app(self, environ: dict, start_response: Any) -> Any:
        request = Request(environ)
        response = self._handle(request)
        return response(environ, start_response)

    def _handle(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        self.log.append((request.method, path))
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._reply(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
        if path == "/version":
            return self._reply(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0"})
        if self.forbidden:
            return self._reply(403, {"kind": "Status", "message": "forbidden", "code": 403})
        if request.method == "GET":
            if path in self.objects:
                return self._reply(200, self.objects[path])
            children = [o for p, o in sorted(self.objects.items()) if p.rsplit("/", 1)[0] == path]
            if children:
                return self._reply(200, {"kind": "List", "items": children})
            return self._reply(404, {"kind": "Status", "message": f"{path} not found"})
        if request.method == "PATCH":
            ctype = request.headers.get("Content-Type", "")
            if ctype == "application/apply-patch+yaml":
                body = yaml.safe_load(request.get_data(as_text=True))
                old = self.objects.get(path, {})
                if "status" in old:
                    body["status"] = old["status"]
                self.objects[path] = body
                return self._reply(200 if old else 201, body)
            if ctype == "application/merge-patch+json":
                if path not in self.objects:
                    return self._reply(404, {"kind": "Status", "message": f"{path} not found"})
                _merge(self.objects[path], request.get_json())
                return self._reply(200, self.objects[path])
            return self._reply(415, {"kind": "Status", "message": f"unsupported {ctype}"})
        if request.method == "DELETE":
            if path not in self.objects:
                return self._reply(404, {"kind": "Status", "message": f"{path} not found"})
            options = request.get_json(silent=True) or {}
            self.deletes.append((path, options.get("propagationPolicy")))
            obj = self.objects.pop(path)
            for callback in self.on_delete:
                callback(path, obj)
            return self._reply(200, {"kind": "Status", "status": "Success"})
        return self._reply(405, {"kind": "Status", "message": "method not allowed"})
