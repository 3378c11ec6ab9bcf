"""A fake `cub` executable for the tests, installed on PATH by `install_fake_cub`.

Every call is first checked against cub's command table (tests/fixtures/cub/commands.json, read
from cub's source), so a subcommand or flag cub does not have fails the way cub fails
("unknown flag"). The call is then appended to a log, and answered in one of two modes:

- replay (FAKE_CUB_SCENARIO): the next call of a scenario file must match exactly; its recorded
  exit code, stdout and stderr are the answer.
- simulate (FAKE_CUB_HUB): a ConfigHub stand-in. State lives in a `LocalHub` (SQLite) and the
  answers are printed in the shapes cub prints: the Go structs of `goclient-new`
  (`ExtendedSpace`, `ExtendedUnit`, `ExtendedLink`, `ExtendedTarget`, `ExtendedRevision`,
  `ExtendedRelease`, a bare `Release` from publish) and the text of `cub variant upload` and
  `cub version`. tests/fixtures/cub/README.md names the source file of each shape.

The output shapes, not the hub's behaviour, are what this fakes: LocalHub's behaviour follows
ConfigHub's documented rules (docs/hub.md).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "cub"
TABLE = json.loads((FIXTURES / "commands.json").read_text())
SERVER_URL = "https://hub.confighub.test"


class CubFailure(Exception):
    """cub's way of failing: `Failed: <message>` on stderr, exit 1 (failOnError in main.go)."""


def parse(argv: list[str]) -> tuple[str, dict[str, list[str]], list[str]]:
    """(command, flags, positionals) of a cub command line, or CubFailure naming what cub's
    table does not have."""
    if not argv:
        raise CubFailure("no command")
    name = argv[0] if argv[0] in TABLE["commands"] else " ".join(argv[:2])
    spec = TABLE["commands"].get(name)
    if spec is None:
        raise CubFailure(f'unknown command "{" ".join(argv[:2])}" for "cub"')
    known = {**TABLE["global"], **spec["flags"]}
    flags: dict[str, list[str]] = {}
    positionals: list[str] = []
    rest = argv[len(name.split()) :]
    i = 0
    while i < len(rest):
        token = rest[i]
        if token.startswith("-") and token != "-":
            flag, has_value, value = token.partition("=")
            kind = known.get(flag)
            if kind is None:
                raise CubFailure(f"unknown flag: {flag}")
            if kind == "string" and not has_value:
                i += 1
                if i == len(rest):
                    raise CubFailure(f"flag needs an argument: {flag}")
                value = rest[i]
            flags.setdefault(flag, []).append(value if kind == "string" else "true")
        else:
            positionals.append(token)
        i += 1
    low, high = spec["args"]
    if len(positionals) < low or (high is not None and len(positionals) > high):
        raise CubFailure(f"{name}: wrong number of arguments: {positionals}")
    return name, flags, positionals


