"""Small Helm charts and stacks that tests write for themselves.

Charts are packaged with the reproducible stdlib recipe (sorted entries, mtime 0, gzip without a
name or time), so the same files always give the same archive sha256, and pushed to the real
docker-registry fixture over OCI.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CRD_TEMPLATE = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names: {{kind: {kind}, plural: {plural}}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object}}}}
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  namespace: {{ .Release.Namespace }}
data:
  greeting: {{ .Values.greeting | quote }}
"""


def crd(kind: str, group: str = "example.com") -> str:
    return CRD_TEMPLATE.format(kind=kind, plural=kind.lower() + "s", group=group)


@dataclass
class ChartSource:
    """A chart as files: templates/, crds/, values.yaml and subcharts under charts/."""

    name: str
    version: str = "0.1.0"
    templates: dict[str, str] = field(default_factory=dict)
    crds: dict[str, str] = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    subcharts: list[ChartSource] = field(default_factory=list)
    conditions: dict[str, str] = field(default_factory=dict)  # subchart -> its condition

    def files(self, prefix: str = "") -> dict[str, bytes]:
        base = f"{prefix}{self.name}/"
        meta: dict = {"apiVersion": "v2", "name": self.name, "version": self.version}
        if self.conditions:
            versions = {sub.name: sub.version for sub in self.subcharts}
            meta["dependencies"] = [
                {"name": name, "version": versions[name], "condition": condition}
                for name, condition in sorted(self.conditions.items())
            ]
        out = {
            base + "Chart.yaml": yaml.safe_dump(meta, sort_keys=True).encode(),
            base + "values.yaml": yaml.safe_dump(self.values, sort_keys=True).encode(),
        }
        for rel, text in self.templates.items():
            out[f"{base}templates/{rel}"] = text.encode()
        for rel, text in self.crds.items():
            out[f"{base}crds/{rel}"] = text.encode()
        for sub in self.subcharts:
            out.update(sub.files(prefix=f"{base}charts/"))
        return out

    def package(self) -> bytes:
        return make_tgz(self.files())


def make_tgz(files: dict[str, bytes]) -> bytes:
    """A reproducible .tgz: sorted entries, uid/gid 0, mtime 0, gzip with no name or time."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def push(chart: ChartSource, registry: str, repo_path: str, tmp: Path) -> str:
    """Push the packaged chart to oci://<registry>/<repo_path>; return that repo URL."""
    import helm_python

    archive = tmp / f"{chart.name}-{chart.version}.tgz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(chart.package())
    repo = f"oci://{registry}/{repo_path}"
    helm_python.push(str(archive), repo, plain_http=True)
    return repo


MGMT_COMPONENT = """\
  - name: base
    plane: mgmt
    order: 0
    render: copy
"""


def write_stack(
    root: Path,
    charts: list[tuple[str, ChartSource, str]],
    *,
    values: dict[str, str] | None = None,
    handwritten: dict[str, str] | None = None,
    allow: str | None = None,
    component: str = "apps",
) -> Path:
    """A stack with one copy component (mgmt) and one helm component (workload).

    `charts` lists (unit name, chart, repo URL). `values` maps a chart's unit name to the YAML
    text of its values file; `handwritten` maps file names to top-level units of the helm
    component; `allow` is the text of its HAZARDS.allow.
    """
    root.mkdir(parents=True, exist_ok=True)
    env = ["RENDER_KUBE_VERSION=1.31.0"]
    entries = []
    for index, (name, chart, repo) in enumerate(charts):
        key = f"CHART_{index}_VERSION"
        env.append(f"{key}={chart.version}")
        entries.append(
            f"      - name: {name}\n"
            f"        chart: {chart.name}\n"
            f"        repo: {repo}\n"
            f"        version: {key}\n"
            f"        release: {name}\n"
            f"        namespace: apps\n"
            f"        values: [values/{name}.yaml]\n"
        )
    (root / "components.yaml").write_text(
        "components:\n"
        + MGMT_COMPONENT
        + f"  - name: {component}\n    plane: workload\n    order: 0\n    render: helm\n"
        + "    charts:\n"
        + "".join(entries)
    )
    (root / "versions.env").write_text("\n".join(env) + "\n")
    src = root / "render" / component
    (src / "values").mkdir(parents=True, exist_ok=True)
    for name, _chart, _repo in charts:
        (src / "values" / f"{name}.yaml").write_text((values or {}).get(name, "{}\n"))
    for filename, text in (handwritten or {}).items():
        (src / filename).write_text(text)
    if allow is not None:
        (src / "HAZARDS.allow").write_text(allow)
    base = root / "render" / "base"
    base.mkdir(parents=True, exist_ok=True)
    (base / "namespace.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n"
    )
    return root


def publish_stack(
    tmp_path: Path, registry: str, charts: list[tuple[str, ChartSource]], **kw
) -> Path:
    """Push each chart to its own fresh repository, write a stack rendering them, lock it.

    `charts` lists (unit name, chart); keyword arguments go to `write_stack`.
    """
    from eksinf.model.stack import load_stack

    entries = []
    for name, chart in charts:
        repo = push(chart, registry, f"t/{uuid.uuid4().hex[:12]}", tmp_path / "pkg" / name)
        entries.append((name, chart, repo))
    root = write_stack(tmp_path / "stack", entries, **kw)
    pin_charts(load_stack(root), None)
    return root


def pin_charts(stack, mirror: Path | None) -> None:
    """Rewrite charts.lock's `charts` section for the archives the source serves now (what
    `charts lock` does for charts, without fetching upstream manifests)."""
    from eksinf.build import charts

    charts.write_lock_sections(stack, {"charts": charts.lock_items(charts.pins(stack, mirror))})
