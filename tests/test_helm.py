"""The two Helm engines: the in-process SDK (default) and a helm binary (EKSINF_HELM).

Both must give byte-identical units. The binary is installed by .ci/setup; a missing binary
fails these tests, it never skips them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from chartkit import CONFIGMAP, ChartSource, publish_stack
from conftest import REPO
from test_charts import parent_chart
from test_guard import CAPABILITIES, HOOKED, JOBS, LOOKUP, SECRET, WEBHOOKS
from test_render import split_chart

from eksinf.build.write import read_tree
from eksinf.errors import CONTRACT, ENVIRONMENT


@pytest.fixture(scope="session")
def helm_binary() -> str:
    path = os.environ.get("EKSINF_TEST_HELM") or str(REPO / ".eksinf" / "tools" / "helm")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no helm binary at {path}: run `bash .ci/setup`")
    return path


def render_with(eksinf, root: Path, out: Path, monkeypatch, helm: str | None, *args) -> dict:
    if helm:
        monkeypatch.setenv("EKSINF_HELM", helm)
    else:
        monkeypatch.delenv("EKSINF_HELM", raising=False)
    result = eksinf("render", "--skip-guard", "--out", str(out), *args, cwd=root)
    assert result.code == 0, result.err
    files = read_tree(out)
    provenance = json.loads(files.pop("provenance.json"))
    return {"files": files, "engine": provenance["engine"]["name"]}


def test_engines_agree_on_the_test_charts(tmp_path, registry, eksinf, monkeypatch, helm_binary):
    mixed = ChartSource(
        "mixed",
        templates={
            "jobs.yaml": JOBS,  # several kinds in one file: the binary sorts them, the SDK not
            "webhooks.yaml": WEBHOOKS,
            "hook.yaml": HOOKED,
            "lookup.yaml": LOOKUP,
            "secret.yaml": SECRET,
            "metrics.yaml": CAPABILITIES,
            "empty.yaml": "{{- if .Values.never }}\nkind: Never\n{{- end }}\n",
            "NOTES.txt": "Thanks for installing {{ .Release.Name }}.\n",
        },
        crds={"stub.yaml": "../../crds/stub.yaml\n"},
        values={"token": "t"},
    )
    root = publish_stack(
        tmp_path,
        registry,
        [("split", split_chart()), ("parent", parent_chart()), ("mixed", mixed)],
        values={"split": "greeting: hi\n", "parent": "greeting: p\n"},
    )
    sdk = render_with(eksinf, root, tmp_path / "sdk", monkeypatch, None)
    binary = render_with(eksinf, root, tmp_path / "bin", monkeypatch, helm_binary)
    assert (sdk["engine"], binary["engine"]) == ("helm-python-sdk", "helm")
    # parent's Widget and Gadget CRDs are split's too: written once, in split-crds.yaml
    assert sorted(sdk["files"]) == [
        "apps/mixed-controller.yaml",
        "apps/parent-controller.yaml",
        "apps/split-controller.yaml",
        "apps/split-crds.yaml",
        "base/namespace.yaml",
    ]
    assert sdk["files"] == binary["files"]

    # and the guard sees the same hazards through either engine
    monkeypatch.delenv("EKSINF_HELM")
    sdk_findings = json.loads(eksinf("guard", "--json", cwd=root).out)["findings"]
    monkeypatch.setenv("EKSINF_HELM", helm_binary)
    bin_findings = json.loads(eksinf("guard", "--json", cwd=root).out)["findings"]
    assert sdk_findings == bin_findings
    assert {f["hazard"] for f in sdk_findings} == {
        "bare-job",
        "capabilities-branch",
        "crd-stub",
        "helm-hook",
        "lookup",
        "secret",
        "webhook-ca-bundle",
    }


def test_engines_agree_on_the_real_charts(
    stack_dir, chart_mirror, eksinf, monkeypatch, helm_binary
):
    mirror = ("--chart-mirror", str(chart_mirror))
    sdk = render_with(eksinf, stack_dir, stack_dir / "sdk", monkeypatch, None, *mirror)
    binary = render_with(eksinf, stack_dir, stack_dir / "bin", monkeypatch, helm_binary, *mirror)
    assert sdk["files"] == binary["files"]
    assert "ack-controllers/ec2-crds.yaml" in sdk["files"]


def test_binary_engine_reports_render_errors(tmp_path, registry, eksinf, monkeypatch, helm_binary):
    template = CONFIGMAP.replace(
        "{{ .Values.greeting | quote }}", '{{ required "greeting is required" .Values.greeting }}'
    )
    root = publish_stack(
        tmp_path, registry, [("app", ChartSource("req", templates={"c.yaml": template}))]
    )
    monkeypatch.setenv("EKSINF_HELM", helm_binary)
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "helm could not render release 'app'" in result.err
    assert "greeting is required" in result.err


def test_missing_helm_binary_is_an_environment_error(eksinf, monkeypatch, tmp_path):
    monkeypatch.setenv("EKSINF_HELM", str(tmp_path / "no-helm"))
    result = eksinf("version")
    assert result.code == ENVIRONMENT
    assert f"EKSINF_HELM={tmp_path / 'no-helm'}: no executable helm there" in result.err


def test_version_names_the_binary_engine(eksinf, monkeypatch, helm_binary):
    monkeypatch.setenv("EKSINF_HELM", helm_binary)
    info = json.loads(eksinf("version", "--json").out)
    assert info["engine"].startswith("helm v4.")


TYPES = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: types
data:
{{- range $k, $v := .Values }}
  {{ $k }}: {{ printf "%T %v" $v $v | quote }}
{{- end }}
{{- if .Values.create }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: made
{{- end }}
"""

