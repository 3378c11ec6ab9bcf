"""The static determinism proof: a chart whose templates call pure functions only is rendered
once; any doubt leaves it to the second render, which still catches a chart that varies."""

from __future__ import annotations

import json

import pytest
from chartkit import CONFIGMAP, ChartSource, publish_stack

from eksinf.build.determinism import PROOF_SOURCE, RULES, prove
from eksinf.build.templateflow import PURE, VARYING

HELPERS = """\
{{/* a comment may say now, randAlphaNum or keys: it is not evaluated */}}
{{- define "app.labels" -}}
app: {{ .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}
"""
PLAIN = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-now
  labels: {{- include "app.labels" . | nindent 4 }}
data:
  word: {{ "randAlphaNum }} keys" | quote }}
  raw: {{ `{{ now }}` | quote }}
  field: {{ .Values.now | default "x" | quote }}
  {{- range $k, $v := .Values.map }}
  {{ $k }}: {{ $v | toString | quote }}
  {{- end }}
  version: {{ (semver "1.2.3").Major | printf "%d" }}
"""


def one(text: str) -> tuple[tuple[str, str], ...]:
    return (("c/templates/_helpers.tpl", HELPERS), ("c/templates/cm.yaml", text))


def test_a_chart_of_pure_functions_is_proven():
    proof = prove(one(PLAIN))
    assert proof.proven, proof.reason
    assert proof.as_dict() == {
        "rules": RULES,
        "proven": True,
        "reason": proof.reason,
        "for_values": False,
    }


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("{{ randAlphaNum 16 | quote }}", "calls randAlphaNum (random)"),
        ("{{ range keys .Values.map }}{{ . }}{{ end }}", "calls keys (map order)"),
        ('{{ now | date "2006" }}', "calls now (time)"),
        ('{{ .Values.ttl | date "2006" }}', "calls date (time)"),
        ('{{- $ca := genCA "x" 365 }}', "calls genCA (crypto)"),
        ("{{ values .Values.map | first }}", "calls values (map order)"),
        ('{{ lookup "v1" "Secret" "ns" "x" }}', "calls lookup (outside the chart)"),
        ('{{ tpl "{{ .Values.a }}" . }}', "calls tpl (outside the chart)"),
        ("{{ tpl .Values.text . }}", "calls tpl (outside the chart)"),
        ("{{ include (first (list $)) . }}", "include of a template name that may hold Helm's"),
        ('{{ include (print "x" .) . }}', "takes Helm's root context into print"),
        ("{{ include $name . }}", "uses $name, which the scan cannot follow"),
        ('{{ include "elsewhere" . }}', "includes elsewhere, a template the scan did not read"),
        ("{{ printf .Values.format 1 }}", "printf of a computed format"),
        ('{{ keys .Values.map | len }} {{ keys .Values.map | join "," }}', "calls keys (map"),
        ("{{ $ | toString }}", "takes Helm's root context into toString"),
        ("{{ . }}", "prints Helm's root context"),
        ("{{ .Capabilities }}", "prints Helm's root context"),
        ("{{ .Subcharts.sub.Values }}", "prints Helm's root context"),
        ("{{ if .Values.a }}{{ else if $ }}{{ else }}{{ $ }}{{ end }}", "prints Helm's root"),
        ('{{ printf "%p" .Values }}', "printf of %p (an address)"),
        ('{{ printf "%#10p" .Values }}', "printf of %p (an address)"),
        ('{{ printf "%d" (semver "1.2.3") }}', "printf of a pointer under a verb"),
        ('{{ $v := semver "1.2" }}{{ printf "%s %d" "a" (list $v) }}', "printf of a pointer"),
        ("{{ frobnicate 1 }}", "calls frobnicate, not a known function"),
        ("{{ .Chart | toString }}", "takes .Chart whole"),
        ("{{ $.Chart.Maintainers }}", "takes .Chart.Maintainers whole"),
        ("{{ `}}` }} {{ uuidv4 }}", "calls uuidv4 (random)"),
        ('{{ "unclosed }}', "an action the scan cannot read"),
        ("{{ .Values.x ", "an action the scan cannot read"),
    ],
)
def test_any_doubt_leaves_a_chart_unproven(action, why):
    proof = prove(one(PLAIN + f"  extra: {action}\n"))
    assert not proof.proven
    assert proof.reason.startswith("c/templates/cm.yaml:14: " + why), proof.reason


def _renders(templates: dict[str, str], values: dict | None = None) -> tuple[bool, object]:
    """Whether the real engine renders a chart of `templates` the same twice, and the proof's
    verdict on it."""
    from eksinf.build.helm import RenderOptions, SdkEngine, chart_templates

    archive = ChartSource("c", templates=templates, values=values or {}).package()
    engine, opts = SdkEngine(), RenderOptions("r", "n", "1.31.0")
    first = engine.render(archive, {}, opts)
    second = engine.render(archive, {}, opts, templates=False)
    return first.manifests == second.manifests, prove(chart_templates(archive))


@pytest.mark.parametrize(
    "text",
    [
        "a: {{ $ | toString | quote }}",
        'a: "{{ . }}"',
        'a: {{ printf "%v" $ | quote }}',
        '{{- $x := . }}\na: "{{ $x }}"',
        '{{- define "t" }}{{ . }}{{ end }}\na: {{ include "t" . | quote }}',
        '{{- define "t" }}{{ .r }}{{ end }}\na: {{ include "t" (dict "r" $) | quote }}',
        'a: "{{ dict "r" $ }}"',
        'a: "{{ list .Capabilities }}"',
        '{{- $d := dict }}{{ $_ := set $d "r" $ }}\na: "{{ $d.r }}"',
        '{{- $_ := set .Values "r" (list .Capabilities) }}\na: "{{ .Values.r }}"',
        '{{- $d := merge (dict) $ }}\na: "{{ $d }}"',
        '{{- range $k, $v := $ }}\n{{ $k }}: "{{ list $v }}"{{ end }}',
    ],
)
def test_the_root_context_printed_differs_between_renders_and_is_not_proven(text):
    """Helm's root context holds `.Capabilities` as a pointer: printed, directly or inside
    another value, it shows an address that differs on every render."""
    same, proof = _renders({"cm.yaml": text})
    assert not same
    assert not proof.proven
    assert "Helm's root context" in proof.reason, proof.reason


def test_an_include_of_a_computed_name_passes_its_data_to_the_templates_it_may_name():
    printing = {"p.tpl": "{{ .r }}", "q.tpl": "{{ with .r }}{{ .Release.Name }}{{ end }}"}
    by_name = 'a: {{ include (print $.Template.BasePath "/p.tpl") (dict "r" $) | quote }}'
    by_data = 'a: {{ include .Values.name (dict "r" $) | quote }}'
    same, proof = _renders({"cm.yaml": by_name, **printing}, {"a": 1})
    assert not same
    assert proof.reason == (
        "c/templates/p.tpl:1: prints Helm's root context (printed, it shows memory addresses)"
    )
    # named by data, it may name any template: cm.yaml itself too, which would pass on what it
    # is given, so the proof cannot tell what any of them is given
    same, proof = _renders({"cm.yaml": by_data, **printing}, {"name": "c/templates/p.tpl"})
    assert not same
    assert not proof.proven and "Helm's root context" in proof.reason
    # named by its end, the include reaches q.tpl only, which prints a field of it
    same, proof = _renders({"cm.yaml": by_name.replace("p.tpl", "q.tpl"), **printing}, {"a": 1})
    assert same
    assert proof.proven, proof.reason


@pytest.mark.parametrize(
    "text",
    [
        '{{- define "t" }}{{ .root.Template.BasePath }}-{{ .x }}{{ end }}\n'
        'a: {{ include "t" (dict "root" $ "x" 1) | quote }}',
        '{{- $v := .Values.list }}{{ range $v }}\n- "{{ . }}"{{ end }}',
        "{{- with $ }}\na: {{ .Release.Name }}{{ end }}",
        'a: {{ len $ }} {{ hasKey $ "Values" }} {{ .Capabilities.KubeVersion.Version }}',
        '{{- define "t" }}{{ .x.Values.a }}{{ end }}\n'
        'a: {{ include "t" (merge (dict "x" $) $) | quote }}',
        'a: {{ include (print $.Template.BasePath "/b.tpl") . | quote }}',
        'a: {{ keys .Values.map | len }} {{ keys .Values.map | sortAlpha | join "," }}',
        '{{- $d := dict "r" $ }}{{ $_ := set $d "k" 1 }}\na: "{{ $d.k }}{{ $d.r.Values.a }}"',
        '{{/* a comment: {{ $ }} */}}\n{{- block "b" . }}a: {{ .Values.a }}{{ end }}',
    ],
)
def test_the_root_context_carried_without_printing_is_proven(text):
    templates = {"cm.yaml": text, "b.tpl": "{{ .Values.a }}"}
    same, proof = _renders(templates, {"a": "x", "list": [1, {"b": 2}], "map": {"k": 1}})
    assert same
    assert proof.proven, proof.reason


def test_a_pointer_printed_by_its_address_is_not_proven():
    """`semver` returns a pointer: printed by its String method, except under a printf verb
    such as %d inside a list, where Go prints its address."""
    same, proof = _renders({"cm.yaml": 'a: "{{ printf "%d" (list (semver "1.2.3")) }}"'})
    assert not same
    assert proof.reason.endswith("printf of a pointer under a verb that prints its address")
    same, proof = _renders({"cm.yaml": 'a: "{{ printf "%v" (list (semver "1.2.3")) }}"'})
    assert same and proof.proven


def test_a_subchart_is_read_too():
    templates = (*one(PLAIN), ("c/charts/sub/templates/s.yaml", "x: {{ randInt 1 9 }}\n"))
    assert prove(templates).reason == "c/charts/sub/templates/s.yaml:1: calls randInt (random)"


TPL = "{{- with .Values.s }}\na: {{ tpl (toString .) $ | quote }}{{ end }}\nb: {{ tpl .Values.t . }}\n"


def test_tpl_of_values_that_hold_no_action_is_proven_for_those_values():
    """tpl returns text without `{{` as it is: proven when the values hold none (the engine
    says so), and the verdict says it holds for those values only."""
    from eksinf.build.helm import RenderOptions, SdkEngine

    engine, opts = SdkEngine(), RenderOptions("r", "n", "1.31.0")
    archive = ChartSource(
        "c", templates={"cm.yaml": TPL}, values={"s": "one", "t": "two"}
    ).package()
    plain = engine.render(archive, {"t": "three"}, opts)
    assert plain.values_plain
    proof = prove(plain.evaluated(), values_plain=plain.values_plain)
    assert proof.proven and proof.for_values, proof.reason
    assert not prove(plain.evaluated()).proven  # not for values that may hold actions

    acting = {"t": "{{ randAlphaNum 8 }}"}
    first, second = (engine.render(archive, acting, opts) for _ in range(2))
    assert first.manifests != second.manifests  # what the second render is there to catch
    assert not first.values_plain
    proof = prove(first.evaluated(), values_plain=first.values_plain)
    assert proof.reason == "c/templates/cm.yaml:2: calls tpl (outside the chart)"
    in_chart = ChartSource("c", templates={"cm.yaml": TPL}, values={"s": "{{ now }}", "t": "two"})
    assert not engine.render(in_chart.package(), {}, opts).values_plain


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{{ tpl (printf "%s" .Values.a) . }}', "calls tpl of text that is not a chart value"),
        ('{{ tpl (default "x" .Values.a) . }}', "calls tpl of text that is not a chart value"),
        ('{{ tpl .Files.Get "a" . }}', "calls tpl of text that is not a chart value"),
        ('{{ $_ := set .Values "a" "{{ now }}" }}{{ tpl .Values.a . }}', "a template changes"),
        ('{{ $_ := set .Values.a "k" 1 }}{{ tpl .Values.a.k . }}', "a template changes"),
        ('{{ $d := .Values.a }}{{ $_ := set $d "k" 1 }}{{ tpl .Values.a.k . }}', "a template"),
        ('{{ $_ := merge .Values (dict "a" 1) }}{{ tpl .Values.b . }}', "a template changes"),
        ('{{ $_ := set (dict) "x" .Values.a }}{{ tpl .Values.a . }}', ""),
        ('{{ $_ := set .Values.b "k" 1 }}{{ tpl .Values.a . }}', ""),
        ("{{ range .Values.list }}{{ tpl . $ }}{{ end }}", ""),
    ],
)
def test_tpl_is_proven_only_of_a_chart_value_no_template_changes(text, why):
    proof = prove(one(PLAIN + f"  extra: {text}\n"), values_plain=True)
    if why:
        assert proof.reason.startswith("c/templates/cm.yaml:14: calls tpl"), proof.reason
        assert why in proof.reason
    else:
        assert proof.proven, proof.reason


def test_a_disabled_subchart_is_not_evaluated_so_not_judged(chart_mirror):
    """Helm drops a subchart its values disable before it evaluates any template: the engine
    says which ran, the proof reads those, and the guard still reads every template."""
    from eksinf.build.helm import RenderOptions, SdkEngine

    sub = ChartSource("sub", templates={"s.yaml": "x: {{ randInt 1 9 }}\n"})
    chart = ChartSource(
        "c",
        templates={"cm.yaml": CONFIGMAP},
        values={"greeting": "x", "sub": {"enabled": False}},
        subcharts=[sub],
        conditions={"sub": "sub.enabled"},
    )
    engine, opts = SdkEngine(), RenderOptions("r", "n", "1.31.0")
    off = engine.render(chart.package(), {}, opts)
    assert off.subcharts == ()
    assert "c/charts/sub/templates/s.yaml" in dict(off.templates)  # the guard's
    assert prove(off.evaluated()).proven
    on = engine.render(chart.package(), {"sub": {"enabled": True}}, opts)
    assert on.subcharts == ("sub",)
    assert "c/charts/sub/templates/s.yaml" in on.manifests
    reason = prove(on.evaluated()).reason
    assert reason == "c/charts/sub/templates/s.yaml:1: calls randInt (random)"
    # the shipped device plugin's node-feature-discovery subchart is disabled by its values
    plugin = (chart_mirror / "nvidia-device-plugin-0.19.3.tgz").read_bytes()
    rendered = engine.render(plugin, {}, opts)
    assert rendered.subcharts == ()
    assert len(rendered.evaluated()) < len(rendered.templates)


@pytest.mark.parametrize(
    ("templates", "why"),
    [
        # the same action under another dot: data under `with`, the root context at the top
        ({"cm.yaml": "{{ with .Values.a }}{{ . }}{{ end }}{{ . }}"}, "cm.yaml:1: prints Helm's"),
        # the same action, the same dot, another `$`: a define given data, one given the root
        (
            {
                "_h.tpl": '{{ define "a" }}{{ with "s" }}{{ toString $ }}{{ end }}{{ end }}\n'
                '{{ define "b" }}{{ with "s" }}{{ toString $ }}{{ end }}{{ end }}',
                "cm.yaml": '{{ include "a" (dict) }}{{ include "b" . }}',
            },
            "_h.tpl:2: takes Helm's root context into toString",
        ),
        # a template read again (a variable grew after it was read) finds its doubts again
        (
            {"cm.yaml": '{{ $x := "a" }}{{ $x }}{{ $x = .Values.a }}{{ randAlpha 3 }}'},
            "cm.yaml:1: calls randAlpha (random)",
        ),
        # an action that reads a variable is read anew: the variable may have grown since
        (
            {"cm.yaml": '{{ $x := "a" }}{{ toString $x }}{{ $x = $ }}'},
            "cm.yaml:1: takes Helm's root context into toString",
        ),
    ],
)
def test_an_action_read_again_is_judged_where_it_stands(templates, why):
    """The scan reads a pipeline once for each dot and `$` it is given, and does again what that
    reading did (its doubts, its includes) wherever the action recurs."""
    proof = prove(tuple((f"c/templates/{path}", text) for path, text in templates.items()))
    assert proof.reason.startswith("c/templates/" + why), proof.reason


def test_the_tables_do_not_overlap():
    varying = {name for names in VARYING.values() for name in names}
    assert not varying & PURE


def test_the_shipped_charts_verdicts(chart_mirror):
    """The ACK controllers and the device plugin are proven from their templates alone (the
    plugin's computed includes name templates by data, its `keys` are only counted, its helpers
    carry the root context in a dict without printing it); Karpenter passes values through tpl,
    proven for values that hold no template action."""
    from eksinf.build.helm import chart_templates

    verdicts = {
        archive.name: prove(chart_templates(archive.read_bytes()))
        for archive in sorted(chart_mirror.glob("*.tgz"))
    }
    assert {name for name, proof in verdicts.items() if proof.proven} == {
        "ec2-chart-1.18.4.tgz",
        "eks-chart-1.16.3.tgz",
        "iam-chart-1.7.3.tgz",
        "nvidia-device-plugin-0.19.3.tgz",
    }
    assert "calls tpl" in verdicts["karpenter-1.14.0.tgz"].reason
    karpenter = chart_templates((chart_mirror / "karpenter-1.14.0.tgz").read_bytes())
    assert prove(karpenter, values_plain=True).for_values


def _counted(monkeypatch) -> list[bool]:
    from eksinf.build.helm import SdkEngine

    calls: list[bool] = []
    real = SdkEngine.render

    def counted(self, archive, values, opts, templates=True):
        calls.append(templates)
        return real(self, archive, values, opts, templates)

    monkeypatch.setattr(SdkEngine, "render", counted)
    return calls


def test_a_proven_chart_is_rendered_once_and_says_why(tmp_path, registry, monkeypatch):
    from eksinf.build.chartsplit import REFERENCES
    from eksinf.build.guard import check
    from eksinf.build.render import render_stack
    from eksinf.core import cache
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    calls = _counted(monkeypatch)
    chart = ChartSource("proven", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    stack = load_stack(publish_stack(tmp_path, registry, [("app", chart)]))
    first = render_stack(stack)
    assert calls == [True]  # no second render
    [render] = first.outputs[1].charts
    assert render.reference_source == PROOF_SOURCE and check(first).ok
    # its render is recorded as the reference of these inputs, as a second render would be
    [record] = (tmp_path / "cache" / "derived" / REFERENCES).iterdir()
    head = (cache.get("render", first.key) or b"").partition(b"\n")[0]
    [kept] = json.loads(head)["outputs"][1]["charts"]
    assert kept["checked"] == PROOF_SOURCE
    assert kept["proof"] == {
        "rules": RULES,
        "proven": True,
        "reason": "1 templates call pure functions only",
        "for_values": False,
    }
    again = render_stack(stack)  # from the cache, still saying how it was checked
    assert calls == [True] and again.outputs[1].charts[0].reference_source == PROOF_SOURCE


def test_a_recorded_reference_spares_the_proof(tmp_path, registry, monkeypatch):
    """A render without the cache (CI's verify) still reads the determinism references: the
    record an earlier render of the same inputs left is the reference, and the templates are
    not scanned again; the output is compared with it, so a change is still caught."""
    from eksinf.build import chartsplit
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    chart = ChartSource("proven", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    stack = load_stack(publish_stack(tmp_path, registry, [("app", chart)]))
    first = render_stack(stack)
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")

    def refuse(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("the templates were scanned again")

    monkeypatch.setattr(chartsplit, "prove", refuse)
    again = render_stack(stack)
    [render] = again.outputs[1].charts
    assert (render.reference_source, render.proof) == ("recorded render", None)
    assert render.reference == first.outputs[1].charts[0].first.digests
    assert render.first.digests == render.reference


def test_an_unproven_chart_is_still_rendered_twice_and_caught(tmp_path, registry, monkeypatch):
    from eksinf.build.guard import check
    from eksinf.build.render import render_stack
    from eksinf.model.stack import load_stack

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    calls = _counted(monkeypatch)
    varying = CONFIGMAP + "  password: {{ randAlphaNum 16 | quote }}\n"
    chart = ChartSource("varying", templates={"cm.yaml": varying}, values={"greeting": "x"})
    stack = load_stack(publish_stack(tmp_path, registry, [("app", chart)]))
    result = render_stack(stack)
    assert calls == [True, False]  # the render and its determinism check
    [render] = result.outputs[1].charts
    assert render.reference_source == "second render"
    [finding] = check(result).blocking
    assert (finding.hazard, finding.resource) == ("non-deterministic", "varying/templates/cm.yaml")
