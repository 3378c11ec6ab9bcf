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

from eksinf.errors import CONTRACT, ENVIRONMENT
from eksinf.render import read_tree


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
