"""Chart resolution: OCI pull from a real registry, lock, mirror, cache, and their failures."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from chartkit import CONFIGMAP, ChartSource, crd, pin_charts, push, write_stack

from eksinf.build import charts
from eksinf.build.helm import chart_templates
from eksinf.core import net
from eksinf.errors import CONTRACT, ENVIRONMENT, EksinfError
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import load_stack


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private chart cache, so each test sees exactly the fetches it makes."""
    path = tmp_path / "cache"
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(path))
    return path


def unique_repo() -> str:
    return f"t/{uuid.uuid4().hex[:12]}"


def parent_chart() -> ChartSource:
    sub = ChartSource(
        "sub",
        "0.2.0",
        templates={"sub-cm.yaml": CONFIGMAP.replace("-settings", "-sub")},
        crds={"gadget.yaml": crd("Gadget")},
        values={"greeting": "from-sub"},
    )
    return ChartSource(
        "parent",
        "1.0.0",
        templates={"cm.yaml": CONFIGMAP},
        crds={"widget.yaml": crd("Widget")},
        values={"greeting": "hello"},
        subcharts=[sub],
    )


def oci_stack(tmp_path: Path, registry: str, chart: ChartSource) -> tuple[Path, str]:
    repo = push(chart, registry, unique_repo(), tmp_path / "pkg")
    root = write_stack(tmp_path / "stack", [("app", chart, repo)])
    return root, repo


def test_lock_and_render_over_oci_with_subchart_crds(tmp_path, registry, cache, eksinf):
    chart = parent_chart()
    root, repo = oci_stack(tmp_path, registry, chart)

    locked = eksinf("charts", "lock", cwd=root)
    assert locked.code == 0, locked.err
    assert f"sha256:{sha256_hex(chart.package())}" in locked.out
    lock_text = (root / "charts.lock").read_text()
    assert f"pinnedFrom: {repo}/parent" in lock_text

    rendered = eksinf("render", cwd=root)
    assert rendered.code == 0, rendered.err
    crds = (root / "configs/apps/app-crds.yaml").read_text()
    # the subchart's crds/ land in the same CRD unit as the parent's
    assert "name: widgets.example.com" in crds
    assert "name: gadgets.example.com" in crds
    controller = (root / "configs/apps/app-controller.yaml").read_text()
    assert "name: app-settings" in controller and "name: app-sub" in controller
    assert "app: 2 resources + 2 CRDs" in rendered.err


def test_guard_reads_subchart_templates(tmp_path):
    chart = parent_chart()
    chart.subcharts[0].templates["probe.yaml"] = '{{ lookup "v1" "Secret" "a" "b" }}\n'
    paths = [p for p, _ in chart_templates(chart.package())]
    assert "parent/charts/sub/templates/probe.yaml" in paths
    assert "parent/templates/cm.yaml" in paths


def test_guard_reads_templates_of_packaged_subcharts():
    sub = ChartSource("inner", "0.3.0", templates={"x.yaml": "{{ now }}\n"})
    parent = ChartSource("outer", "1.0.0", templates={"cm.yaml": CONFIGMAP})
    files = parent.files()
    files["outer/charts/inner-0.3.0.tgz"] = sub.package()
    from chartkit import make_tgz

    paths = [p for p, _ in chart_templates(make_tgz(files))]
    assert paths == ["outer/charts/inner/templates/x.yaml", "outer/templates/cm.yaml"]


def test_second_resolve_is_served_from_the_cache(tmp_path, registry, cache, monkeypatch):
    chart = ChartSource("cached", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "x"})
    root, repo = oci_stack(tmp_path, registry, chart)
    stack = load_stack(root)
    pin_charts(stack, None)
    spec = stack.component("apps").charts[0]

    first = charts.resolve(stack, spec, None)
    assert first.origin == f"{repo}/cached"
    assert (cache / "charts" / f"{first.sha256}.tgz").is_file()

    def no_network(*_args, **_kwargs):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(charts, "fetch", no_network)
    second = charts.resolve(stack, spec, None)
    assert second.origin == "cache"
    assert second.archive == first.archive


