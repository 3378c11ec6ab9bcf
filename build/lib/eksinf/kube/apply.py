"""A plane's objects applied straight to a cluster, in the order Argo CD would apply them.

`deploy --apply` uses it for a target whose Argo CD does not (yet) sync: a bootstrap, a test
cluster, a bare API server. Every object goes through server-side apply with the one field
manager `eksinf`:

- CustomResourceDefinitions first (by sync wave), each waited for until the server says it is
  Established, then discovery is read again, so the custom resources that follow find their kind;
- then Namespaces, then everything else, by sync wave, in file order otherwise.

Conflicts: apply is sent without `force`, so a field another manager owns (kubectl, a
controller, Argo CD's own apply) is refused by the server (HTTP 409) and reported with the
object and the server's message naming the field and its manager (exit 3); nothing is taken over
unless the caller asks (`force=True`, `--force-conflicts`). Objects applied before the conflict
stay applied: server-side apply is idempotent, so the next run converges.

Whether an object changed is the server's answer: its resourceVersion before and after the apply
(an apply that changes nothing does not write, so the version stays).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CONTRACT, ENVIRONMENT
from ..model.configs import SYNC_WAVE
from .client import KubeClient, KubeError, object_ref, resource_path

CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
ESTABLISHED_TIMEOUT = 30.0  # seconds; the local server establishes a CRD in well under one
Say = Callable[[str], None]


@dataclass(frozen=True)
class Applied:
    """One object and what its apply did: created, configured or unchanged."""

    label: str
    action: str

    def as_json(self) -> dict[str, str]:
        return {"object": self.label, "action": self.action}


def _wave(doc: dict[str, Any]) -> int:
    notes = (doc.get("metadata") or {}).get("annotations") or {}
    try:
        return int(str(notes.get(SYNC_WAVE, "0")))
    except ValueError:
        return 0


def apply_order(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CRDs, then Namespaces, then the rest, each group by wave; stable otherwise. Namespaces
    lead whatever their wave: a namespaced object is refused (404) before its Namespace exists,
    and units do not always give the Namespace the earliest wave (Argo CD's install does not)."""
    rank = {CRD_API[1]: 0, "Namespace": 1}

    def key(doc: dict[str, Any]) -> tuple[int, int]:
        return (rank.get(str(doc.get("kind")), 2), _wave(doc))

    return sorted(docs, key=key)


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def apply_all(
    kube: KubeClient,
    docs: list[dict[str, Any]],
    *,
    force: bool = False,
    say: Say = lambda _m: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[Applied]:
    """Apply `docs` in `apply_order`; returns what each apply did, in that order."""
    done: list[Applied] = []
    ordered = apply_order(docs)
    crds = [d for d in ordered if d.get("kind") == CRD_API[1]]
    for doc in ordered:
        done.append(_apply_one(kube, doc, force))
        if done[-1].action != "unchanged":
            say(f"apply: {done[-1].label} {done[-1].action}")
        if crds and doc is crds[-1]:
            _wait_established(kube, crds, say, sleep, clock)
            kube.forget_discovery()  # the new kinds are served now
    return done


def _apply_one(kube: KubeClient, doc: dict[str, Any], force: bool) -> Applied:
    ref = object_ref(doc)
    before = kube.get(ref) if kube.path(ref) is not None else None
    if before is not None and _owns_no_field(doc):
        # Applying an object that sets no field beyond its name owns nothing, and the server
        # then records its own "before-first-apply" manager: a write on the second run
        # (measured on kube-apiserver v1.31). It exists, and that is all the document asks.
        return Applied(ref.label(), "unchanged")
    try:
        after = kube.apply(doc, force=force)
    except KubeError as exc:
        if exc.status != 409:
            raise
        server_says = exc.message.split(": HTTP 409: ", 1)[-1]  # names each field and manager
        raise KubeError(
            f"applying {ref.label()}: HTTP 409: {server_says} (another field manager owns it; "
            "eksinf applies as field manager `eksinf`)",
            409,
            hint="Change the field where its manager keeps it, or re-run with --force-conflicts "
            "to take it over (the other manager may change it back).",
            exit_code=CONTRACT,
        ) from exc
    old = ((before or {}).get("metadata") or {}).get("resourceVersion")
    new = (after.get("metadata") or {}).get("resourceVersion")
    action = "created" if before is None else "unchanged" if old == new else "configured"
    return Applied(ref.label(), action)


def _owns_no_field(doc: dict[str, Any]) -> bool:
    meta = doc.get("metadata") or {}
    return set(doc) <= {"apiVersion", "kind", "metadata"} and set(meta) <= {"name", "namespace"}


def _wait_established(
    kube: KubeClient,
    crds: list[dict[str, Any]],
    say: Say,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    deadline = clock() + ESTABLISHED_TIMEOUT
    waiting = [str(d["metadata"]["name"]) for d in crds]
    said = False
    while waiting:
        waiting = [
            n for n in waiting if not _established(kube.get(resource_path(*CRD_API, None, n)))
        ]
        if not waiting:
            return
        if clock() >= deadline:
            raise KubeError(
                f"CustomResourceDefinition(s) not Established after {int(ESTABLISHED_TIMEOUT)} "
                f"s: {', '.join(waiting)}",
                None,
                hint="See their status conditions (`kubectl get crd NAME -o yaml`): a name "
                "conflict or an invalid schema keeps a CRD from being served.",
                exit_code=ENVIRONMENT,
            )
        if not said:
            say(f"apply: waiting for {len(waiting)} CRD(s) to be Established")
            said = True
        sleep(0.2)
