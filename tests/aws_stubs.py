"""The only fakes in the AWS tests, and why each exists.

1. `EksExtrasFake`: moto 5.2.5 does not implement EKS add-ons, access entries or Pod Identity
   associations, nor DescribeAddonConfiguration (its server answers 404 HTML). Exactly those
   operations are served from memory (DescribeAddonConfiguration's answer checked against
   botocore's output shape);
   every other EKS call (describe-cluster, ...) still goes to moto through the session factory.
   The IAM roles an association names are real moto roles (iam:GetRole goes to moto).
2. `CapacityReservationsFake`: moto 5.2.5 does not implement EC2 DescribeCapacityReservations.
   Only that one call is served from memory (honouring the `tag:<key>` and `state` filters the
   contract uses); every other EC2 call goes to moto.
3. `FakeKubeApi`: no Kubernetes API server exists on these machines. This is a small werkzeug app
   on 127.0.0.1 that serves only the REST paths `eksinf.kube.client` calls (discovery, GET
   object/list, server-side-apply PATCH, merge PATCH, DELETE, /version), storing objects in
   memory. Controllers (Argo CD syncing, a Deployment becoming Available, pods) are simulated by
   the test's callbacks: that is what a bare API server (tests/test_kube_*.py use the real one)
   cannot do. Discovery serves every kind under the API's own plural rule.
4. `IamAsOnAws`: moto answers iam:ListInstanceProfiles (and ...ForRole) with each profile's tags;
   AWS does not (botocore's iam model, ListInstanceProfiles: "IAM resource-listing operations
   return a subset of the available attributes ... this operation does not return tags"). Those
   two answers are moto's with the tags removed. moto 5.2.5 lacks iam:ListInstanceProfileTags
   (served from moto's own GetInstanceProfile tags) and iam:SimulatePrincipalPolicy. With
   `from_policies` (as `iam_caller_as_on_aws` installs it) its decisions come from the
   principal's real policies in moto (a user's inline and attached ones
   and its groups', or a role's), each statement matched with moto's own policy matcher
   (moto.iam.access_control) on the action and the one resource asked; an explicit Deny wins, an
   Allow allows, nothing matching is implicitDeny. Statements with a Condition are not
   evaluated (teardown's actions need none). Without it every action is "allowed" (for tests
   about what a decision leads to, not where it comes from). An action listed in `denied` is
   answered with that decision either way. The two stubbed answers are checked against botocore's
   output shape (`assert_botocore_shape`); the listings are moto's as botocore parsed them. Every
   other IAM call goes to moto.
6. `SageMakerOrchestratorFake`: moto 5.2.5 implements sagemaker CreateCluster, DescribeCluster
   and ListClusterNodes but drops `Orchestrator` (its Cluster keeps no orchestrator), so a
   HyperPod cluster in moto names no EKS cluster. DescribeCluster is moto's answer with the
   `Orchestrator.Eks.ClusterArn` the test sets added, checked against botocore's output shape;
   every other SageMaker call (ListClusterNodes included) is moto's. `EksExtrasFake`'s
   DescribeAddon answer (with the `addon_fields` a test sets) is checked against botocore's
   shape.
5. `PriceListFake`: moto 5.2.5 has no Price List service (`pricing:GetProducts` answers 500).
   That one call is served from recorded-shape answers in tests/fixtures/pricing/ (request
   checked against botocore's input shape, answer against its output shape); every other call
   goes to moto, ec2:DescribeSpotPriceHistory included.
7. `odd_answers`: what a proxy or a stand-in endpoint could answer and AWS never does (a field
   missing, of another type, a price of NaN), which moto cannot be made to send: moto's real
   answer, changed by the test after botocore parsed it (botocore's `after-call` event).
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from botocore.exceptions import ClientError
from botocore.session import get_session
from botocore.validate import ParamValidator
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response


def route_client(monkeypatch: Any, service: str, wrap: Any) -> None:
    """Hand every client of `service` the session factory makes to `wrap(real client)`; other
    services' clients stay moto's. Each stand-in below installs itself through this."""
    from eksinf.aws.session import AwsSession

    original = AwsSession.client

    def client(session: AwsSession, name: str, region: str | None = None) -> Any:
        real = original(session, name, region)
        return wrap(real) if name == service else real

    monkeypatch.setattr(AwsSession, "client", client)


class Routed:
    """A client whose named operations go to stand-ins and all others to the real (moto) one."""

    def __init__(self, real: Any, operations: dict[str, Any]) -> None:
        self._real = real
        self._operations = operations

    def __getattr__(self, name: str) -> Any:
        if name in self._operations:
            return self._operations[name]
        return getattr(self._real, name)


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
    "describe_addon_configuration",
)


def _not_found(operation: str, what: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "ResourceNotFoundException", "Message": f"{what} not found"}},
        operation,
    )


@dataclass
class EksExtrasFake:
    addons: dict[str, dict[str, str]] = field(default_factory=dict)  # cluster -> name -> status
    # (cluster, name) -> further DescribeAddon fields (addonVersion, configurationValues)
    addon_fields: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # (add-on, version) -> configurationSchema, the JSON-schema string DescribeAddonConfiguration
    # returns; a test's stand-in value, never a real add-on's schema
    addon_schemas: dict[tuple[str, str], str] = field(default_factory=dict)
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
        route_client(monkeypatch, "eks", self.wrap)
        return self

    def _list_addons(self, clusterName: str, **_: Any) -> dict:
        return {"addons": sorted(self.addons.get(clusterName, {}))}

    def _describe_addon(self, clusterName: str, addonName: str) -> dict:
        status = self.addons.get(clusterName, {}).get(addonName)
        if status is None:
            raise _not_found("DescribeAddon", f"add-on {addonName}")
        extra = self.addon_fields.get((clusterName, addonName), {})
        answer = {"addonName": addonName, "clusterName": clusterName, "status": status, **extra}
        return assert_botocore_shape("eks", "DescribeAddon", {"addon": answer})

    def _describe_addon_configuration(self, addonName: str, addonVersion: str) -> dict:
        schema = self.addon_schemas.get((addonName, addonVersion))
        if schema is None:
            raise _not_found("DescribeAddonConfiguration", f"add-on {addonName} {addonVersion}")
        answer = {
            "addonName": addonName,
            "addonVersion": addonVersion,
            "configurationSchema": schema,
            "podIdentityConfiguration": [],
        }
        return assert_botocore_shape("eks", "DescribeAddonConfiguration", answer)

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
        operations = {"describe_capacity_reservations": self.describe_capacity_reservations}
        route_client(monkeypatch, "ec2", lambda real: Routed(real, operations))
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


_CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "NodePool",
    "EC2NodeClass",
    "NodeClaim",
    "Node",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}


def api_plural(kind: str) -> str:
    """The plural the API server derives for a kind (k8s.io/gengo's rule)."""
    low = kind.lower()
    if low.endswith(("s", "sh", "ch", "x")):
        return low + "es"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
        return low[:-1] + "ies"
    return low + "s"


def ref_path(ref: Any) -> str:
    """The REST path the fake stores `ref` (a kube.client.ResourceRef) under."""
    if isinstance(ref, str):
        return ref
    base = f"/api/{ref.api_version}" if "/" not in ref.api_version else f"/apis/{ref.api_version}"
    if ref.namespace and ref.kind not in _CLUSTER_SCOPED:
        base += f"/namespaces/{ref.namespace}"
    base += f"/{api_plural(ref.kind)}"
    return f"{base}/{ref.name}" if ref.name else base


# Kinds eksinf reads or writes on a cluster; the fake serves them in every group/version.
KNOWN_KINDS = {
    "Namespace", "Secret", "ConfigMap", "Pod", "ServiceAccount", "Service", "Deployment",
    "Application", "AppProject", "NodePool", "NodeClaim", "EC2NodeClass", "Cluster", "Role",
    "Policy", "VPC", "Subnet", "SecurityGroup", "InternetGateway", "NATGateway", "RouteTable",
    "ElasticIPAddress", "Nodegroup", "PodIdentityAssociation", "AccessEntry", "Addon",
    "InstanceProfile", "InferenceEndpointConfig", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleBinding", "RoleBinding", "DaemonSet", "StatefulSet", "NetworkPolicy",
    "PodDisruptionBudget", "Node", "Event", "SageMakerEndpointRegistration",
}  # fmt: skip


class _ByPath(dict):
    """Objects by REST path; a test may name one by its ResourceRef too."""

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(ref_path(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(ref_path(key), value)

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(ref_path(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(ref_path(key), default)

    def pop(self, key: Any, *default: Any) -> Any:
        return super().pop(ref_path(key), *default)


class FakeKubeApi:
    """In-memory objects by REST path; `log` records (method, path) of every request."""

    def __init__(self, token: str | None = None) -> None:
        self.objects: dict[Any, dict] = _ByPath()
        self.log: list[tuple[str, str]] = []
        self.deletes: list[tuple[str, str | None]] = []
        self.token = token
        # An access entry without an access policy: authenticated, and forbidden everything
        # but /version (EKS maps system:authenticated to system:public-info-viewer).
        self.forbidden = False
        self.on_delete: list[Any] = []  # callbacks(path, obj): simulate a controller
        self.on_patch: list[Any] = []  # callbacks(path, obj) after an apply or merge patch
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

    def put(self, path: Any, obj: dict) -> None:
        self.objects[ref_path(path)] = copy.deepcopy(obj)

    def get(self, path: Any) -> dict | None:
        return self.objects.get(ref_path(path))

    @staticmethod
    def _is_discovery(path: str) -> bool:
        parts = path.strip("/").split("/")
        return (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3)

    def _served(self, path: str) -> list[dict]:
        """Every kind stored under this group/version, plus those the tests' clients name:
        the fake serves any kind, as if its CRD were installed."""
        kinds = {str(o.get("kind")) for p, o in self.objects.items() if p.startswith(path + "/")}
        kinds |= KNOWN_KINDS
        return [
            {"name": api_plural(k), "kind": k, "namespaced": k not in _CLUSTER_SCOPED}
            for k in sorted(kinds)
        ]

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
        if request.method == "GET" and self._is_discovery(path):
            return self._reply(200, {"kind": "APIResourceList", "resources": self._served(path)})
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
                text = request.get_data(as_text=True)
                try:  # JSON is YAML; json parses a large body far faster
                    body = json.loads(text)
                except ValueError:
                    body = yaml.safe_load(text)
                old = self.objects.get(path, {})
                if "status" in old:
                    body["status"] = old["status"]
                self.objects[path] = body
                for callback in self.on_patch:
                    callback(path, self.objects[path])
                return self._reply(200 if old else 201, self.objects[path])
            if ctype == "application/merge-patch+json":
                if path not in self.objects:
                    return self._reply(404, {"kind": "Status", "message": f"{path} not found"})
                _merge(self.objects[path], request.get_json())
                for callback in self.on_patch:
                    callback(path, self.objects[path])
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


# ---- 4. IAM as AWS answers it ----------------------------------------------------------------


def assert_botocore_shape(service: str, operation: str, response: dict) -> dict:
    """Fail unless `response` fits botocore's output shape of `service`:`operation`: member
    names, types and required members (botocore's validator), and every enum value."""
    model = get_session().get_service_model(service).operation_model(operation)
    report = ParamValidator().validate(response, model.output_shape)
    assert not report.has_errors(), report.generate_report()
    _check_enums(response, model.output_shape, operation)
    return response


def _check_enums(value: Any, shape: Any, where: str) -> None:
    if shape.type_name == "structure" and isinstance(value, dict):
        for key, item in value.items():
            _check_enums(item, shape.members[key], f"{where}.{key}")
    elif shape.type_name == "list" and isinstance(value, list):
        for index, item in enumerate(value):
            _check_enums(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "map" and isinstance(value, dict):
        for item in value.values():
            _check_enums(item, shape.value, where)
    elif shape.type_name == "string" and shape.enum:
        assert value in shape.enum, f"{where}: {value!r} is not one of {shape.enum}"


def _no_tags(answer: dict) -> dict:
    for profile in answer.get("InstanceProfiles", []):
        profile.pop("Tags", None)
    return answer


@dataclass
class IamAsOnAws:
    denied: dict[str, str] = field(default_factory=dict)  # action -> implicitDeny|explicitDeny
    from_policies: bool = False  # decide from the principal's policies in moto (else: allowed)
    calls: list[tuple[str, dict]] = field(default_factory=list)

    def wrap(self, real: Any) -> Any:
        fake = self
        listing = {
            "list_instance_profiles": "ListInstanceProfiles",
            "list_instance_profiles_for_role": "ListInstanceProfilesForRole",
        }

        def stripped(name: str) -> Any:
            def call(**kwargs: Any) -> dict:
                fake.calls.append((name, kwargs))
                return _no_tags(getattr(real, name)(**kwargs))

            return call

        class Client:
            def get_paginator(self, name: str) -> Any:
                if name not in listing:
                    return real.get_paginator(name)
                pages = real.get_paginator(name)

                class Stripped:
                    def paginate(self, **kwargs: Any) -> Any:
                        fake.calls.append((name, kwargs))
                        for page in pages.paginate(**kwargs):
                            yield _no_tags(page)

                return Stripped()

            def __getattr__(self, name: str) -> Any:
                if name in listing:
                    return stripped(name)
                if name == "list_instance_profile_tags":
                    return lambda **kw: fake._list_instance_profile_tags(real, **kw)
                if name == "simulate_principal_policy":
                    return lambda **kw: fake._simulate_principal_policy(real, **kw)
                return getattr(real, name)

        return Client()

    def install(self, monkeypatch: Any) -> IamAsOnAws:
        """Route the session factory's IAM client through this stand-in."""
        route_client(monkeypatch, "iam", self.wrap)
        return self

    def _list_instance_profile_tags(self, real: Any, InstanceProfileName: str, **_: Any) -> dict:
        self.calls.append(("list_instance_profile_tags", {"name": InstanceProfileName}))
        profile = real.get_instance_profile(InstanceProfileName=InstanceProfileName)
        tags = sorted(profile["InstanceProfile"].get("Tags", []), key=lambda t: t["Key"])
        return assert_botocore_shape(
            "iam", "ListInstanceProfileTags", {"Tags": tags, "IsTruncated": False}
        )

    def _simulate_principal_policy(
        self,
        real: Any,
        PolicySourceArn: str,
        ActionNames: list[str],
        ResourceArns: list[str] | None = None,
        **_: Any,
    ) -> dict:
        resources = ResourceArns or ["*"]
        assert len(resources) == 1, "teardown simulates one resource per call"
        self.calls.append(
            ("simulate_principal_policy", {"arn": PolicySourceArn, "resource": resources[0]})
        )
        documents = principal_policies(real, PolicySourceArn) if self.from_policies else []
        results = [
            {
                "EvalActionName": action,
                "EvalResourceName": resources[0],
                "EvalDecision": self.denied.get(action)
                or (
                    policy_decision(documents, action, resources[0])
                    if self.from_policies
                    else "allowed"
                ),
                "MatchedStatements": [],
                "MissingContextValues": [],
            }
            for action in ActionNames
        ]
        return assert_botocore_shape(
            "iam",
            "SimulatePrincipalPolicy",
            {"EvaluationResults": results, "IsTruncated": False},
        )


def principal_policies(real: Any, arn: str) -> list[dict]:
    """Every policy document moto holds for the user or role `arn` names (inline, attached, and
    a user's groups'), as botocore parsed them."""

    def attached(listing: dict) -> list[dict]:
        docs = []
        for pol in listing["AttachedPolicies"]:
            version = real.get_policy(PolicyArn=pol["PolicyArn"])["Policy"]["DefaultVersionId"]
            answer = real.get_policy_version(PolicyArn=pol["PolicyArn"], VersionId=version)
            docs.append(answer["PolicyVersion"]["Document"])
        return docs

    kind, _, rest = arn.split(":", 5)[5].partition("/")
    name = rest.rsplit("/", 1)[-1]
    if kind == "role":
        inline = real.list_role_policies(RoleName=name)["PolicyNames"]
        docs = [real.get_role_policy(RoleName=name, PolicyName=n)["PolicyDocument"] for n in inline]
        return docs + attached(real.list_attached_role_policies(RoleName=name))
    assert kind == "user", arn
    inline = real.list_user_policies(UserName=name)["PolicyNames"]
    docs = [real.get_user_policy(UserName=name, PolicyName=n)["PolicyDocument"] for n in inline]
    docs += attached(real.list_attached_user_policies(UserName=name))
    for group in real.list_groups_for_user(UserName=name)["Groups"]:
        gname = group["GroupName"]
        for n in real.list_group_policies(GroupName=gname)["PolicyNames"]:
            docs.append(real.get_group_policy(GroupName=gname, PolicyName=n)["PolicyDocument"])
        docs += attached(real.list_attached_group_policies(GroupName=gname))
    return docs


def policy_decision(documents: list[dict], action: str, resource: str) -> str:
    """IAM's decision for one action on one resource under `documents`, each statement matched by
    moto's policy matcher (actions compared case-insensitively, as IAM does)."""
    from moto.iam.access_control import IAMPolicyStatement, PermissionResult

    allowed = False
    for doc in documents:
        doc = json.loads(doc) if isinstance(doc, str) else doc
        statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
        for stmt in statements:
            if "Condition" in stmt:
                continue
            lowered = {
                k: ([a.lower() for a in v] if isinstance(v, list) else v.lower())
                if k in ("Action", "NotAction")
                else v
                for k, v in stmt.items()
            }
            result = IAMPolicyStatement(lowered).is_action_permitted(action.lower(), resource)
            if stmt["Effect"] == "Deny" and result == PermissionResult.DENIED:
                return "explicitDeny"
            allowed |= stmt["Effect"] == "Allow" and result == PermissionResult.PERMITTED
    return "allowed" if allowed else "implicitDeny"


# ---- 6. SageMaker DescribeCluster's Orchestrator (moto drops it) ----------------------------


@dataclass
class SageMakerOrchestratorFake:
    orchestrators: dict[str, str] = field(default_factory=dict)  # HyperPod name -> EKS ARN

    def install(self, monkeypatch: Any) -> SageMakerOrchestratorFake:
        def wrap(real: Any) -> Routed:
            def describe_cluster(ClusterName: str) -> dict:
                answer = real.describe_cluster(ClusterName=ClusterName)
                answer.pop("ResponseMetadata", None)
                eks_arn = self.orchestrators.get(answer["ClusterName"])
                if eks_arn:
                    answer["Orchestrator"] = {"Eks": {"ClusterArn": eks_arn}}
                return assert_botocore_shape("sagemaker", "DescribeCluster", answer)

            return Routed(real, {"describe_cluster": describe_cluster})

        route_client(monkeypatch, "sagemaker", wrap)
        return self


# ---- 5. The Price List Query API (moto has none) ---------------------------------------------

PRICING_FIXTURES = Path(__file__).parent / "fixtures" / "pricing"


def recorded(name: str) -> dict:
    """A recorded-shape answer from tests/fixtures/pricing/ (its `response` member)."""
    return json.loads((PRICING_FIXTURES / name).read_text())["response"]


def priced_answer(instance_type: str, region: str, usd: str) -> dict:
    """The recorded g6.xlarge answer re-addressed to another type and region with the rate
    `usd`: the same botocore shape, for a rate a test chooses (a stand-in, not AWS's figure)."""
    answer = recorded("get-products-g6.xlarge-us-west-2.json")
    item = json.loads(answer["PriceList"][0])
    attrs = item["product"]["attributes"]
    attrs.update(
        instanceType=instance_type, regionCode=region, usagetype=f"BoxUsage:{instance_type}"
    )
    for term in item["terms"]["OnDemand"].values():
        for dim in term["priceDimensions"].values():
            dim["pricePerUnit"]["USD"] = usd
    return {**answer, "PriceList": [json.dumps(item)]}


@dataclass
class PriceListFake:
    failure: str | None = None  # an error code to answer with (e.g. AccessDeniedException)
    calls: list[dict[str, str]] = field(default_factory=list)
    rates: dict[tuple[str, str], str] = field(default_factory=dict)  # (type, region) -> USD

    def get_products(self, **params: Any) -> dict:
        model = get_session().get_service_model("pricing").operation_model("GetProducts")
        report = ParamValidator().validate(params, model.input_shape)
        assert not report.has_errors(), report.generate_report()
        match = {f["Field"]: f["Value"] for f in params.get("Filters", [])}
        self.calls.append(match)
        if self.failure:
            raise ClientError(
                {"Error": {"Code": self.failure, "Message": "not allowed"}}, "GetProducts"
            )
        name = f"get-products-{match.get('instanceType')}-{match.get('regionCode')}.json"
        key = (match.get("instanceType", ""), match.get("regionCode", ""))
        if (PRICING_FIXTURES / name).is_file():
            answer = recorded(name)
        elif key in self.rates:
            answer = priced_answer(*key, self.rates[key])
        else:  # the API's answer for a product it does not list
            answer = {"FormatVersion": "aws_v1", "PriceList": []}
        return assert_botocore_shape("pricing", "GetProducts", answer)

    def install(self, monkeypatch: Any) -> PriceListFake:
        route_client(
            monkeypatch, "pricing", lambda real: Routed(real, {"get_products": self.get_products})
        )
        return self


def iam_caller_as_on_aws(monkeypatch: Any, region: str = "us-west-2") -> IamAsOnAws:
    """IAM as on AWS, and the caller a real moto IAM user: moto answers its default test key
    with an sts ARN no IAM call accepts, where AWS answers a user's key with
    arn:aws:iam::<account>:user/<name>."""
    from eksinf.aws.session import AwsIdentity, AwsSession

    real = AwsSession(AwsIdentity.resolve(region)).client("iam")
    real.create_user(UserName="operator")
    # The operator administers the account (the simulator answers from this policy).
    admin = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    real.put_user_policy(UserName="operator", PolicyName="admin", PolicyDocument=json.dumps(admin))
    key = real.create_access_key(UserName="operator")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    return IamAsOnAws(from_policies=True).install(monkeypatch)


# ---- 7. answers AWS never sends ------------------------------------------------------------


def odd_answers(monkeypatch: Any, operation: str, change: Any, service: str = "ec2") -> None:
    """moto's answer to `operation`, changed in place by `change(parsed)` once botocore parsed
    it, for every `service` client the session factory makes."""

    def wrap(real: Any) -> Any:
        real.meta.events.register(
            f"after-call.{service}.{operation}", lambda parsed, **_: change(parsed)
        )
        return real

    route_client(monkeypatch, service, wrap)
