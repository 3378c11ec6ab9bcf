"""The guard follows values through tpl: a value whose template actions reach
lookup, time, random or crypto functions is a finding when the chart passes that value through
tpl. The render's determinism check cannot see these (lookup is empty on both renders, a date
agrees within a day), so before, they passed the guard."""

from __future__ import annotations

import json

from chartkit import ChartSource, publish_stack
from safety import fingerprint

from eksinf.errors import CONTRACT

TPL = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: tpl
  namespace: apps
  annotations:
    {{- tpl (toYaml .Values.podAnnotations) . | nindent 4 }}
data:
  extra: {{ tpl .Values.extra.text $ | quote }}
  plain: {{ .Values.notTpl | quote }}
"""

VALUES = """\
podAnnotations:
  stamp: '{{ now | date "2006-01-02" }}'
  fine: '{{ .Release.Name }}-{{ "now" }}'
extra:
  text: 'x-{{ (lookup "v1" "Secret" .Release.Namespace "x").data }}-{{ derivePassword 1 "long" "p" "u" "e" }}'
notTpl: '{{ uuidv4 }}'
"""


def test_values_that_reach_lookup_or_time_through_tpl_are_findings(tmp_path, registry, eksinf):
    chart = ChartSource("tplchart", templates={"cm.yaml": TPL})
    root = publish_stack(tmp_path, registry, [("app", chart)], values={"app": VALUES})
    before = fingerprint(root / "render")

    result = eksinf("guard", "--json", cwd=root)
    assert result.code == CONTRACT, result.err
    found = {
        f["resource"]: f for f in json.loads(result.out)["findings"] if f["hazard"] == "tpl-value"
    }
    # notTpl is printed, never tpl'd: no finding; `fine` names only a field and a string
    assert sorted(found) == ["app values .extra.text", "app values .podAnnotations.stamp"]
    stamp = found["app values .podAnnotations.stamp"]
    assert stamp["file"] == "tplchart/templates/cm.yaml:7"
    assert (
        "calls date, now (time), evaluated by tpl in tplchart/templates/cm.yaml:7"
        in (stamp["detail"])
    )
    assert (
        "calls derivePassword, lookup (crypto, lookup)" in found["app values .extra.text"]["detail"]
    )

    refused = eksinf("render", cwd=root)
    assert refused.code == CONTRACT
    assert "HAZARD tpl-value: apps" in refused.err
    assert not (root / "configs").exists()
    assert fingerprint(root / "render") == before

    (root / "render/apps/HAZARDS.allow").write_text(
        "".join(
            f"- hazard: tpl-value\n  resource: {r}\n  reason: reviewed in this test\n"
            for r in sorted(found)
        )
    )
    assert eksinf("guard", cwd=root).code == 0


def _tpl_findings(tmp_path, registry, eksinf, chart: ChartSource, values: str) -> list[dict]:
    """The `tpl-value` findings of `eksinf guard --json` on a stack of `chart` with `values`,
    which must make the guard fail."""
    root = publish_stack(tmp_path, registry, [("app", chart)], values={"app": values})
    result = eksinf("guard", "--json", cwd=root)
    assert result.code == CONTRACT, result.err
    return [f for f in json.loads(result.out)["findings"] if f["hazard"] == "tpl-value"]


def test_a_value_rendered_through_a_tpl_variable_is_followed_too(tmp_path, registry, eksinf):
    """`tpl $value $` names no value: any value of the chart may reach it."""
    template = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: v\n  namespace: apps\ndata:\n"
        "{{- range $k, $v := .Values.env }}\n  {{ $k }}: {{ tpl $v $ | quote }}\n{{- end }}\n"
    )
    values = "env:\n  CERT: '{{ (genCA \"x\" 365).Cert }}'\n  OK: plain\n"
    found = _tpl_findings(
        tmp_path, registry, eksinf, ChartSource("tplvar", templates={"cm.yaml": template}), values
    )
    assert [f["resource"] for f in found] == ["app values .env.CERT"]
    assert "calls genCA (crypto)" in found[0]["detail"]


def test_every_time_function_of_the_table_is_followed(tmp_path, registry, eksinf):
    """The guard's kinds come from the one table of template functions: toDate and
    durationRound read the clock as `now` does (the age below agrees on both renders, so only
    the guard sees it)."""
    template = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: age\n  namespace: apps\ndata:\n"
        "  age: {{ tpl .Values.age $ | quote }}\n"
    )
    values = 'age: \'{{ durationRound (toDate "2006-01-02" "2017-12-31") }}\'\n'
    found = _tpl_findings(
        tmp_path, registry, eksinf, ChartSource("tplage", templates={"cm.yaml": template}), values
    )
    assert [f["resource"] for f in found] == ["app values .age"]
    assert "calls durationRound, toDate (time)" in found[0]["detail"]
