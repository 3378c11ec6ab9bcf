"""The flattening guard: one small chart per hazard, pulled over OCI from a real registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chartkit import CONFIGMAP, ChartSource, publish_stack

from eksinf.errors import CONTRACT

HOOKED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: migrate
  namespace: apps
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
"""
KEPT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  namespace: apps
  annotations:
    helm.sh/resource-policy: keep
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept-and-argo-knows
  namespace: apps
  annotations:
    helm.sh/resource-policy: keep
    argocd.argoproj.io/sync-options: Delete=false,Prune=false
"""
JOBS = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: once
  namespace: apps
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
  namespace: apps
spec:
  schedule: "0 0 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: argo-hooked
  namespace: apps
  annotations:
    argocd.argoproj.io/hook: PreSync
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
"""
WEBHOOKS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validate
webhooks:
  - name: v.example.com
    admissionReviewVersions: [v1]
    sideEffects: None
    clientConfig:
      caBundle: ""
      service: {name: hook, namespace: apps}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutate
  annotations:
    cert-manager.io/inject-ca-from: apps/hook-cert
webhooks:
  - name: m.example.com
    admissionReviewVersions: [v1]
    sideEffects: None
    clientConfig:
      caBundle: Zm9v
      service: {name: hook, namespace: apps}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validate-with-ca
webhooks:
  - name: ok.example.com
    admissionReviewVersions: [v1]
    sideEffects: None
    clientConfig:
      caBundle: Zm9v
      service: {name: hook, namespace: apps}
"""
LOOKUP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: looked-up
  namespace: apps
data:
  {{- $existing := (lookup "v1" "Secret" .Release.Namespace "token") }}
  found: {{ if $existing }}"yes"{{ else }}"no"{{ end }}
"""
RANDOM = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: random
  namespace: apps
data:
  password: {{ randAlphaNum 16 | quote }}
  {{- $ca := genCA "test-ca" 365 }}
  ca: {{ $ca.Cert | b64enc | quote }}
  at: {{ now | quote }}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: apps
stringData:
  token: {{ .Values.token | quote }}
"""
# Deterministic, but not provably so from the text (`tpl` evaluates text outside the templates):
# the determinism check renders it twice, then records the reference.
UNPROVEN = (
    CONFIGMAP
    + """\
  echoed: {{ tpl "{{ .Values.greeting }}" . | quote }}
"""
)
CAPABILITIES = """\
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
{{- else }}
apiVersion: v1
kind: ConfigMap
{{- end }}
metadata:
  name: metrics
  namespace: apps
