"""The Helm engine: an adapter over the in-process Helm SDK (helm-python-sdk).

Everything else talks to `HelmEngine`, never to the SDK, because the SDK is alpha and needs a
private call to pin the Kubernetes version (see docs/stack-format.md, "Engine").
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import os
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from eksinf.build import engineid
from eksinf.errors import CONTRACT, ENVIRONMENT, EksinfError
from eksinf.model.digest import sha256_hex

if TYPE_CHECKING:
    from concurrent.futures import Future

    from eksinf.core.cache import Texts

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class RenderedChart:
    """What one chart render produced, before any post-processing."""

    manifests: dict[str, str]  # template path -> rendered YAML text (hooks included)
    crds: tuple[tuple[str, str], ...]  # (file path, YAML text) for crds/ of the chart and subcharts
    templates: tuple[tuple[str, str], ...]  # (template path, source) for the guard's text checks
    # the subcharts the engine evaluated (folders under charts/: those a chart's values did not
    # disable), as the engine reports them; None when it cannot say (then: all of them)
    subcharts: tuple[str, ...] | None = None
    # whether no string of the values the engine rendered with (the chart's, the user's) holds
    # `{{`: then tpl of a value returns it unchanged (False when the engine cannot say)
    values_plain: bool = False

    def files(self) -> list[tuple[str, str]]:
        """Every file this render produced, crds/ first: (path, text)."""
        return [*self.crds, *self.manifests.items()]

    @functools.cached_property
    def digests(self) -> dict[str, str]:
        """sha256 of every file this render produced (crds/ and templates), by path: taken
        once, for the determinism check, the whole render's record and the guard alike (not
        to be changed by them)."""
        return {path: sha256_hex(text) for path, text in self.files()}

    def evaluated(self) -> tuple[tuple[str, str], ...]:
        """The templates the engine evaluated: the chart's, and its enabled subcharts'."""
        if self.subcharts is None:
            return self.templates
        kept = set(self.subcharts)
        return tuple(
            (path, source)
            for path, source in self.templates
            if path.split("/")[1:2] != ["charts"] or path.split("/")[2] in kept
        )

    def to_record(self, texts: Texts) -> dict[str, Any]:
        """This render as a cache record's JSON, its texts put in `texts` (see cache.Texts)."""
        return {
            "manifests": [[p, texts.put(t)] for p, t in self.manifests.items()],
            "crds": [[p, texts.put(t)] for p, t in self.crds],
            "templates": [[p, texts.put(t)] for p, t in self.templates],
            "subcharts": None if self.subcharts is None else list(self.subcharts),
            "values_plain": self.values_plain,
        }

    @classmethod
    def from_record(cls, raw: dict[str, Any], texts: Texts) -> RenderedChart:
        """The inverse of `to_record`, its texts taken from `texts` in the same order."""
        subcharts = raw["subcharts"]
        return cls(
            manifests={p: texts.take(n) for p, n in raw["manifests"]},
            crds=tuple((p, texts.take(n)) for p, n in raw["crds"]),
            templates=tuple((p, texts.take(n)) for p, n in raw["templates"]),
            subcharts=None if subcharts is None else tuple(map(str, subcharts)),
            values_plain=raw["values_plain"] is True,
        )


@dataclass(frozen=True)
class RenderOptions:
    """What a chart is rendered with besides its values: the release, its namespace, and the
    Kubernetes version and API versions `.Capabilities` reports."""

    release: str
    namespace: str
    kube_version: str
    api_versions: tuple[str, ...] = ()


class HelmEngine(Protocol):
    name: str

    @property
    def version(self) -> str: ...

    @property
    def identity(self) -> str:
        """What decides this engine's output, known without starting it: a cached render is
        looked up under it (build/render.py)."""
        ...

    def render(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions, templates: bool = True
    ) -> RenderedChart:
        """The chart's output; its template sources too unless `templates` is false (the
        determinism check's second render compares the output only)."""
        ...


