"""The guard's template scope: each chart template read once into its actions, with the line
each one starts on, and the template rules finding the actions they name (and nothing in a
template comment)."""

from __future__ import annotations

from eksinf.build.hazards import TEMPLATE, Template, of_scope
from eksinf.model import checks

SOURCE = """\
{{/* lookup "v1" "Secret" in a comment is no call */}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  {{- /*
  a comment over
  three lines */}}
data:
  a: {{ .Values.a }}{{ .Values.b }}
  {{- $s := (lookup "v1" "Secret" .Release.Namespace "token") }}
  {{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}
  b: {{ "{{" }}
  {{- end }}
"""


def test_a_template_is_read_into_its_actions_with_their_lines():
    template = Template.read("app/templates/cm.yaml", SOURCE)
    assert "a comment over" not in template.text and "lookup" in template.text
    assert template.actions == (
        (5, " .Release.Name "),
        (8, " .Values.a "),
        (8, " .Values.b "),
        (9, '- $s := (lookup "v1" "Secret" .Release.Namespace "token") '),
        (10, '- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" '),
        (11, ' "{{" '),
        (12, "- end "),
    )
    # each line is where the action starts in the text without comments
    for line, action in template.actions:
        at = template.text.index("{{" + action + "}}")
        assert template.text.count("\n", 0, at) + 1 == line


def test_template_rules_name_the_line_of_each_action_they_find():
    found = checks.run(of_scope(TEMPLATE), Template.read("app/templates/cm.yaml", SOURCE))
    assert [(f.name, f.detail, f.element, f.places) for f in found] == [
        ("lookup", "line 9", "app/templates/cm.yaml", ("app/templates/cm.yaml",)),
        ("capabilities-branch", "line 10", "app/templates/cm.yaml", ("app/templates/cm.yaml",)),
    ]


def test_a_word_only_in_a_comment_or_outside_an_action_is_no_finding():
    source = "{{/* lookup .Capabilities */}}\nlookup: {{ .Values.x }}\nif .Capabilities\n"
    assert checks.run(of_scope(TEMPLATE), Template.read("t.yaml", source)) == []
