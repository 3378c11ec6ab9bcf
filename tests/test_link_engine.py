"""One link engine: the same profile and units give byte-identical units through every caller.

Callers: `eksinf lint` and `eksinf links resolve` (links.resolve_units), the hub's link-profile
(deploy.link_unit -> engine.link_body) and the embedded hub's resolve (LocalHub.resolve ->
engine.apply_link), and what each calls unresolved (lint's placeholder-unbound, `links resolve`'s
unresolved list, the hub's per-unit placeholders that the vet-placeholders gate reads).

The cases are generated (seeded, so a failure names its seed) with scalars chosen where the old
two engines disagreed: booleans and integers written through env setters, strings that look like
numbers or booleans, and look-alike placeholders (`replaceme`, 999999998) that are plain values.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from eksinf import lint
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.errors import CONTRACT, EksinfError
from eksinf.flows import deploy
from eksinf.hub.local import LocalHub
from eksinf.hub.protocol import UploadSource
from eksinf.links import Binding, resolve_units
from eksinf.model import placeholder
from eksinf.model.names import PROFILE_COMPONENT, PROFILE_UNIT, base_space, variant_space
from eksinf.model.placeholder import INT_PLACEHOLDER, PLACEHOLDER

SCALARS = [
    "us-west-2", "replaceme", "0123", "true", "1.5", "a.b/c", "", "x y", 0, 7, -3, 999999998,
    True, False,
]  # fmt: skip
COMPONENT, UNIT = "comp", "app"


def _units(rng: random.Random) -> list[dict]:
    env = [{"name": f"E{i}", "value": PLACEHOLDER} for i in range(3)]
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {
                "replicas": INT_PLACEHOLDER,
                "template": {
                    "spec": {
                        "initContainers": [
                            {"name": "init", "env": [{"name": "I0", "value": PLACEHOLDER}]}
                        ],
                        "containers": [{"name": "main", "env": env, "image": "img"}],
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "ns"},
            "data": {"k0": PLACEHOLDER, "k1": f"{PLACEHOLDER}-suffix", "note": "replaceme"},
        },
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "metadata": {"name": "thing"},
            "spec": {"a.b": PLACEHOLDER, "n": INT_PLACEHOLDER, "port": 999999998},
        },
    ]


# every placeholder field of _units, as (kind, name, path or setter)
FIELDS = [
    ("Deployment", "ns/app", "spec.replicas", None),
    ("Deployment", "ns/app", None, ("main", "E0")),
    ("Deployment", "ns/app", None, ("main", "E1")),
    ("Deployment", "ns/app", None, ("main", "E2")),
    ("Deployment", "ns/app", None, ("init", "I0")),
    ("ConfigMap", "ns/cfg", "data.k0", None),
    ("ConfigMap", "ns/cfg", "data.k1", None),
    ("example.com/v1/Thing", "/thing", "spec.a~1b", None),
    ("Thing", "/thing", "spec.n", None),
]


def _case(seed: int) -> tuple[dict, list[dict], list[Binding]]:
    rng = random.Random(seed)
    spec = {f"v{i}": rng.choice(SCALARS) for i in range(5)}
    spec["zones"] = [rng.choice(["a", "b", "c"]) for _ in range(3)]
    sources = [*spec, "zones.0", "zones.2"]
    bindings = []
    for line, (kind, name, path, setter) in enumerate(FIELDS, start=1):
        if rng.random() < 0.15:
            continue  # left unbound: every caller must call it unresolved
        bindings.append(
            Binding(
                component=COMPONENT,
                source=rng.choice(sources),
                unit=UNIT,
                kind=kind,
                name=name,
                path=path,
                container=setter[0] if setter else None,
                env=setter[1] if setter else None,
                file="bindings.yaml",
                line=line,
            )
        )
    return spec, _units(rng), bindings


def _profile_doc(spec: dict) -> dict:
    return {
        "apiVersion": "eks-inference.eksinf.dev/v1",
        "kind": "PlatformProfile",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def _through_links(spec: dict, docs: list[dict], bindings: list[Binding]) -> tuple[str, set]:
    """What lint resolves before its invariants, and what `links resolve` writes."""
    resolved = resolve_units({f"{COMPONENT}/{UNIT}": docs}, spec, bindings)[f"{COMPONENT}/{UNIT}"]
    left = {f"{d['kind']}:{p}" for d in resolved for p in placeholder.scan(d)}
    return dump_docs(resolved), left


def _lint_unbound(spec: dict, docs: list[dict], bindings: list[Binding]) -> set:
    report = lint.Report()
    lint.check_links(report, {f"{COMPONENT}/{UNIT}": docs}, spec, bindings)
    assert {f.check for f in report.findings} <= {"placeholder-unbound"}, report.findings
    return {f.message.rsplit(" ", 1)[-1] for f in report.findings}


def _through_hub(
    hub: LocalHub, seed: int, spec: dict, docs: list[dict], bindings: list[Binding]
) -> tuple[str, set]:
    variant = f"t{seed}"
    profile = _profile_doc(spec)
    hub.variant_upload(
        PROFILE_COMPONENT,
        variant + "base",
        UploadSource("profile", {f"{PROFILE_UNIT}.yaml": dump_docs([profile]).encode()}),
    )
    hub.variant_create(variant, variant_space(PROFILE_COMPONENT, variant + "base"))
    hub.variant_upload(
        COMPONENT,
        variant + "base",
        UploadSource("units", {f"{UNIT}.yaml": dump_docs(docs).encode()}),
    )
    hub.variant_create(variant, variant_space(COMPONENT, variant + "base"))
    space = variant_space(COMPONENT, variant)
    deploy.link_unit(hub, space, UNIT, bindings, profile, variant)
    unit = hub.get_unit(space, UNIT)
    left = {f"{p.split('/', 1)[0]}:{p.split(':', 1)[1]}" for p in unit.placeholders}
    return hub.unit_data(space, UNIT), left


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    hub = LocalHub(tmp_path_factory.mktemp("engine") / "hub.db")
    yield hub
    hub.close()


@pytest.mark.parametrize("seed", range(40))
def test_every_caller_writes_the_same_bytes(hub: LocalHub, seed: int) -> None:
    spec, docs, bindings = _case(seed)
    try:
        expected = _through_links(spec, docs, bindings)
    except EksinfError as exc:  # a list bound where a scalar goes: every caller refuses it
        assert exc.exit_code == CONTRACT
        with pytest.raises(EksinfError) as hub_exc:
            _through_hub(hub, seed, spec, docs, bindings)
        assert hub_exc.value.exit_code == CONTRACT
        return
    assert _through_hub(hub, seed, spec, docs, bindings) == expected, f"seed {seed}"
    assert "replaceme" in expected[0] and "999999998" in expected[0]  # look-alikes stay plain
    assert {p.split(":", 1)[1] for p in expected[1]} == {
        p for p in _lint_unbound(spec, docs, bindings)
    }


def test_the_cases_cover_what_the_old_engines_disagreed_on() -> None:
    """Booleans and integers through setters, strings like numbers, look-alikes, unbound fields,
    and refusals: without them the test above could not tell the two old engines apart."""
    seen = set()
    for seed in range(40):
        spec, _, bindings = _case(seed)
        for b in bindings:
            value = spec.get(b.source)
            if b.path is None and isinstance(value, bool):
                seen.add("bool setter")
            if b.path is None and isinstance(value, int) and not isinstance(value, bool):
                seen.add("int setter")
            if value in ("0123", "true", "replaceme"):
                seen.add("string look-alike")
            if b.source == "zones":
                seen.add("refused")
        if len(bindings) < len(FIELDS):
            seen.add("unbound")
    assert seen == {"bool setter", "int setter", "string look-alike", "refused", "unbound"}


def test_a_look_alike_is_plain_everywhere(hub: LocalHub, tmp_path: Path) -> None:
    """`replaceme` and 999999998 are values, not placeholders: no caller flags them, and the
    hub's vet-placeholders gate lets them publish."""
    docs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {
        "a": "replaceme", "b": 999999998}}]  # fmt: skip
    assert _lint_unbound({}, docs, []) == set()
    assert _through_links({}, docs, [])[1] == set()
    hub.create_space("engine-target", {}, allow_exists=True)
    hub.create_target("engine-target", "target", f"oci-layout:{tmp_path / 'oci'}")
    hub.create_trigger("engine-target", "gate", "vet-placeholders", "gate")
    hub.variant_upload("plain", "base", UploadSource("u", {"c.yaml": dump_docs(docs).encode()}))
    hub.variant_create("x", base_space("plain"), target="engine-target/target")
    assert hub.get_unit("plain-x", "c").placeholders == ()
    assert hub.publish("plain-x").release_num == 1
    docs[0]["data"]["a"] = PLACEHOLDER  # the real token is caught by the same gate
    assert _lint_unbound({}, docs, []) == {"data.a"}
    assert {p.split(":", 1)[1] for p in _through_links({}, docs, [])[1]} == {"data.a"}
    hub.variant_upload("plain", "base", UploadSource("u", {"c.yaml": dump_docs(docs).encode()}))
    assert json.loads(json.dumps(hub.get_unit("plain-base", "c").placeholders)) == [
        "ConfigMap//c:data.a"
    ]


