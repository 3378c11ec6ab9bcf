"""What the teardown tests share: the management cluster (`FakeKubeApi`, aws_stubs.py 3) holding
the mgmt plane's ACK objects and Argo CD, and the ACK controllers' key, a real moto IAM user's."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from aws_stubs import FakeKubeApi

from eksinf.aws import creds as creds_mod
from eksinf.aws.ack import ack_objects
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.model.stack import load_stack

ARGO = "/apis/apps/v1/namespaces/argocd/statefulsets/argocd-application-controller"
SECRET = f"/api/v1/namespaces/ack-system/secrets/{creds_mod.SECRET_NAME}"


@contextlib.contextmanager
def mgmt_cluster(tmp_path: Path, stack_dir: Path) -> Iterator[FakeKubeApi]:
    """Argo CD's controller at 1 replica and every ACK object of the mgmt plane, as configs/
    names them; `objects_seeded` lists them in deletion order, `config` is the kubeconfig."""
    objects = ack_objects(
        stack_dir / "configs", [c.name for c in load_stack(stack_dir).select(plane="mgmt")]
    )
    with FakeKubeApi(token="m") as api:
        api.put(ARGO, {"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 1}})
        for obj in objects:
            api.put(
                obj.path,
                {
                    "apiVersion": obj.api_version,
                    "kind": obj.kind,
                    "metadata": {"name": obj.name, "namespace": obj.namespace},
                },
            )
        api.objects_seeded = objects
        api.config = api.kubeconfig(tmp_path / "mgmt.kubeconfig")
        yield api


def stack_policy(stack_dir: Path) -> dict:
    """The ACK controllers' scoped policy the stack ships."""
    return json.loads((stack_dir / "iam" / "ack-controllers-policy.json").read_text())


def controllers_key(
    scope: StackScope, policies: dict[str, dict], user: str = "ack-controllers"
) -> dict[str, str]:
    """A real moto IAM user holding `policies` (name -> document, inline) and its new key."""
    iam = AwsSession(AwsIdentity.resolve(scope.region)).client("iam")
    iam.create_user(UserName=user)
    for name, doc in policies.items():
        iam.put_user_policy(UserName=user, PolicyName=name, PolicyDocument=json.dumps(doc))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return {"AccessKeyId": key["AccessKeyId"], "SecretAccessKey": key["SecretAccessKey"]}


def give_controllers(api: FakeKubeApi, creds: dict[str, str]) -> None:
    """Write the controllers' Secret (`aws-creds`) holding `creds` on the management cluster."""
    api.put(SECRET, creds_mod.credentials_secret(creds, "ack-system", "test", None))