def test_mirror_directory_is_used_before_upstream(tmp_path, cache, eksinf):
    chart = ChartSource("mirrored", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "m"})
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "mirrored-0.1.0.tgz").write_bytes(chart.package())
    # the upstream is a closed loopback port: only the mirror can answer
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/none")])

    locked = eksinf("charts", "lock", "--chart-mirror", str(mirror), cwd=root)
    assert locked.code == 0, locked.err
    assert "(mirror)" in locked.out
    rendered = eksinf("render", "--chart-mirror", str(mirror), cwd=root)
    assert rendered.code == 0, rendered.err
    assert (root / "configs/apps/app-controller.yaml").is_file()


def test_missing_chart_without_mirror_says_how_to_seed_one(tmp_path, registry, cache, eksinf):
    chart = ChartSource("ghost", templates={"cm.yaml": CONFIGMAP})
    repo = f"oci://{registry}/{unique_repo()}"  # nothing was pushed here
    root = write_stack(tmp_path / "stack", [("app", chart, repo)])

    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT
    assert f"chart ghost 0.1.0 is unreachable at {repo}/ghost" in result.err
    assert "Seed a mirror: put ghost-0.1.0.tgz in a directory and pass --chart-mirror" in result.err


def test_registry_down_is_an_environment_error(tmp_path, cache, eksinf):
    chart = ChartSource("down", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/charts")])
    (root / "charts.lock").write_text(
        "charts:\n- chart: down\n  version: 0.1.0\n  repo: oci://127.0.0.1:9/charts\n"
        f"  sha256: {sha256_hex(chart.package())}\n  pinnedFrom: mirror\n"
    )
    result = eksinf("render", cwd=root)
    assert result.code == ENVIRONMENT
    assert "chart down 0.1.0 is unreachable at oci://127.0.0.1:9/charts/down" in result.err
    assert "Seed a mirror" in result.err
    assert not (root / "configs").exists()


def test_archive_that_differs_from_the_lock_is_refused(tmp_path, registry, cache, eksinf):
    chart = ChartSource("drifty", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "a"})
    root, repo = oci_stack(tmp_path, registry, chart)
    assert eksinf("charts", "lock", cwd=root).code == 0
    pinned = sha256_hex(chart.package())
    # the same version is re-pushed with different content (a moved tag)
    chart.values = {"greeting": "b"}
    push(chart, registry, repo.removeprefix(f"oci://{registry}/"), tmp_path / "pkg2")

    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert f"chart drifty 0.1.0 from {repo}/drifty has sha256 {sha256_hex(chart.package())}" in (
        result.err
    )
    assert f"but charts.lock pins {pinned}" in result.err
    assert "Refusing bytes that differ from the lock" in result.err


def test_mirror_archive_that_differs_from_the_lock_is_refused(tmp_path, cache):
    chart = ChartSource("m2", templates={"cm.yaml": CONFIGMAP})
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "m2-0.1.0.tgz").write_bytes(chart.package())
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/x")])
    stack = load_stack(root)
    pin_charts(stack, mirror)
    chart.templates["extra.yaml"] = CONFIGMAP.replace("-settings", "-extra")
    (mirror / "m2-0.1.0.tgz").write_bytes(chart.package())
    with pytest.raises(EksinfError) as err:
        charts.resolve(stack, stack.component("apps").charts[0], mirror)
    assert err.value.exit_code == CONTRACT
    assert "from mirror has sha256" in err.value.message


def test_mirror_archive_that_disagrees_with_the_mirrors_sums_is_refused(tmp_path, cache):
    """A mirror publishes SHA256SUMS (../shared/charts does): a copy that disagrees with it is
    damaged or replaced, and is refused even before the lock is consulted (`charts lock`)."""
    chart = ChartSource("m3", templates={"cm.yaml": CONFIGMAP})
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "m3-0.1.0.tgz").write_bytes(chart.package())
    (mirror / "SHA256SUMS").write_text(f"{'0' * 64}  m3-0.1.0.tgz\n")
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/x")])
    with pytest.raises(EksinfError) as err:
        charts.pins(load_stack(root), mirror)
    assert err.value.exit_code == CONTRACT
    assert "disagrees with the mirror's SHA256SUMS" in err.value.message