"""


def oci_guard_stack(tmp_path: Path, registry: str, chart: ChartSource, eksinf, **kw) -> Path:
    """Push `chart`, write a stack rendering it as unit `app` of component `apps`, lock it."""
    return publish_stack(tmp_path, registry, [("app", chart)], **kw)


# hazard, chart, expected (file, resource) pairs
CASES = [
    pytest.param(
        "helm-hook",
        ChartSource("hook", templates={"job.yaml": HOOKED}),
        [("app-controller.yaml", "ConfigMap/apps/migrate")],
        id="helm-hook",
    ),
    pytest.param(
        "resource-policy-keep",
        ChartSource("keep", templates={"kept.yaml": KEPT}),
        [("app-controller.yaml", "ConfigMap/apps/kept")],
        id="resource-policy-keep",
    ),
    pytest.param(
        "bare-job",
        ChartSource("jobs", templates={"jobs.yaml": JOBS}),
        [("app-controller.yaml", "Job/apps/once"), ("app-controller.yaml", "CronJob/apps/nightly")],
        id="bare-job",
    ),
    pytest.param(
        "webhook-ca-bundle",
        ChartSource("webhooks", templates={"webhooks.yaml": WEBHOOKS}),
        [  # in Helm's install order: mutating webhooks before validating ones
            ("app-controller.yaml", "MutatingWebhookConfiguration/mutate"),
            ("app-controller.yaml", "ValidatingWebhookConfiguration/validate"),
        ],
        id="webhook-ca-bundle",
    ),
    pytest.param(
        "lookup",
        ChartSource("lookup", templates={"cm.yaml": LOOKUP}),
        [("lookup/templates/cm.yaml", "lookup/templates/cm.yaml")],
        id="lookup",
    ),
    pytest.param(
        "non-deterministic",
        ChartSource("random", templates={"cm.yaml": RANDOM}),
        [("random/templates/cm.yaml", "random/templates/cm.yaml")],
        id="non-deterministic",
    ),
    pytest.param(
        "secret",
        ChartSource("secret", templates={"secret.yaml": SECRET}, values={"token": "t"}),
        [("app-controller.yaml", "Secret/apps/creds")],
        id="secret",
    ),
    pytest.param(
        "capabilities-branch",
        ChartSource("caps", templates={"metrics.yaml": CAPABILITIES}),
        [("caps/templates/metrics.yaml", "caps/templates/metrics.yaml")],
        id="capabilities-branch",
    ),
    pytest.param(
        "crd-stub",
        ChartSource(
            "stub", templates={"cm.yaml": CONFIGMAP}, crds={"w.yaml": "../../crds/w.yaml\n"}
        ),
        [("stub/crds/w.yaml", "stub/crds/w.yaml")],
        id="crd-stub",
    ),
]


@pytest.mark.parametrize(("hazard", "chart", "expected"), CASES)
def test_each_hazard_is_reported_then_allowed(tmp_path, registry, eksinf, hazard, chart, expected):
    root = oci_guard_stack(tmp_path, registry, chart, eksinf)

    result = eksinf("guard", "--json", cwd=root)
    assert result.code == CONTRACT
    findings = json.loads(result.out)["findings"]
    assert [(f["file"], f["resource"]) for f in findings if f["hazard"] == hazard] == expected
    assert {f["hazard"] for f in findings} == {hazard}, "one chart, one kind of hazard"
    for f in findings:
        assert f["component"] == "apps"
        assert f["fix"] and f["explanation"] and not f["allowed"]

    text = eksinf("guard", cwd=root)
    assert text.code == CONTRACT
    assert f"HAZARD {hazard}: apps" in text.err
    assert expected[0][1] in text.err
    assert "  fix: " in text.err
    assert "eksinf: flattening guard: " in text.err and "unhandled hazard(s) in apps" in text.err

    # render refuses to write while a hazard is unhandled
    refused = eksinf("render", cwd=root)
    assert refused.code == CONTRACT
    assert not (root / "configs").exists()

    allow = "".join(
        f"- hazard: {hazard}\n  resource: {resource}\n  reason: reviewed in test {hazard}\n"
        for _, resource in expected
    )
    (root / "render/apps/HAZARDS.allow").write_text(allow)
    passed = eksinf("guard", cwd=root)
    assert passed.code == 0, passed.err
    assert f"guard: clean ({len(expected)} allowed finding(s))" in passed.out
    assert f"allowed: {hazard} apps" in passed.err
    assert "(render/apps/HAZARDS.allow)" in passed.err
    assert eksinf("render", cwd=root).code == 0


def test_clean_chart_has_no_findings(tmp_path, registry, eksinf):
    chart = ChartSource("clean", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "hi"})
    root = oci_guard_stack(tmp_path, registry, chart, eksinf)
    result = eksinf("guard", "--json", cwd=root)
    assert result.code == 0, result.err
    assert json.loads(result.out) == {"ok": True, "findings": [], "unusedAllows": []}


def test_allow_entry_without_a_reason_is_an_error(tmp_path, registry, eksinf):
    chart = ChartSource("noreason", templates={"secret.yaml": SECRET}, values={"token": "t"})
    allow = "- hazard: secret\n  resource: Secret/apps/creds\n  reason: '  '\n"
    root = oci_guard_stack(tmp_path, registry, chart, eksinf, allow=allow)
    result = eksinf("guard", cwd=root)
    assert result.code == CONTRACT
    assert (
        "eksinf: render/apps/HAZARDS.allow: entry 1 (secret Secret/apps/creds): "
        "an allow entry needs a reason" in result.err
    )


def test_allow_entry_with_unknown_hazard_is_an_error(tmp_path, registry, eksinf):
    chart = ChartSource("unknownhazard", templates={"cm.yaml": CONFIGMAP})
    allow = "- hazard: helm-hooks\n  resource: ConfigMap/apps/x\n  reason: typo\n"
    root = oci_guard_stack(tmp_path, registry, chart, eksinf, allow=allow)
    result = eksinf("guard", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/HAZARDS.allow: entry 1: unknown hazard 'helm-hooks'" in result.err
    assert "Known hazards: helm-hook, resource-policy-keep," in result.err


@pytest.mark.parametrize(
    ("allow", "message"),
    [
        ("hazard: secret\n", "expected a list of {hazard, resource, reason} entries"),
        ("- just a string\n", "entry 1: expected a mapping"),
        ("- hazard: secret\n  reason: r\n", "entry 1: missing resource"),
        ("- hazard: secret\n  hazard: lookup\n", "duplicate key"),
    ],
)
def test_malformed_allow_file(tmp_path, registry, eksinf, allow, message):
    chart = ChartSource("badallow", templates={"cm.yaml": CONFIGMAP})
    root = oci_guard_stack(tmp_path, registry, chart, eksinf, allow=allow)
    result = eksinf("guard", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/HAZARDS.allow" in result.err
    assert message in result.err


def test_allow_entry_for_another_resource_does_not_allow(tmp_path, registry, eksinf):
    chart = ChartSource("other", templates={"secret.yaml": SECRET}, values={"token": "t"})
    allow = "- hazard: secret\n  resource: Secret/apps/other\n  reason: not this one\n"
    root = oci_guard_stack(tmp_path, registry, chart, eksinf, allow=allow)
    result = eksinf("guard", cwd=root)
    assert result.code == CONTRACT
    assert "HAZARD secret: apps/app-controller.yaml: Secret/apps/creds" in result.err
    assert "entry secret Secret/apps/other matches nothing" in result.err


def test_hazards_in_handwritten_units_are_found_too(tmp_path, registry, eksinf):
    chart = ChartSource("handwritten", templates={"cm.yaml": CONFIGMAP})
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: mine\n  namespace: apps\n"
    root = oci_guard_stack(tmp_path, registry, chart, eksinf, handwritten={"mine.yaml": secret})
    result = eksinf("guard", "--json", cwd=root)
    assert result.code == CONTRACT
    [finding] = json.loads(result.out)["findings"]
    assert (finding["file"], finding["resource"], finding["hazard"]) == (
        "mine.yaml",
        "Secret/apps/mine",
        "secret",
    )


def test_guard_component_filter_checks_only_that_component(tmp_path, registry, eksinf):
    chart = ChartSource("filtered", templates={"secret.yaml": SECRET}, values={"token": "t"})
    root = oci_guard_stack(tmp_path, registry, chart, eksinf)
    assert eksinf("guard", "--component", "apps", cwd=root).code == CONTRACT
    only_base = eksinf("guard", "--component", "base", cwd=root)
    assert only_base.code == 0, only_base.err


def test_committed_stack_guard_finds_no_crd_stubs_in_the_rebuilt_mirror(
    stack_dir, chart_mirror, eksinf
):
    """The mirror's Karpenter archive now holds real CRDs: no stub, and no allow entry left."""
    result = eksinf("guard", "--json", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert [f for f in report["findings"] if f["hazard"] == "crd-stub"] == []
    assert "crd-stub" not in (stack_dir / "render/karpenter/HAZARDS.allow").read_text()
    assert "matches nothing" not in result.err
    assert all(f["reason"] for f in report["findings"])


def test_determinism_reference_is_recorded_and_checked(tmp_path, registry, monkeypatch):
    """A render of inputs seen before is compared with the record of that earlier render.
    (The derived-data cache is off: a render it serves was checked when it was stored, see
    test_a_checked_render_is_served_from_the_cache; this is the record's own check.)"""
    from eksinf.build.chartsplit import REFERENCES
    from eksinf.build.guard import check
    from eksinf.build.render import render_stack
    from eksinf.core import cache
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")
    chart = ChartSource("recorded", templates={"cm.yaml": UNPROVEN}, values={"greeting": "x"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    stack = load_stack(root)

    first = render_stack(stack)
    [render] = first.outputs[1].charts
    assert render.reference_source == "second render"
    records = tmp_path / "cache" / "derived" / REFERENCES
    [record] = records.iterdir()
    assert check(first).ok

    again = render_stack(stack)
    assert again.outputs[1].charts[0].reference_source == "recorded render"
    assert check(again).ok

    # an earlier run that produced other bytes for the same inputs means non-determinism
    digests = json.loads(cache.read_record(REFERENCES, record.name) or b"")
    digests["recorded/templates/cm.yaml"] = "0" * 64
    cache.write_record(REFERENCES, record.name, json.dumps(digests).encode())
    report = check(render_stack(stack))
    [finding] = report.blocking
    assert (finding.hazard, finding.resource) == ("non-deterministic", "recorded/templates/cm.yaml")
    assert finding.detail == "differs from a recorded render of the same inputs"


def test_non_deterministic_output_is_never_recorded(tmp_path, registry, monkeypatch):
    from eksinf.build.chartsplit import REFERENCES
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    chart = ChartSource("unrecorded", templates={"cm.yaml": RANDOM})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    render_stack(load_stack(root))
    assert not (tmp_path / "cache" / "derived" / REFERENCES).exists()
    assert not (tmp_path / "cache" / "derived" / "helm").exists()  # nor its output cached


def test_a_checked_render_is_served_from_the_cache(tmp_path, registry, monkeypatch):
    """Once two renders of the same inputs agreed, later runs take the output from the
    derived-data cache without starting the engine; EKSINF_NO_CACHE=1 runs it again."""
    from eksinf.build.guard import check
    from eksinf.build.helm import SdkEngine
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []
    real = SdkEngine.render

    def counted(self, archive, values, opts, templates=True):
        calls.append(opts.release)
        return real(self, archive, values, opts, templates)

    monkeypatch.setattr(SdkEngine, "render", counted)
    chart = ChartSource("served", templates={"cm.yaml": UNPROVEN}, values={"greeting": "x"})
    stack = load_stack(publish_stack(tmp_path, registry, [("app", chart)]))
    first = render_stack(stack)
    assert len(calls) == 2  # the render and its determinism check
    again = render_stack(stack)  # the whole render, from the cache
    assert len(calls) == 2 and again.files() == first.files()
    assert again.outputs[1].charts[0].reference_source == "recorded render"
    assert check(again) == check(first)  # the guard sees what a fresh render gave it
    one = render_stack(stack, components=["apps"])  # a partial render: the chart's own entry
    assert len(calls) == 2 and one.files() == {
        k: v for k, v in first.files().items() if k.startswith("apps/")
    }
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")
    assert render_stack(stack).files() == first.files() and len(calls) == 3


def test_a_cached_whole_render_follows_its_inputs_and_code(tmp_path, registry, monkeypatch):
    """The whole render is keyed by every render input and eksinf's own code: a changed value
    file or an edited eksinf renders afresh."""
    from eksinf.build.helm import SdkEngine
    from eksinf.build.render import render_stack
    from eksinf.core import cache
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []
    real = SdkEngine.render
    monkeypatch.setattr(
        SdkEngine, "render", lambda self, *a, **k: calls.append("render") or real(self, *a, **k)
    )
    chart = ChartSource("keyed", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    first = render_stack(load_stack(root))
    assert render_stack(load_stack(root)).files() == first.files()
    rendered = len(calls)
    values = next((root / "render" / "apps" / "values").glob("*.yaml"))
    values.write_text("greeting: y\n")
    changed = render_stack(load_stack(root))
    assert len(calls) > rendered and changed.files() != first.files()
    rendered = len(calls)
    monkeypatch.setattr(cache, "code_digest", lambda: "another eksinf")
    render_stack(load_stack(root))  # the chart's own entry serves it; the whole render is new
    assert len(calls) == rendered
    assert len(list((tmp_path / "cache" / "derived" / "render").iterdir())) == 3


def test_findings_are_kept_under_the_render_key(stack_dir, chart_mirror, tmp_path, monkeypatch):
    """A render kept in the cache has its findings kept under its key: a warm guard reads
    them instead of scanning the templates again, and gives the same report; the allow files,
    which no render reads, are applied afresh every run."""
    from eksinf.build import guard
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    stack = load_stack(stack_dir)
    first = render_stack(stack, chart_mirror)
    fresh = guard.check(first)
    assert first.key and any(f.allowed for f in fresh.findings) and fresh.ok
    scans: list[str] = []
    real = guard._findings
    monkeypatch.setattr(
        guard, "_findings", lambda o, s: scans.append(o.component.name) or real(o, s)
    )
    again = render_stack(stack, chart_mirror)
    assert again.key == first.key and guard.check(again) == fresh and not scans
    (stack_dir / "render" / "karpenter" / guard.ALLOW_FILE).unlink()
    blocked = guard.check(render_stack(load_stack(stack_dir), chart_mirror))
    assert not blocked.ok and not scans
    assert [f.finding for f in blocked.findings] == [f.finding for f in fresh.findings]
    partial = render_stack(stack, chart_mirror, components=["karpenter"])
    assert partial.key == "" and not guard.check(partial).ok and scans == ["karpenter"]
