"""Render: split, waves, copied units, clean rebuild, conservation, determinism, atomic writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from chartkit import CONFIGMAP, ChartSource, crd, publish_stack

from eksinf.build import chartsplit
from eksinf.build.render import render_stack
from eksinf.build.write import read_tree
from eksinf.core import outdir
from eksinf.errors import CONTRACT, FAILURE, EksinfError
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import load_stack

CRD_IN_TEMPLATES = crd("Sprocket")
HANDWRITTEN = """\
# a handwritten unit: its bytes, comments and wave are its own
apiVersion: v1
kind: ConfigMap
metadata:
  name: hand
  namespace: apps
  annotations:
    argocd.argoproj.io/sync-wave: "5"
data: {key: value}
"""


def split_chart() -> ChartSource:
    return ChartSource(
        "split",
        templates={"cm.yaml": CONFIGMAP, "sprocket-crd.yaml": CRD_IN_TEMPLATES},
        crds={"widget.yaml": crd("Widget"), "gadget.yaml": crd("Gadget")},
        values={"greeting": "hi"},
    )


def docs_of(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def wave(doc: dict) -> str:
    return doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]


def test_crds_and_controllers_are_split_and_stamped(tmp_path, registry, eksinf):
    root = publish_stack(tmp_path, registry, [("app", split_chart())])
    result = eksinf("render", cwd=root)
    assert result.code == 0, result.err
    assert "apps: app: 1 resources + 3 CRDs" in result.err

    crds = docs_of(root / "configs/apps/app-crds.yaml")
    assert sorted(d["metadata"]["name"] for d in crds) == [
        "gadgets.example.com",
        "sprockets.example.com",  # a CRD from templates/ lands with the CRDs too
        "widgets.example.com",
    ]
    assert {d["kind"] for d in crds} == {"CustomResourceDefinition"}
    assert {wave(d) for d in crds} == {"-20"}
    [controller] = docs_of(root / "configs/apps/app-controller.yaml")
    assert controller["kind"] == "ConfigMap"
    assert controller["data"] == {"greeting": "hi"}
    assert wave(controller) == "-10"
    assert sorted(p.name for p in (root / "configs/apps").iterdir()) == [
        "app-controller.yaml",
        "app-crds.yaml",
    ]


def test_chart_without_crds_has_no_crd_unit(tmp_path, registry, eksinf):
    chart = ChartSource("nocrds", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    assert eksinf("render", cwd=root).code == 0
    assert sorted(p.name for p in (root / "configs/apps").iterdir()) == ["app-controller.yaml"]


def test_handwritten_units_keep_their_bytes_and_waves(tmp_path, registry, eksinf):
    chart = ChartSource("withhand", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(
        tmp_path, registry, [("app", chart)], handwritten={"hand.yaml": HANDWRITTEN}
    )
    assert eksinf("render", cwd=root).code == 0
    assert (root / "configs/apps/hand.yaml").read_text() == HANDWRITTEN
    assert (root / "configs/base/namespace.yaml").read_bytes() == (
        root / "render/base/namespace.yaml"
    ).read_bytes()


def test_rebuild_leaves_no_stale_unit(tmp_path, registry, eksinf):
    chart = ChartSource("rebuild", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(
        tmp_path, registry, [("app", chart)], handwritten={"hand.yaml": HANDWRITTEN}
    )
    assert eksinf("render", cwd=root).code == 0
    (root / "configs/apps/stray.yaml").write_text("kind: Stray\n")
    (root / "render/apps/hand.yaml").unlink()

    assert eksinf("render", cwd=root).code == 0
    assert sorted(read_tree(root / "configs")) == [
        "apps/app-controller.yaml",
        "base/namespace.yaml",
        "provenance.json",
    ]


def test_document_conservation_catches_a_lossy_split(tmp_path, registry, eksinf, monkeypatch):
    root = publish_stack(tmp_path, registry, [("app", split_chart())])
    real_split = chartsplit._split_chart

    def lossy_split(*args, **kwargs):
        controllers, crds, stubs = real_split(*args, **kwargs)
        return controllers, crds[:-1], stubs  # drop one CRD, as a collapsed separator would

    monkeypatch.setattr(chartsplit, "_split_chart", lossy_split)
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(root))
    assert err.value.exit_code == FAILURE
    assert err.value.message == "apps: app split lost documents: helm emitted 4, wrote 3"

    result = eksinf("render", cwd=root)
    assert result.code == FAILURE
    assert "split lost documents: helm emitted 4, wrote 3" in result.err
    assert not (root / "configs").exists()


def test_document_conservation_counts_the_separators_written(tmp_path, registry, monkeypatch):
    root = publish_stack(tmp_path, registry, [("app", split_chart())])
    real_dump = chartsplit.dump_docs

    def merging_dump(docs):  # two documents of the CRD unit written as one
        text = real_dump(docs)
        return text.replace("\n---\n", "\n", 1) if len(docs) > 1 else text

    monkeypatch.setattr(chartsplit, "dump_docs", merging_dump)
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(root))
    assert err.value.message == "apps: app split lost documents: helm emitted 4, wrote 3"

    # a `---` that only starts a line of text, or ends one, is no separator
    def padded_dump(docs):
        return real_dump(docs) + "note: x\n----\nx: ---\n--- \n"

    monkeypatch.setattr(chartsplit, "dump_docs", padded_dump)
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(root))
    assert "helm emitted 4, wrote 6" in err.value.message  # the `--- ` line of each unit


def test_render_is_deterministic(tmp_path, registry, eksinf):
    root = publish_stack(
        tmp_path, registry, [("app", split_chart())], handwritten={"hand.yaml": HANDWRITTEN}
    )
    assert eksinf("render", "--out", str(tmp_path / "one"), cwd=root).code == 0
    assert eksinf("render", "--out", str(tmp_path / "two"), cwd=root).code == 0
    one, two = read_tree(tmp_path / "one"), read_tree(tmp_path / "two")
    assert one == two
    assert len(one) == 5


def test_provenance_is_recorded_outside_unit_folders(tmp_path, registry, eksinf):

    chart = split_chart()
    root = publish_stack(tmp_path, registry, [("app", chart)])
    assert eksinf("render", cwd=root).code == 0
    record = json.loads((root / "configs/provenance.json").read_text())
    assert record["charts"] == [
        {
            "component": "apps",
            "name": "app",
            "chart": "split",
            "version": "0.1.0",
            "repo": record["charts"][0]["repo"],
            "sha256": sha256_hex(chart.package()),
        }
    ]
    assert record["engine"]["name"] == "helm-python-sdk"
    assert record["kubeVersion"] == "1.31.0"
    assert len(record["inputsSha256"]) == 64
    # changing any input changes the inputs digest
    (root / "render/apps/values/app.yaml").write_text("greeting: other\n")
    assert eksinf("render", cwd=root).code == 0
    again = json.loads((root / "configs/provenance.json").read_text())
    assert again["inputsSha256"] != record["inputsSha256"]


def test_acceptance_counts_on_the_real_mirror(stack_dir, chart_mirror, eksinf):
    result = eksinf("render", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert result.code == 0, result.err
    for line in (
        "ack-controllers: ec2: 10 resources + 22 CRDs",
        "ack-controllers: iam: 10 resources + 9 CRDs",
        "ack-controllers: eks: 10 resources + 10 CRDs",
        "karpenter: karpenter: 13 resources + 5 CRDs",
        "gpu-runtime: nvidia-device-plugin: 5 resources + 0 CRDs",
    ):
        assert line in result.err
    configs = stack_dir / "configs"
    # ACK's shared runtime CRDs are written once, in iam-crds.yaml (iam is the first chart)
    assert len(docs_of(configs / "ack-controllers/iam-crds.yaml")) == 9
    assert len(docs_of(configs / "ack-controllers/ec2-crds.yaml")) == 22 - 2
    assert len(docs_of(configs / "ack-controllers/eks-crds.yaml")) == 10 - 2
    for line in (
        "ec2: 10 resources + 22 CRDs (2 already written once, in iam-crds.yaml)",
        "eks: 10 resources + 10 CRDs (2 already written once, in iam-crds.yaml)",
    ):
        assert f"ack-controllers: {line}" in result.err
    assert len(docs_of(configs / "ack-controllers/ec2-controller.yaml")) == 10
    assert not (configs / "gpu-runtime/nvidia-device-plugin-crds.yaml").exists()
    crds = docs_of(configs / "karpenter/karpenter-crds.yaml")
    assert sorted(d["metadata"]["name"] for d in crds) == [
        "capacitybuffers.autoscaling.x-k8s.io",
        "ec2nodeclasses.karpenter.k8s.aws",
        "nodeclaims.karpenter.sh",
        "nodeoverlays.karpenter.sh",
        "nodepools.karpenter.sh",
    ]
    assert {d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] for d in crds} == {"-20"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\na: 2\n", "render/base/bad.yaml:2:1: duplicate key"),
        ("a:\n\tb: 1\n", "render/base/bad.yaml:2:1: tab character in indentation"),
        ("a: [1\n", "render/base/bad.yaml:2:1: YAML syntax error"),
        ("kind: A\n---\n- 1\n", "render/base/bad.yaml:3:1: document 2 is a list, not a mapping"),
    ],
    ids=["duplicate-key", "tab", "syntax", "non-mapping"],
)
def test_copied_sources_are_parsed_strictly(tmp_path, registry, eksinf, text, message):
    chart = ChartSource("strict", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    (root / "render/base/bad.yaml").write_text(text)
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert message in result.err


def test_values_are_parsed_strictly(tmp_path, registry, eksinf):
    chart = ChartSource("strictvalues", templates={"cm.yaml": CONFIGMAP})
    root = publish_stack(tmp_path, registry, [("app", chart)], values={"app": "a: 1\na: 2\n"})
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/values/app.yaml:2:1: duplicate key" in result.err


def test_a_value_helm_refuses_fails_before_the_chart_is_fetched(tmp_path, registry, eksinf):
    """A value the strict reader takes but Helm cannot hand on (its values travel as JSON, which
    holds no infinity) is an input error naming the file; values are read on the engine's
    thread while the library loads, yet all of them before any chart enters the cache."""
    from eksinf.build.charts import cache_dir, read_lock

    chart = ChartSource("infvalues", templates={"cm.yaml": CONFIGMAP})
    root = publish_stack(tmp_path, registry, [("app", chart)], values={"app": "greeting: .inf\n"})
    (pinned,) = read_lock(load_stack(root)).values()
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/values/app.yaml: Helm cannot read these values" in result.err
    assert not (cache_dir() / f"{pinned.sha256}.tgz").exists()
    assert not (root / "configs").exists()
    (root / "render/apps/values/app.yaml").write_text("greeting: inf\n")
    assert eksinf("render", cwd=root).code == 0
    assert (cache_dir() / f"{pinned.sha256}.tgz").exists()


def test_missing_values_file(tmp_path, registry, eksinf):
    chart = ChartSource("novalues", templates={"cm.yaml": CONFIGMAP})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    (root / "render/apps/values/app.yaml").unlink()
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/values/app.yaml: values file named by components.yaml (chart app)" in (
        result.err
    )


def test_handwritten_file_cannot_shadow_a_chart_unit(tmp_path, registry, eksinf):
    chart = ChartSource("shadow", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(
        tmp_path, registry, [("app", chart)], handwritten={"app-controller.yaml": HANDWRITTEN}
    )
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "render/apps/app-controller.yaml: name collides with a rendered chart unit" in (
        result.err
    )


def test_template_that_renders_invalid_yaml(tmp_path, registry, eksinf):
    chart = ChartSource("invalid", templates={"bad.yaml": "kind: A\nmetadata: {name: [x}\n"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "apps: chart app template invalid/templates/bad.yaml rendered invalid YAML" in (
        result.err
    )


class FailingEngine:
    """The real engine, except that it fails the releases named in `fail`."""

    def __init__(self, fail: set[str]) -> None:
        from eksinf.build.helm import default_engine

        self.real = default_engine()
        self.name, self.fail = self.real.name, fail

    @property
    def version(self) -> str:
        return self.real.version

    @property
    def identity(self) -> str:
        return self.real.identity

    def render(self, archive, values, opts, templates=True):
        if opts.release in self.fail:
            raise EksinfError(f"release {opts.release} failed", exit_code=CONTRACT)
        return self.real.render(archive, values, opts, templates)


@pytest.mark.parametrize(
    ("fail", "manifest_fails", "reported"),
    [
        ({"karpenter"}, True, "argocd failed"),  # argocd comes before karpenter
        ({"ack-iam", "karpenter"}, True, "release ack-iam failed"),
        ({"karpenter", "nvidia-device-plugin"}, False, "release karpenter failed"),
    ],
)
def test_the_first_failure_in_component_order_is_reported(
    stack_dir, chart_mirror, monkeypatch, fail, manifest_fails, reported
):
    """With several components failing, the one reported is the first in component order."""
    from eksinf.build import manifestsplit

    def failing_manifest(*_args):
        raise EksinfError("argocd failed", exit_code=CONTRACT)

    if manifest_fails:
        monkeypatch.setattr(manifestsplit, "manifest_units", failing_manifest)
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")
    stack = load_stack(stack_dir)
    with pytest.raises(EksinfError) as err:
        render_stack(stack, mirror=chart_mirror, engine=FailingEngine(fail))
    assert err.value.message == reported


class WatchedEngine(FailingEngine):
    """The real engine (failing the releases in `fail`), noting on which thread each render
    runs and how many run at once."""

    def __init__(self, fail: set[str]) -> None:
        super().__init__(fail)
        self.threads: list[str] = []
        self.running = self.most = 0
        self.lock = threading.Lock()

    def render(self, archive, values, opts, templates=True):
        with self.lock:
            self.threads.append(threading.current_thread().name)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return super().render(archive, values, opts, templates)
        finally:
            with self.lock:
                self.running -= 1


def _engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("eksinf-engine")]


def test_charts_render_one_at_a_time_on_the_engines_thread(stack_dir, chart_mirror, monkeypatch):
    """Every chart render, the determinism check's second ones included, runs on the engine's
    own thread (while the caller splits what is ready), never two at once, and the thread is
    gone when the render returns; the output is the committed one."""
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")
    stack = load_stack(stack_dir)
    engine = WatchedEngine(set())
    result = render_stack(stack, mirror=chart_mirror, engine=engine)
    assert len(engine.threads) >= 5  # the five charts of the stack, and any second render
    assert all(name.startswith("eksinf-engine") for name in engine.threads), engine.threads
    assert engine.most == 1
    assert not _engine_threads()
    assert result.files() == read_tree(stack_dir / "configs")


class SlowEngine(WatchedEngine):
    """A WatchedEngine whose renders that do not fail take half a second more."""

    def render(self, archive, values, opts, templates=True):
        if opts.release not in self.fail:
            time.sleep(0.5)
        return super().render(archive, values, opts, templates)


def test_a_failure_cancels_the_renders_started_ahead(stack_dir, chart_mirror, monkeypatch):
    """The first chart failing while later ones are still queued: the error is raised once the
    render in progress ends, the queued renders never start, and no engine thread is left."""
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")
    stack = load_stack(stack_dir)
    engine = SlowEngine({"ack-iam"})
    with pytest.raises(EksinfError, match="release ack-iam failed"):
        render_stack(stack, mirror=chart_mirror, engine=engine)
    assert not _engine_threads()
    # ack-iam failed at once; ec2 was rendering when the error was seen; eks, karpenter and
    # the device plugin were queued behind it, and were cancelled
    assert len(engine.threads) == 2, engine.threads


def test_failed_render_leaves_configs_unchanged(tmp_path, registry, eksinf):
    template = CONFIGMAP.replace(
        "{{ .Values.greeting | quote }}", '{{ required "greeting is required" .Values.greeting }}'
    )
    chart = ChartSource("required", templates={"cm.yaml": template})
    root = publish_stack(tmp_path, registry, [("app", chart)], values={"app": "greeting: hi\n"})
    assert eksinf("render", cwd=root).code == 0
    before = read_tree(root / "configs")

    (root / "render/apps/values/app.yaml").write_text("{}\n")
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert "helm could not render release 'app'" in result.err
    assert "greeting is required" in result.err
    assert read_tree(root / "configs") == before


# ---- crash consistency: a real `eksinf render` process killed at named points -----------


def run_render(stack: Path, mirror: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "EKSINF_CHART_MIRROR": str(mirror)}
    env.pop("EKSINF_FAULT", None)
    if fault:
        env["EKSINF_FAULT"] = fault
    script = Path(sys.executable).parent / "eksinf"
    return subprocess.run(
        [str(script), "render"], cwd=stack, env=env, capture_output=True, text=True, timeout=120
    )


def change_device_plugin_values(stack: Path) -> None:
    """A values change, so that the killed render would have written something new."""
    path = stack / "render/gpu-runtime/values/nvidia-device-plugin.yaml"
    values = yaml.safe_load(path.read_text()) or {}
    values.setdefault("nodeSelector", {})["crash-test"] = "yes"
    path.write_text(yaml.safe_dump(values))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("fault", ["render-write", "render-swap"])
def test_killed_render_leaves_configs_as_they_were(stack_dir, chart_mirror, fault):
    change_device_plugin_values(stack_dir)
    before = snapshot(stack_dir / "configs")

    killed = run_render(stack_dir, chart_mirror, fault)
    assert killed.returncode == 137, killed.stderr
    assert snapshot(stack_dir / "configs") == before
    assert (stack_dir / ".configs.new").exists()  # the half-built tree the crash left behind

    recovered = run_render(stack_dir, chart_mirror)
    assert recovered.returncode == 0, recovered.stderr
    assert not (stack_dir / ".configs.new").exists()
    assert not (stack_dir / ".configs.old").exists()
    after = snapshot(stack_dir / "configs")
    assert b"crash-test" in after["gpu-runtime/nvidia-device-plugin-controller.yaml"]


def test_killed_after_the_swap_has_the_new_tree_and_cleans_up(stack_dir, chart_mirror):
    change_device_plugin_values(stack_dir)
    killed = run_render(stack_dir, chart_mirror, "render-cleanup")
    assert killed.returncode == 137
    assert (
        b"crash-test"
        in (stack_dir / "configs/gpu-runtime/nvidia-device-plugin-controller.yaml").read_bytes()
    )
    assert (stack_dir / ".configs.new").exists()  # the old tree, swapped out
    assert run_render(stack_dir, chart_mirror).returncode == 0
    assert not (stack_dir / ".configs.new").exists()


def test_interrupted_fallback_swap_puts_the_old_tree_back(tmp_path):
    # Without an atomic exchange the swap is two renames; a crash between them leaves the old
    # tree as .configs.old and no configs/. The next write must restore it first.
    target = tmp_path / "configs"
    old = tmp_path / ".configs.old"
    old.mkdir()
    (old / "unit.yaml").write_text("kind: A\n")
    (old / outdir.SWAP_MARKER).write_text("x")  # eksinf marks the tree it swaps out
    outdir.recover_interrupted_swap(target)
    assert (target / "unit.yaml").read_text() == "kind: A\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]
    assert sorted(p.name for p in target.iterdir()) == ["unit.yaml"]


def test_write_tree_without_exchange_support(tmp_path, monkeypatch):
    monkeypatch.setattr(outdir, "_exchange", lambda _a, _b: False)
    target = tmp_path / "configs"
    outdir.write_tree(outdir.claim(target), {"a/x.yaml": "one\n"})
    outdir.write_tree(outdir.claim(target), {"a/y.yaml": "two\n"})
    assert read_tree(target) == {"a/y.yaml": "two\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]


@pytest.mark.parametrize("out", [".", "..", "render", "render/apps"])
def test_out_never_replaces_the_stack_or_its_sources(tmp_path, registry, eksinf, out):
    from eksinf.errors import USAGE

    chart = ChartSource("outguard", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    before = snapshot(root)
    result = eksinf("render", "--out", out, cwd=root)
    assert result.code == USAGE
    assert "refusing to replace" in result.err
    assert snapshot(root) == before


def test_a_warm_render_and_verify_parse_no_unit(stack_dir, chart_mirror, eksinf, monkeypatch):
    """A render served from the cache hands on unit texts; what render and verify derive from
    its documents (the guard's findings, aws-objects.lock's entries, duplicate ids) is kept
    under the render's key, so a warm run parses no unit and writes and reports the same."""
    from eksinf.build import units

    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))
    first = eksinf("--stack", str(stack_dir), "render", "--json")
    assert first.code == 0 and eksinf("--stack", str(stack_dir), "verify").code == 0
    lock = (stack_dir / "aws-objects.lock").read_text()
    (stack_dir / "aws-objects.lock").unlink()  # rewritten from the kept entries

    def refuse(text: str, label: str) -> list[object]:
        raise AssertionError(f"{label} parsed")

    monkeypatch.setattr(units, "load_docs", refuse)
    again = eksinf("--stack", str(stack_dir), "render", "--json")
    assert again.code == 0 and json.loads(again.out) == json.loads(first.out)
    assert (stack_dir / "aws-objects.lock").read_text() == lock
    checked = eksinf("--stack", str(stack_dir), "verify", "--json")
    assert checked.code == 0 and json.loads(checked.out)["duplicateIds"] == []
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")  # nothing read back: a fresh render, parsed
    assert eksinf("--stack", str(stack_dir), "verify").code == 0