def test_the_stack_resolves_to_the_same_bytes_in_links_resolve_and_the_hub(
    eksinf, stack_dir: Path, tmp_path: Path
) -> None:
    """The repository's stack end to end: `eksinf links resolve` with the stack's profile, and
    `eksinf sandbox up` (install, link-profile, resolve, publish) give the same linked units."""
    out = tmp_path / "resolved"
    profile = stack_dir / "render" / "platform-profile" / "profile.yaml"
    resolved = eksinf(
        "links", "resolve", "--profile", str(profile), "--out", str(out), cwd=stack_dir
    )
    assert resolved.code == 0, resolved.err
    up = eksinf("sandbox", "up", cwd=stack_dir)
    assert up.code == 0, up.err
    # the HyperPod component deploys only to a hyperpod-eks target: its own sandbox (variant hp)
    hp = eksinf("sandbox", "up", "--target-kind", "hyperpod-eks", "--name", "hp", cwd=stack_dir)
    assert hp.code == 0, hp.err
    from eksinf.links import load_bindings
    from eksinf.model.stack import load_stack

    stack = load_stack(stack_dir)
    eks = {c.name for c in stack.select(kind="eks")}
    linked = sorted({b.unit_key for b in load_bindings(stack)})
    assert len(linked) > 10
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    try:
        for key in linked:
            component, unit = key.split("/")
            variant = "sandbox" if component in eks else "hp"
            shipped = hub.unit_data(variant_space(component, variant), unit)
            assert shipped == (out / f"{key}.yaml").read_text(), key
            assert not placeholder.text_may_hold(shipped) or not [
                p for d in load_docs(shipped) for p in placeholder.scan(d)
            ]
    finally:
        hub.close()