class EngineThread:
    """An engine whose renders run on one thread of their own, in the order they are asked for.

    The library loads (~35 ms) and the SDK renders (~35 ms of a cold render) with the GIL
    released, so a pinned manifest (Argo CD's: ~35 ms of Python) is split while the library
    loads and the values are read, and the caller parses and splits the charts already
    rendered while the engine renders the next ones. One thread, so no two engine calls ever
    run at once; `render` (the determinism check's second render) goes through it too. Work
    queued ahead (`call`, `submit`) is cancelled if the caller leaves early (an error), and the
    thread is joined on exit."""

    def __init__(self, engine: HelmEngine) -> None:
        from concurrent.futures import ThreadPoolExecutor  # only a run that renders a chart

        self.engine = engine
        self.name = engine.name
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eksinf-engine")
        # Helm's library loads at once (~35 ms, most of it the Go runtime starting, with the GIL
        # released), while the caller reads the hand-written units and values; whichever engine
        # renders, values are read through the library (`read_values`)
        self._pool.submit(importlib.import_module, "helm_python")

    def __enter__(self) -> EngineThread:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @property
    def identity(self) -> str:
        return self.engine.identity

    @property
    def version(self) -> str:
        return self.engine.version

    def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run `fn` on the engine's thread after what is queued before it: work that needs the
        library (reading values the way Helm does) and then starts renders (`submit` from
        there queues them behind it)."""
        return self._pool.submit(fn, *args, **kwargs)

    def submit(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions, templates: bool = True
    ) -> Future[RenderedChart]:
        """Start a render on the engine's thread; its result (or error) is the future's."""
        return self._pool.submit(self.engine.render, archive, values, opts, templates)

    def render(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions, templates: bool = True
    ) -> RenderedChart:
        return self.submit(archive, values, opts, templates).result()


class SdkEngine:
    """Helm v4 through libhelm_c, in process: no subprocess per chart."""

    name = engineid.SDK_NAME

    @property
    def identity(self) -> str:
        return engineid.sdk_identity()

    @property
    def version(self) -> str:
        return engineid.sdk_version()

    def render(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions, templates: bool = True
    ) -> RenderedChart:
        import helm_python  # imported here: loading the native library costs ~80 ms
        from helm_python import _native
        from helm_python.errors import HelmError

        kube = opts.kube_version if opts.kube_version.startswith("v") else f"v{opts.kube_version}"
        options: dict[str, Any] = {
            "name": opts.release,
            "namespace": opts.namespace,
            "kube_version": kube,
        }
        if opts.api_versions:
            options["api_versions"] = list(opts.api_versions)
        try:
            with helm_python.Chart.load_archive(archive) as chart:
                # The SDK lists the top chart's templates only: read the archive when there are
                # subcharts (that costs more than the render). Asked before rendering, because
                # rendering drops disabled subcharts from the loaded chart, and the guard reads
                # every template in the archive, whichever engine renders it.
                sources: tuple[tuple[str, str], ...] = ()
                loaded = [str(dep.get("name")) for dep in chart.dependencies]
                if templates and loaded:
                    sources = chart_templates(archive)
                elif templates:
                    name = chart.name
                    sources = tuple(
                        sorted((f"{name}/{t['name']}", t["data"]) for t in chart.templates)
                    )
                # Chart.render() does not expose kube_version/api_versions; the native call does.
                given = json.dumps(values)
                raw = _native.call_string("helm_render", chart._raw(), given, json.dumps(options))
                crds = tuple(sorted((c["filename"], c["data"]) for c in chart.crds))
                subcharts: tuple[str, ...] | None = None
                plain = False
                if templates:  # what the static determinism proof needs to know
                    subcharts = _evaluated_subcharts(chart, loaded, sources)
                    # the values as the engine coalesced them, as JSON: `{{` in that text is
                    # `{{` in a key or a string (JSON escapes neither brace)
                    merged = _native.call_string("helm_chart_merge_values", chart._raw(), given)
                    plain = "{{" not in merged
        except HelmError as exc:
            raise EksinfError(
                f"helm could not render release {opts.release!r}: {exc}",
                hint="Check the chart values; the message names the template and line.",
                exit_code=CONTRACT,
            ) from exc
        # NOTES.txt is text for a human after `helm install`, never a manifest (as in helm template).
        manifests = {
            path: text for path, text in json.loads(raw).items() if not path.endswith("/NOTES.txt")
        }
        return RenderedChart(
            manifests=dict(sorted(manifests.items())),
            crds=crds,
            templates=sources,
            subcharts=subcharts,
            values_plain=plain,
        )


def _evaluated_subcharts(
    chart: Any, loaded: list[str], sources: tuple[tuple[str, str], ...]
) -> tuple[str, ...] | None:
    """The subcharts a rendered chart evaluated, by their folder under charts/: rendering
    drops from the loaded chart the subcharts its values disable (their condition or tags),
    so what is left is what Helm evaluated (eksinf does not reimplement Helm's rules). The
    engine names a subchart by its chart name, the templates by its folder: they are matched
    when every folder is named as a loaded chart (as `helm package` and `helm dependency`
    write them) and no subchart is enabled under an alias; else None (all of them)."""
    enabled = tuple(sorted(str(dep.get("name")) for dep in chart.dependencies))
    declared = chart.metadata.get("dependencies") or []
    folders = {path.split("/")[2] for path, _ in sources if path.split("/")[1:2] == ["charts"]}
    if not folders <= set(loaded):
        return None
    if enabled and any(isinstance(dep, dict) and dep.get("alias") for dep in declared):
        return None
    return enabled


_VALUES_CHART = b"apiVersion: v2\nname: values\nversion: 0.0.0\n"


@functools.lru_cache(maxsize=256)
def _helm_reading(text: str) -> str:
    """Helm's own reading of a values file, as JSON: the text becomes the values.yaml of a
    throw-away chart, and the engine's chart loader reads it with the reader `helm -f` uses
    (sigs.k8s.io/yaml over go-yaml v2: `n` and `off` are false, `0755` is 493, `1e3` is 1000,
    `1:30` is a string; documents of one file merged). The SDK takes values as JSON only, so
    this is the one way to hand it a values file."""
    import helm_python
    from helm_python import _native

    # the two members and the end-of-archive blocks, gzipped at level 1 (read once, thrown
    # away): a TarFile over a GzipFile cost ~3x as much for files this small
    members = _tar_member("values/Chart.yaml", _VALUES_CHART)
    members += _tar_member("values/values.yaml", text.encode())
    gz = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: the gzip format Helm's loader reads
    archive = gz.compress(members + bytes(2 * tarfile.BLOCKSIZE)) + gz.flush()
    with helm_python.Chart.load_archive(archive) as chart:
        return str(_native.call_string("helm_chart_values", chart._raw()))


def _tar_member(name: str, data: bytes) -> bytes:
    """A regular file's tar header (tarfile's own, mode 0644, owned by root, mtime 0) and its
    data padded to whole blocks."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(tarfile.USTAR_FORMAT) + data + bytes(-len(data) % tarfile.BLOCKSIZE)