def _log(argv: list[str], stdin: str | None) -> None:
    path = os.environ.get("FAKE_CUB_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"args": argv, "stdin": stdin}) + "\n")


def replay(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
    scenario = Path(os.environ["FAKE_CUB_SCENARIO"])
    calls = json.loads(scenario.read_text())["calls"]
    cursor = scenario.with_suffix(".cursor")
    index = int(cursor.read_text()) if cursor.exists() else 0
    if index >= len(calls):
        return 99, "", f"fake cub: unexpected extra call {argv}\n"
    want = calls[index]
    cursor.write_text(str(index + 1))
    root = os.environ.get("FAKE_CUB_ROOT", "$ROOT")  # recorded paths name the stack as $ROOT
    expected = [arg.replace("$ROOT", root) for arg in want["args"]]
    if argv != expected:
        return 99, "", f"fake cub: call {index + 1} was {argv}, recorded {expected}\n"
    if "stdin_json" in want and (stdin is None or json.loads(stdin) != want["stdin_json"]):
        return 99, "", f"fake cub: call {index + 1}: stdin {stdin!r} is not the recorded body\n"
    return want["code"], want["stdout"], want["stderr"]


# ---- simulate: ConfigHub shapes over a LocalHub ------------------------------------------------


def _one(flags: dict[str, list[str]], name: str, default: str | None = None) -> str | None:
    return flags.get(name, [default])[-1]


def _kv(values: list[str]) -> dict[str, str]:
    return dict(v.split("=", 1) for v in values)


class Sim:
    def __init__(self, root: Path) -> None:
        from eksinf.hub.local import LocalHub

        self.root = root
        self.hub = LocalHub(root / "hub.db")

    # shapes ----------------------------------------------------------------------------------

    def space_json(self, slug: str) -> dict:
        """goclient-new ExtendedSpace: {Space: {...}, counts}; the release target by ID."""
        space = self.hub.get_space(slug)
        target_id = (
            self.hub.get_target(space.release_target).target_id if space.release_target else None
        )
        return {
            "Space": {
                "SpaceID": space.space_id,
                "Slug": space.slug,
                "Labels": space.labels,
                "Annotations": space.annotations,
                "ReleaseTargetID": target_id,
            },
            "TotalUnitCount": len(self.hub.list_units(slug)),
        }

    def target_json(self, ref: str) -> dict:
        """goclient-new ExtendedTarget: {Target: {...}, Space: {...}}."""
        target = self.hub.get_target(ref)
        space = self.hub.get_space(target.space)
        annotations = {"confighub.com/argo-apps-space": target.apps_space or ""}
        return {
            "Target": {
                "TargetID": target.target_id,
                "Slug": target.slug,
                "SpaceID": space.space_id,
                "SpaceSlug": space.slug,
                "ProviderType": "OCI",
                "ToolchainType": "Any",
                "Annotations": annotations,
            },
            "Space": {"SpaceID": space.space_id, "Slug": space.slug},
        }

    def unit_json(self, unit) -> dict:
        """goclient-new ExtendedUnit: {Unit: {...}, Space: {...}, Target: {...}}."""
        row = {
            "Unit": {
                "UnitID": unit.unit_id,
                "Slug": unit.slug,
                "HeadRevisionNum": unit.head_revision,
                "DataHash": unit.data_hash,
                "LastReleasedRevisionNum": unit.last_released_revision,
                "UpstreamUnitID": unit.upstream_unit_id,
                "UpstreamRevisionNum": unit.upstream_revision,
                "ValidationErrors": dict.fromkeys(unit.validation_errors, True),
                "Labels": unit.labels,
            },
            "Space": {"Slug": unit.space},
        }
        if unit.target:
            row["Target"] = self.target_json(unit.target)["Target"]
        return row

    def link_json(self, link) -> dict:
        """goclient-new ExtendedLink: {Link, FromUnit, ToUnit, Space, ToSpace}."""
        return {
            "Link": {
                "LinkID": link.link_id,
                "Slug": link.slug,
                "UpdateType": link.update_type,
                **link.bindings,
            },
            "FromUnit": {"Slug": link.from_unit},
            "ToUnit": {"Slug": link.to_unit},
            "Space": {"Slug": link.space},
            "ToSpace": {"Slug": link.to_space},
        }

    @staticmethod
    def release_json(release) -> dict:
        """goclient-new Release (cmd/cub/release_get.go prints these fields): no unit count."""
        return {
            "ReleaseID": str(
                uuid.uuid5(uuid.NAMESPACE_URL, release.ref + str(release.release_num))
            ),
            "ReleaseNum": release.release_num,
            "Digest": release.digest,
            "ManifestDigest": release.manifest_digest,
            "Published": True,
        }

    # commands --------------------------------------------------------------------------------

    def run(self, name: str, flags: dict[str, list[str]], pos: list[str], stdin: str | None):
        from eksinf.errors import EksinfError
        from eksinf.hub import protocol as p

        hub = self.hub
        space = _one(flags, "--space")
        try:
            handler = getattr(self, "cmd_" + name.replace(" ", "_"))
        except AttributeError:
            raise CubFailure(f"fake cub does not simulate `cub {name}`") from None
        try:
            return handler(hub, flags, pos, space, stdin)
        except p.NoChanges:
            raise CubFailure("HTTP 400: no changes were made since :latest bundle") from None
        except p.GateBlocked as exc:
            gates = "".join(f"\nApply Gates: {g}" for g in exc.gates)
            raise CubFailure(
                f"HTTP 422: outstanding ApplyGates; triggers re-queued for evaluation{gates}"
            ) from None
        except p.ReferencedElsewhere as exc:
            raise CubFailure(f"HTTP 400: still referenced: {', '.join(exc.referrers)}") from None
        except p.NotFound as exc:
            message = exc.message if "not found" in exc.message else f"{exc.message}: not found"
            raise CubFailure(message) from None
        except EksinfError as exc:
            raise CubFailure(exc.message) from None

    def cmd_version(self, hub, flags, pos, space, stdin):
        version = os.environ.get("FAKE_CUB_VERSION", "v0.2.15")
        return (
            f"Client Version:\n  Version:    {version}\n  Commit:     fake\n"
            f"  Build Date: 1970-01-01T00:00:00Z\nServer Version:\n"
            f"  URL:        {SERVER_URL}\n  Commit:     fake\n"
        )

    def cmd_context_get(self, hub, flags, pos, space, stdin):
        return json.dumps({"name": "default", "coordinate": {"serverURL": SERVER_URL}})

    def cmd_space_get(self, hub, flags, pos, space, stdin):
        if not hub.space_exists(pos[0]):
            raise CubFailure(f"space {pos[0]} not found")  # cmd/cub/space_get.go
        return json.dumps(self.space_json(pos[0]))

    def cmd_space_list(self, hub, flags, pos, space, stdin):
        rows = [self.space_json(s.slug) for s in hub.list_spaces(_one(flags, "--where"))]
        return json.dumps(rows)

    def cmd_space_create(self, hub, flags, pos, space, stdin):
        created = hub.create_space(
            pos[0], _kv(flags.get("--label", [])), allow_exists="--allow-exists" in flags
        )
        return f"Successfully created space {created.slug} ({created.space_id})\n"

    def cmd_space_update(self, hub, flags, pos, space, stdin):
        slug = pos[0]
        if "--label" in flags:
            hub.label_space(slug, _kv(flags["--label"]))
        ref = _one(flags, "--release-target")
        if ref is not None:
            target = None if ref == "-" else hub.get_target(ref).target_id
            with hub._tx():
                hub._set_release_target(hub.get_space(slug).space_id, target)
        return f"Successfully updated space {slug}\n"

    def cmd_space_delete(self, hub, flags, pos, space, stdin):
        if not hub.space_exists(pos[0]):
            raise CubFailure(f"space {pos[0]} not found")
        hub.delete_space(pos[0], recursive="--recursive" in flags)
        return f"Successfully deleted space {pos[0]}\n"

    def cmd_unit_list(self, hub, flags, pos, space, stdin):
        units = hub.list_units(None if space == "*" else space, _one(flags, "--where"))
        return json.dumps([self.unit_json(u) for u in units])

    def cmd_unit_get(self, hub, flags, pos, space, stdin):
        return json.dumps(self.unit_json(hub.get_unit(space, pos[0])))

    def cmd_unit_data(self, hub, flags, pos, space, stdin):
        return hub.unit_data(space, pos[0])

    def cmd_revision_data(self, hub, flags, pos, space, stdin):
        return hub.unit_data(space, pos[0], int(pos[1]))

    def cmd_revision_list(self, hub, flags, pos, space, stdin):
        rows = [
            {
                "Revision": {
                    "RevisionNum": r.num,
                    "Description": r.description,
                    "DataHash": r.data_hash,
                }
            }
            for r in hub.history(space, pos[0])
        ]
        return json.dumps(rows)

    def cmd_unit_create(self, hub, flags, pos, space, stdin):
        unit = hub.create_unit(space, pos[0], stdin or "", target=_one(flags, "--target"))
        return f"Successfully created unit {unit.slug} ({unit.unit_id})\n"

    def cmd_unit_update(self, hub, flags, pos, space, stdin):
        if "--restore" in flags:
            hub.restore(space, pos[0], int(_one(flags, "--restore")))
        elif "--resolve" in flags:
            hub.resolve(space, pos[0])
        else:
            hub.update_unit(space, pos[0], stdin or "", _one(flags, "--change-desc", ""))
        return f"Successfully updated unit {pos[0]}\n"

    def cmd_variant_upload(self, hub, flags, pos, space, stdin):
        from eksinf.hub.protocol import UploadSource

        component, variant = _one(flags, "--component"), _one(flags, "--variant")
        folder = Path(pos[0])
        files = {
            p.name: p.read_bytes()
            for p in sorted(folder.iterdir())
            if p.suffix in (".yaml", ".yml")
        }
        slug = f"{component}-{variant}"
        existed = hub.space_exists(slug) and bool(hub.list_units(slug))
        labels = {"Owner": _one(flags, "--owner", ""), **_kv(flags.get("--space-label", []))}
        dry_run = "--dry-run" in flags
        report = hub.variant_upload(
            component,
            variant,
            UploadSource(_one(flags, "--source-description") or pos[0], files),
            labels=labels,
            prune="--prune" in flags,
            dry_run=dry_run,
        )
        return upload_text(slug, existed, dry_run, report)

    def cmd_variant_create(self, hub, flags, pos, space, stdin):
        created = hub.variant_create(pos[0], pos[1], target=_one(flags, "--target"))
        return f"Created variant space {created.slug} (ID: {created.space_id})\n"

    def cmd_variant_promote(self, hub, flags, pos, space, stdin):
        hub.variant_promote(pos[0])
        return ""

    def cmd_link_list(self, hub, flags, pos, space, stdin):
        return json.dumps([self.link_json(lk) for lk in hub.list_links(space)])

    def cmd_link_create(self, hub, flags, pos, space, stdin):
        _slug, unit, to_unit, to_space = pos
        link = hub.set_link(space, unit, to_space, to_unit, json.loads(stdin or "{}"))
        return f"Successfully created link {link.slug} ({link.link_id})\n"

    def cmd_link_update(self, hub, flags, pos, space, stdin):
        (link,) = [lk for lk in hub.list_links(space) if lk.slug == pos[0]]
        hub.set_link(space, link.from_unit, link.to_space, link.to_unit, json.loads(stdin or "{}"))
        return f"Successfully updated link {link.slug} ({link.link_id})\n"

    def cmd_link_delete(self, hub, flags, pos, space, stdin):
        hub.delete_link(space, pos[0])
        return f"Successfully deleted link {pos[0]}\n"

    def cmd_function_do(self, hub, flags, pos, space, stdin):
        hub.invoke(space, pos[0], pos[1:], unit=_one(flags, "--unit"), where=_one(flags, "--where"))
        return ""

    def cmd_worker_create(self, hub, flags, pos, space, stdin):
        return f"Successfully created worker {pos[0]}\n"

    def cmd_target_create(self, hub, flags, pos, space, stdin):
        registry = f"oci-layout:{self.root / 'oci'}"  # where this stand-in serves releases
        target = hub.create_target(space, pos[0], registry)
        # LocalHub's create_target also writes the root Application; cub's creates only the
        # target, and eksinf writes root itself (`unit create`), so take it out again.
        with hub._tx() as db:
            root = hub._unit_row(target.apps_space, "root")["id"]
            db.execute("DELETE FROM revisions WHERE unit_id=?", (root,))
            db.execute("DELETE FROM units WHERE id=?", (root,))
        return f"Successfully created target {target.slug} ({target.target_id})\n"

    def cmd_target_get(self, hub, flags, pos, space, stdin):
        return json.dumps(self.target_json(f"{space}/{pos[0]}"))

    def cmd_target_list(self, hub, flags, pos, space, stdin):
        spaces = [s.slug for s in hub.list_spaces()] if space == "*" else [space]
        rows = []
        for slug in spaces:
            for (target,) in hub._db.execute(
                "SELECT t.slug FROM targets t JOIN spaces s ON s.id=t.space_id WHERE s.slug=?",
                (slug,),
            ):
                rows.append(self.target_json(f"{slug}/{target}"))
        where = _one(flags, "--where")
        if where:  # the one clause eksinf sends: TargetID = '<id>'
            wanted = where.split("'")[1]
            rows = [r for r in rows if r["Target"]["TargetID"] == wanted]
        return json.dumps(rows)

    def cmd_target_update(self, hub, flags, pos, space, stdin):
        return f"Successfully updated target {pos[0]}\n"

    def cmd_trigger_create(self, hub, flags, pos, space, stdin):
        slug, _event, _toolchain, function = pos[:4]
        hub.create_trigger(space, slug, function, _one(flags, "--description", ""))
        return f"Successfully created trigger {slug}\n"

    def cmd_release_publish(self, hub, flags, pos, space, stdin):
        return json.dumps(self.release_json(hub.publish(pos[0])))

    def cmd_release_list(self, hub, flags, pos, space, stdin):
        rows = [
            {"Release": self.release_json(r), "Space": {"Slug": space}}
            for r in hub.list_releases(space)
        ]
        return json.dumps(rows)


def upload_text(space: str, existed: bool, dry_run: bool, report) -> str:
    """What `cub variant upload` prints (cmd/cub/variant_upload_reconcile.go)."""
    lines = []
    if dry_run and not existed:
        lines.append(
            f"Space {space} does not exist yet; a first upload would create "
            f"{len(report.created)} Unit(s):"
        )
        lines += [f"  + {slug}" for slug in report.created]
    elif not existed:
        lines += [f"Successfully created unit {slug}" for slug in report.created]
    elif not (report.created or report.updated or report.emptied):
        lines.append(f"Already up to date: {space} matches the input")
    elif dry_run:
        lines.append(f"== Space {space} ==")
        lines += [f"  + {s} (create)" for s in report.created]
        lines += [f"  ~ {s} (update)" for s in report.updated]
        lines += [f"  - {s} (empty)" for s in report.emptied]
        lines += ["", f"{len(report.created)} to create, {len(report.updated)} to update, "
                  f"{len(report.emptied)} to empty"]  # fmt: skip
    else:
        lines.append(
            f"Re-uploaded {space}: {len(report.created)} created, {len(report.updated)} "
            f"updated, {len(report.emptied)} emptied"
        )
        changed = ", ".join(f"'{s}'" for s in (*report.updated, *report.emptied))
        lines.append(
            f"Revert with: cub unit update --patch --space {space} --restore "
            f'Before:ChangeSet:upload-19700101-000000 --where "Slug IN ({changed})"'
        )
    if report.missing and existed:
        lines += [
            "",
            f"Note: {len(report.missing)} Unit(s) are in the Space but not in this input. "
            "Re-run with --prune to",
            "empty them (their deployed resources are removed on the next apply):",
        ]
        lines += [f"  - {slug}" for slug in report.missing]
    return "\n".join(lines) + "\n"


def answer(argv: list[str], stdin: str | None, sim: Sim | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one cub call."""
    _log(argv, stdin)
    try:
        name, flags, pos = parse(argv)
        if os.environ.get("FAKE_CUB_SCENARIO"):
            return replay(argv, stdin)
        sim = sim or Sim(Path(os.environ["FAKE_CUB_HUB"]))
        return 0, sim.run(name, flags, pos, stdin), ""
    except CubFailure as exc:
        return 1, "", f"Failed: {exc}\n"


def main() -> int:
    code, out, err = answer(sys.argv[1:], sys.stdin.read() or None)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


class Server:
    """Simulate mode behind a Unix socket, so each `cub` process is a thin client and the
    ConfigHub stand-in (one LocalHub) lives in one thread of the test process."""

    def __init__(self, root: Path, socket_path: Path) -> None:
        import socketserver
        import threading

        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request = json.loads(self.rfile.read())
                if server.sim is None:  # SQLite objects stay in the thread that made them
                    server.sim = Sim(root)
                code, out, err = answer(request["args"], request["stdin"], server.sim)
                self.wfile.write(json.dumps({"code": code, "out": out, "err": err}).encode())

        self.sim: Sim | None = None
        self.server = socketserver.UnixStreamServer(str(socket_path), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


CLIENT = """\
#!{python}
import json, os, socket, sys
if not os.environ.get("FAKE_CUB_SOCKET"):
    sys.path.insert(0, {tests!r})
    import fakecub
    sys.exit(fakecub.main())
conn = socket.socket(socket.AF_UNIX)
conn.connect(os.environ["FAKE_CUB_SOCKET"])
conn.sendall(json.dumps({{"args": sys.argv[1:], "stdin": sys.stdin.read() or None}}).encode())
conn.shutdown(socket.SHUT_WR)
reply = json.loads(b"".join(iter(lambda: conn.recv(65536), b"")))
sys.stdout.write(reply["out"])
sys.stderr.write(reply["err"])
sys.exit(reply["code"])
"""


def install_fake_cub(bin_dir: Path) -> Path:
    """Write an executable `cub` into bin_dir: a socket client in simulate mode, else this
    module run by this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cub = bin_dir / "cub"
    cub.write_text(CLIENT.format(python=sys.executable, tests=str(Path(__file__).parent)))
    cub.chmod(0o755)
    return cub


class FakeCub:
    """The fake `cub` on PATH, its call log, and the mode it answers in."""

    def __init__(self, tmp: Path, monkeypatch) -> None:
        self.tmp = tmp
        self.monkeypatch = monkeypatch
        self.log = tmp / "cub-calls.jsonl"
        self.server: Server | None = None
        bin_dir = install_fake_cub(tmp / "bin").parent
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_CUB_LOG", str(self.log))

    def replay(self, scenario: str, root: Path) -> None:
        copy = self.tmp / f"{scenario}.json"
        copy.write_text((FIXTURES / f"{scenario}.json").read_text())
        self.scenario = copy
        self.monkeypatch.setenv("FAKE_CUB_SCENARIO", str(copy))
        self.monkeypatch.setenv("FAKE_CUB_ROOT", str(root))

    def simulate(self) -> Path:
        """Start the ConfigHub stand-in; returns its LocalHub database."""
        store = self.tmp / "confighub"
        store.mkdir(exist_ok=True)
        self.monkeypatch.setenv("FAKE_CUB_HUB", str(store))
        self.server = Server(store, self.tmp / "cub.sock")
        self.monkeypatch.setenv("FAKE_CUB_SOCKET", str(self.tmp / "cub.sock"))
        return store / "hub.db"

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line)["args"] for line in self.log.read_text().splitlines()]

    def done(self) -> None:
        recorded = len(json.loads(self.scenario.read_text())["calls"])
        made = int(self.scenario.with_suffix(".cursor").read_text())
        assert made == recorded, f"only {made}/{recorded} recorded calls were made"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


if __name__ == "__main__":
    sys.exit(main())