def test_a_mirror_copy_is_hashed_once_for_its_sums_and_the_lock(tmp_path, cache, monkeypatch):
    """A copy from a mirror that publishes SHA256SUMS is checked against both the sums and
    charts.lock, with one hash of its bytes; a copy that disagrees with either is still
    refused (the tests above)."""
    chart = ChartSource("m4", templates={"cm.yaml": CONFIGMAP})
    archive = chart.package()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "m4-0.1.0.tgz").write_bytes(archive)
    (mirror / "SHA256SUMS").write_text(f"{sha256_hex(archive)}  m4-0.1.0.tgz\n")
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/x")])
    pin_charts(load_stack(root), mirror)
    hashed: list[int] = []

    def counted(data: bytes | str) -> str:
        hashed.append(len(data))
        return sha256_hex(data)

    monkeypatch.setattr(charts, "sha256_hex", counted)
    stack = load_stack(root)
    resolved = charts.resolve(stack, stack.component("apps").charts[0], mirror)
    assert (resolved.origin, resolved.archive, hashed) == ("mirror", archive, [len(archive)])


def test_chart_missing_from_the_lock_is_a_contract_error(tmp_path, registry, cache, eksinf):
    chart = ChartSource("unpinned", templates={"cm.yaml": CONFIGMAP})
    root, repo = oci_stack(tmp_path, registry, chart)
    result = eksinf("render", cwd=root)  # no `charts lock` was run
    assert result.code == CONTRACT
    assert f"chart unpinned 0.1.0 ({repo}) is not pinned in charts.lock" in result.err
    assert "Run `eksinf charts lock`" in result.err


def test_malformed_lock_entry_is_reported(tmp_path, cache):
    chart = ChartSource("bad", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/x")])
    (root / "charts.lock").write_text("charts:\n- chart: bad\n  version: 0.1.0\n")
    with pytest.raises(EksinfError) as err:
        charts.read_lock(load_stack(root))
    assert err.value.exit_code == CONTRACT
    assert "charts.lock: malformed entry" in err.value.message


def test_charts_list_json_shows_pins(tmp_path, cache, eksinf):
    import json

    chart = ChartSource("listed", templates={"cm.yaml": CONFIGMAP})
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "listed-0.1.0.tgz").write_bytes(chart.package())
    root = write_stack(tmp_path / "stack", [("app", chart, "oci://127.0.0.1:9/x")])
    before = json.loads(eksinf("charts", "list", "--json", cwd=root).out)["charts"]
    assert before[0]["sha256"] is None
    assert eksinf("charts", "lock", "--chart-mirror", str(mirror), cwd=root).code == 0
    after = json.loads(eksinf("charts", "list", "--json", cwd=root).out)["charts"]
    assert after == [
        {
            "component": "apps",
            "chart": "listed",
            "version": "0.1.0",
            "source": "oci://127.0.0.1:9/x/listed",
            "sha256": sha256_hex(chart.package()),
        }
    ]


def test_plain_http_only_for_loopback():
    assert net.is_loopback("127.0.0.1")
    assert net.is_loopback("localhost")
    assert net.is_loopback("::1")
    assert not net.is_loopback("public.ecr.aws")
    assert not net.is_loopback("10.0.0.1")
    # registry references carry a port: the same rule applies to them
    assert net.is_loopback("127.0.0.1:5000")
    assert net.is_loopback("[::1]:5000")
    assert net.is_loopback("localhost:5000")
    assert not net.is_loopback("ghcr.io:443")


def test_real_mirror_archives_match_the_committed_lock(chart_mirror):
    from conftest import REPO

    stack = load_stack(REPO)
    pins = charts.read_lock(stack)
    for comp in stack.components:
        for spec in comp.charts:
            archive = chart_mirror / f"{spec.chart}-{spec.version}.tgz"
            pin = pins[(spec.chart, spec.version, spec.repo)]
            assert sha256_hex(archive.read_bytes()) == pin.sha256