def test_a_chart_render_is_served_whole_from_its_record(tmp_path, registry, monkeypatch):
    """A chart rendered before (a render whose whole-render entry misses: here, one component
    asked for) is served from its one record: output and parse, neither the engine nor the
    YAML reader called, and the units are the fresh render's, documents included."""
    from eksinf.build import helm

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EKSINF_NO_CACHE", raising=False)
    root = publish_stack(tmp_path, registry, [("app", split_chart())])
    fresh = render_stack(load_stack(root), components=["apps"])
    helm_records = list((tmp_path / "cache/derived/helm").iterdir())
    assert len(helm_records) == 1
    assert not (tmp_path / "cache/derived/yaml").exists()  # the parse is in the chart's record

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("rendered or parsed again")

    monkeypatch.setattr(helm.SdkEngine, "render", refuse)
    monkeypatch.setattr(chartsplit, "load_docs_uncached", refuse)
    monkeypatch.setattr(chartsplit, "prove", refuse)  # the recorded reference answers first
    served = render_stack(load_stack(root), components=["apps"])
    units = [(u.filename, u.text, u.docs) for o in served.outputs for u in o.units]
    assert units == [(u.filename, u.text, u.docs) for o in fresh.outputs for u in o.units]
    [chart] = served.outputs[0].charts
    assert chart.first == fresh.outputs[0].charts[0].first
    assert fresh.outputs[0].charts[0].proof is not None and chart.proof is None
    assert chart.reference == fresh.outputs[0].charts[0].reference
    assert chart.reference_source == "recorded render"