# plain scalars Python's YAML 1.1 reader and Helm's read differently (n, 1e3, 0o17, 1:30) or
# alike (on, yes, 0755, 1_a), in two documents as Helm allows
AMBIGUOUS_VALUES = """\
create: n
switch: on
mode: 0755
big: 1e3
answer: yes
octal: 0o17
clock: 1:30
tag: 1_a
---
later: Y
"""


def test_values_reach_the_engine_as_helm_reads_them(
    tmp_path, registry, eksinf, monkeypatch, helm_binary
):
    """`helm template -f values.yaml` on the chart is the reference: eksinf renders the same
    objects with either engine, so `create: n` makes no ServiceAccount (Python's YAML 1.1
    reader, which eksinf used before, read "n" as a string, which is true)."""
    import subprocess

    import yaml

    from eksinf.build.write import read_tree

    chart = ChartSource("typed", templates={"all.yaml": TYPES})
    root = publish_stack(tmp_path, registry, [("typed", chart)], values={"typed": AMBIGUOUS_VALUES})
    (tmp_path / "typed.tgz").write_bytes(chart.package())
    done = subprocess.run(
        [helm_binary, "template", "typed", str(tmp_path / "typed.tgz"), "--namespace", "apps",
         "-f", str(root / "render" / "apps" / "values" / "typed.yaml")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "HELM_CACHE_HOME": str(tmp_path / "h"),
             "HELM_CONFIG_HOME": str(tmp_path / "h"), "HELM_DATA_HOME": str(tmp_path / "h")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    helm_docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in helm_docs] == ["ConfigMap"]  # no ServiceAccount: n is false
    assert helm_docs[0]["data"] == {
        "answer": "bool true",
        "big": "float64 1000",
        "clock": "string 1:30",
        "create": "bool false",
        "later": "bool true",
        "mode": "float64 493",
        "octal": "float64 15",
        "switch": "bool true",
        "tag": "string 1_a",  # not a number: the underscore stays
    }
    for engine in (None, helm_binary):
        out = tmp_path / f"out-{bool(engine)}"
        render_with(eksinf, root, out, monkeypatch, engine)
        unit = read_tree(out)["apps/typed-controller.yaml"]
        docs = [d for d in yaml.safe_load_all(unit) if d]
        assert [(d["kind"], d["data"]) for d in docs] == [("ConfigMap", helm_docs[0]["data"])]