@pytest.fixture
def http_repo(tmp_path: Path):
    """A Helm HTTP chart repository (index.yaml + archives) served on 127.0.0.1."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = tmp_path / "http-repo"
    root.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *_args: None  # type: ignore[attr-defined]

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:
            pass  # a client that hung up early (eksinf refusing an oversized body): no noise

    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/charts"
    server.shutdown()
    server.server_close()


def publish_http(root: Path, chart: ChartSource) -> None:
    (root / "charts").mkdir(exist_ok=True)
    (root / "charts" / f"{chart.name}-{chart.version}.tgz").write_bytes(chart.package())
    index = {
        "apiVersion": "v1",
        "entries": {
            chart.name: [
                {
                    "name": chart.name,
                    "version": chart.version,
                    "urls": [f"{chart.name}-{chart.version}.tgz"],
                }
            ]
        },
    }
    import yaml

    (root / "charts" / "index.yaml").write_text(yaml.safe_dump(index))


def test_http_chart_repository(tmp_path, http_repo, cache, eksinf):
    served, url = http_repo
    chart = ChartSource("webchart", templates={"cm.yaml": CONFIGMAP}, values={"greeting": "w"})
    publish_http(served, chart)
    root = write_stack(tmp_path / "stack", [("app", chart, url)])

    locked = eksinf("charts", "lock", cwd=root)
    assert locked.code == 0, locked.err
    assert f"({url} webchart)" in locked.out
    rendered = eksinf("render", cwd=root)
    assert rendered.code == 0, rendered.err
    assert "name: app-settings" in (root / "configs/apps/app-controller.yaml").read_text()


def test_http_repository_without_the_version(tmp_path, http_repo, cache, eksinf):
    served, url = http_repo
    publish_http(served, ChartSource("webchart", "0.1.0", templates={"cm.yaml": CONFIGMAP}))
    wanted = ChartSource("webchart", "9.9.9", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", wanted, url)])
    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT
    assert f"webchart 9.9.9 is not in {url}/index.yaml" in result.err
    assert "Seed a mirror: put webchart-9.9.9.tgz in a directory" in result.err


def test_plain_http_to_a_remote_host_is_refused(tmp_path, cache, eksinf):
    chart = ChartSource("remote", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, "http://charts.example.com/repo")])
    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT
    assert "refusing plain HTTP to charts.example.com" in result.err


def test_http_repository_without_an_index(tmp_path, http_repo, cache, eksinf):
    _served, url = http_repo
    chart = ChartSource("noindex", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, url)])
    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT
    assert f"HTTPError: 404 Client Error: File not found for url: {url}/index.yaml" in result.err


def test_engine_template_list_equals_the_archive_walk(stack_dir, chart_mirror):
    """The SDK's own template list is used for charts without subcharts: it must be complete."""
    from eksinf.build.chartsplit import chart_values
    from eksinf.build.helm import RenderOptions, SdkEngine

    stack = load_stack(stack_dir)
    engine = SdkEngine()
    for comp in stack.components:
        for spec in comp.charts:
            archive = charts.resolve(stack, spec, chart_mirror).archive
            opts = RenderOptions(spec.release, spec.namespace, stack.kube_version)
            rendered = engine.render(archive, chart_values(stack, comp, spec), opts)
            assert rendered.templates == chart_templates(archive), spec.chart


def test_an_http_index_over_the_yaml_bound_is_refused_unread(tmp_path, http_repo, cache, eksinf):
    """every network read is bounded; an index.yaml larger than any YAML
    eksinf reads (16 MiB) is refused from its Content-Length, before its body is read."""
    served, url = http_repo
    (served / "charts").mkdir()
    (served / "charts" / "index.yaml").write_bytes(b"#" * (16 * 1024 * 1024 + 1))
    chart = ChartSource("big", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, url)])
    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT and "Traceback" not in result.err
    assert f"{url}/index.yaml is larger than 16777216 bytes" in result.err


def test_an_http_index_of_an_odd_shape_names_the_chart(tmp_path, http_repo, cache, eksinf):
    served, url = http_repo
    (served / "charts").mkdir()
    (served / "charts" / "index.yaml").write_text("entries: [1, 2]\n")
    chart = ChartSource("odd", templates={"cm.yaml": CONFIGMAP})
    root = write_stack(tmp_path / "stack", [("app", chart, url)])
    result = eksinf("charts", "lock", cwd=root)
    assert result.code == ENVIRONMENT and "Traceback" not in result.err
    assert f"odd 0.1.0 is not in {url}/index.yaml" in result.err