def read_values(text: str, label: str) -> dict[str, Any]:
    """A values file's content as Helm reads it (see `_helm_reading`). Callers check the text
    strictly first (yamlio.load_mapping_docs: syntax, duplicate keys, bounds, positions); what
    Helm still refuses here (a value JSON cannot hold, such as `.inf`) is an input error."""
    from helm_python.errors import HelmError

    try:
        values = json.loads(_helm_reading(text))
    except HelmError as exc:
        raise EksinfError(
            f"{label}: Helm cannot read these values: {exc}",
            hint="Helm converts values to JSON: write the value so JSON can hold it "
            "(quote it to keep it as text).",
            exit_code=CONTRACT,
        ) from exc
    return values if isinstance(values, dict) else {}


def chart_templates(archive: bytes) -> tuple[tuple[str, str], ...]:
    """Every template source of a chart archive and of its subcharts, for the guard.

    The SDK's `Chart.templates` lists the top chart's templates only, so a `lookup` in a
    subchart would go unseen. We read the archive itself: subcharts are either folders under
    `charts/` or archives there, nested to any depth. Paths match the engine's manifest keys
    (`<chart>/charts/<sub>/templates/x.yaml`).
    """
    out: list[tuple[str, str]] = []
    _collect_templates(archive, "", out)
    return tuple(sorted(out))