def test_a_chart_record_that_does_not_fit_its_output_is_recomputed(tmp_path, monkeypatch):
    """A record whose parse lists another number of files than its output holds, or holds
    texts past those its head names, is no record: the chart is rendered afresh."""
    from eksinf.build.determinism import RULES, Proof
    from eksinf.build.helm import RenderedChart
    from eksinf.core import cache

    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EKSINF_NO_CACHE", raising=False)
    rendered = RenderedChart({"c/templates/a.yaml": "a: 1\n"}, (("c/crds/b.yaml", "b: 2\n"),), ())
    proof = Proof(True, "0 templates call pure functions only")
    parsed = [([{"b": 2}], True), ([{1: "a"}], False)]  # an int key: not kept
    chartsplit._store_render("k" * 64, rendered, parsed, proof)
    kept = chartsplit._cached_render("k" * 64)
    assert kept == chartsplit._Kept(rendered, [[{"b": 2}], None], proof)
    chartsplit._store_render("k" * 64, rendered, [([{"b": 2}], True)], proof)
    assert chartsplit._cached_render("k" * 64) is None
    texts = cache.Texts()
    record = {"render": rendered.to_record(texts), "docs": [None, None], "proof": proof.as_dict()}
    cache.put_parts("helm", "k" * 64, (*texts.entry(json.dumps(record).encode()), b"more"))
    assert chartsplit._cached_render("k" * 64) is None
    # a verdict under other rules is no verdict: the templates are scanned again
    texts = cache.Texts()
    record = {"render": rendered.to_record(texts), "docs": [None, None], "proof": proof.as_dict()}
    record["proof"]["rules"] = RULES + "-older"
    cache.put_parts("helm", "k" * 64, texts.entry(json.dumps(record).encode()))
    assert chartsplit._cached_render("k" * 64) == chartsplit._Kept(rendered, [None, None], None)