def _collect_templates(archive: bytes, prefix: str, out: list[tuple[str, str]]) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            parts = member.name.split("/")
            if len(parts) >= 3 and parts[-2] == "charts" and parts[-1].endswith(".tgz"):
                nested = prefix + "/".join(parts[:-1]) + "/"
                _collect_templates(_read(tar, member), nested, out)
            elif _is_template(parts):
                text = _read(tar, member).decode("utf-8", errors="replace")
                out.append((prefix + member.name, text))


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    return handle.read() if handle is not None else b""


def _is_template(parts: list[str]) -> bool:
    """A path `<chart>(/charts/<sub>)*/templates/...`."""
    index = 1
    while index + 1 < len(parts) and parts[index] == "charts":
        index += 2
    return index < len(parts) - 1 and parts[index] == "templates"


class BinaryEngine:
    """An external `helm` binary (`helm template --include-crds --output-dir`), one per chart.

    The alternative to the SDK, selected with EKSINF_HELM=/path/to/helm: a second, independent
    implementation whose output must agree with the SDK's (tests compare them).
    """

    name = "helm"

    def __init__(self, path: str) -> None:
        # shutil, subprocess and tempfile are imported where this engine uses them: a render with
        # the built-in engine starts no process and need not import them (subprocess: ~3 ms)
        import shutil

        resolved = shutil.which(path)
        if resolved is None:
            raise EksinfError(
                f"{HELM_ENV}={path}: no executable helm there",
                hint=f"Point {HELM_ENV} at a helm binary, or unset it to use the built-in engine.",
                exit_code=ENVIRONMENT,
            )
        self.path = resolved

    @functools.cached_property
    def identity(self) -> str:
        st = os.stat(self.path)
        return json.dumps([self.name, self.path, st.st_size, st.st_mtime_ns])

    @functools.cached_property
    def version(self) -> str:
        import subprocess

        done = subprocess.run(
            [self.path, "version", "--short"], capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            raise EksinfError(
                f"{self.path} version failed: {done.stderr.strip()}", exit_code=ENVIRONMENT
            )
        return done.stdout.strip()

    def render(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions, templates: bool = True
    ) -> RenderedChart:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="eksinf-helm-") as tmp:
            work = Path(tmp)
            (work / "chart.tgz").write_bytes(archive)
            (work / "values.json").write_text(json.dumps(values))  # JSON is YAML to helm
            out = work / "out"
            command = [
                self.path, "template", opts.release, str(work / "chart.tgz"),
                "--namespace", opts.namespace,
                "--kube-version", opts.kube_version,
                "--include-crds",
                "--values", str(work / "values.json"),
                "--output-dir", str(out),
            ]  # fmt: skip
            for api in opts.api_versions:
                command += ["--api-versions", api]
            # helm keeps caches and repository config under $HOME; keep it off the user's
            home = {k: str(work / "home" / k) for k in _HELM_HOMES}
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=300, env={**os.environ, **home}
            )
            if done.returncode != 0:
                raise EksinfError(
                    f"helm could not render release {opts.release!r}: {done.stderr.strip()}",
                    hint="Check the chart values; the message names the template and line.",
                    exit_code=CONTRACT,
                )
            manifests: dict[str, str] = {}
            crds: list[tuple[str, str]] = []
            for path in sorted(p for p in out.rglob("*") if p.is_file()):
                rel = path.relative_to(out).as_posix()
                text = path.read_text(encoding="utf-8")
                if _is_crd_file(rel.split("/")):
                    crds.append((rel, text))
                else:
                    manifests[rel] = text
        sources = chart_templates(archive) if templates else ()
        return RenderedChart(manifests=manifests, crds=tuple(crds), templates=sources)


HELM_ENV = engineid.HELM_ENV
_HELM_HOMES = ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")


def _is_crd_file(parts: list[str]) -> bool:
    """A path `<chart>(/charts/<sub>)*/crds/<file>`."""
    index = 1
    while index + 1 < len(parts) and parts[index] == "charts":
        index += 2
    return index == len(parts) - 2 and parts[index] == "crds"


def default_engine() -> HelmEngine:
    """The in-process SDK, or the helm binary named by EKSINF_HELM."""
    binary = engineid.binary_path()
    return BinaryEngine(binary) if binary else SdkEngine()
