"""Kubeconfigs as kubectl reads them: the files, their merge, a context, and its credentials.

- Files: `--kubeconfig FILE` when given (it must exist), else every file `KUBECONFIG` lists
  (os.pathsep-separated; a listed file that does not exist is skipped, as kubectl skips it),
  else `~/.kube/config`.
- Merge: the first file to define a cluster, user or context name wins, and so does the first
  `current-context`. Relative paths (certificate-authority, client-certificate, client-key,
  tokenFile, an exec command naming a path) are resolved against the folder of the file that
  holds them, before merging, as kubectl does.
- Credentials: a token, a token file (it wins over `token`, as in client-go), a client
  certificate and key (files or `-data`), or any exec credential plugin
  (client.authentication.k8s.io/v1 or v1beta1). A plugin runs bounded (EXEC_TIMEOUT, EXEC_MAX_OUTPUT),
  non-interactively, with KUBERNETES_EXEC_INFO set; its credential is kept for the process until
  its expirationTimestamp. A plugin that fails is an environment error (exit 4) naming its command
  and its stderr, never a "no access".
"""

from __future__ import annotations

import atexit
import base64
import copy
import json
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.proc import Overflow, run_bounded
from ..core.types import Doc
from ..errors import ENVIRONMENT, USAGE, EksinfError

KUBECONFIG_ENV = "KUBECONFIG"
MAX_KUBECONFIG_BYTES = 4 << 20  # kubeconfigs are a few KB; an inlined CA bundle ~200 KB
MAX_TOKEN_FILE_BYTES = 64 << 10
EXEC_TIMEOUT = 60.0  # seconds: `aws eks get-token` and kubelogin with a cached login take ~1 s
EXEC_MAX_OUTPUT = 1 << 20  # an ExecCredential is a few KB, even with a certificate chain
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXPIRY_MARGIN = 10.0  # seconds: a credential this close to expiry is minted again

# kubeconfig key -> its inline form (cluster, then user)
_FILE_KEYS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's `exec` section: the command that prints an ExecCredential."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""

    def label(self) -> str:
        shown = " ".join([self.command, *self.args])
        return shown if len(shown) <= 160 else shown[:157] + "..."


@dataclass(frozen=True)
class KubeAuth:
    """One context of a kubeconfig: where the cluster is, how to trust it, who the caller is."""

    server: str
    token: str | None = None
    ca_file: str | None = None
    cert: tuple[str, str] | None = None
    insecure: bool = False
    eks_cluster: str | None = None  # set when the kubeconfig's user execs `aws eks get-token`
    token_file: str | None = None
    exec_plugin: ExecPlugin | None = None
    proxy_url: str | None = None
    user: str = ""  # the kubeconfig's user name, for messages
    context: str = ""
    ca_data: str | None = None  # base64, as given: passed to a plugin that asks for cluster info

    def credential(self) -> str:
        """What identifies the caller, in words (the 401 diagnosis names it)."""
        who = f'kubeconfig user "{self.user}"' if self.user else "no kubeconfig user"
        if self.exec_plugin is not None:
            return f"{who}, exec plugin `{self.exec_plugin.label()}`"
        if self.token_file:
            return f"{who}, token file {self.token_file}"
        if self.token:
            return f"{who}, token"
        if self.cert:
            return f"{who}, client certificate {self.cert[0]}"
        return f"{who}, anonymous"


def _error(message: str, hint: str = "", exit_code: int = ENVIRONMENT) -> EksinfError:
    return EksinfError(message, hint=hint, exit_code=exit_code)


# ---- files and merge ----------------------------------------------------------------------


def kubeconfig_files(explicit: Path | None = None) -> list[Path]:
    """The files kubectl would read: `explicit`, else KUBECONFIG's list, else ~/.kube/config."""
    if explicit is not None:
        return [explicit]
    listed = os.environ.get(KUBECONFIG_ENV, "")
    files: list[Path] = []
    for entry in listed.split(os.pathsep):
        if entry and Path(entry) not in files:
            files.append(Path(entry))
    return files or [Path.home() / ".kube" / "config"]


def _read_one(path: Path) -> dict[str, Any]:
    import yaml

    from eksinf.core import yamlio

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        raise _error(f"{path}: cannot read the kubeconfig ({exc.strerror})") from exc
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise _error(f"{path}: larger than any kubeconfig ({MAX_KUBECONFIG_BYTES} bytes)")
    try:
        # bounded (size, depth, aliases) and never cached: a kubeconfig names credentials
        docs = yamlio.load_docs(data.decode("utf-8"), str(path), cached=False)
    except (UnicodeDecodeError, yaml.YAMLError, EksinfError) as exc:
        raise _error(
            f"{path}: not a usable kubeconfig ({getattr(exc, 'message', exc)})",
            hint="A kubeconfig is one YAML document (kubectl config view shows yours).",
        ) from exc
    if not docs:
        return {}
    if len(docs) > 1 or not isinstance(docs[0], dict):
        raise _error(f"{path}: not a usable kubeconfig (not one YAML mapping)")
    return docs[0]


def _named(config: dict[str, Any], key: str, item: str, label: str) -> dict[str, dict[str, Any]]:
    """A kubeconfig list (`clusters`, ...) as name -> entry; a repeated name is refused, as
    kubectl refuses it."""
    out: dict[str, dict[str, Any]] = {}
    entries = config.get(key) or []
    if not isinstance(entries, list):
        raise _error(f"{label}: `{key}` is not a list")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _error(f"{label}: an entry of `{key}` has no name")
        if entry["name"] in out:
            raise _error(f"{label}: {key} names {entry['name']!r} twice")
        body = entry.get(item) or {}
        if not isinstance(body, dict):
            raise _error(f"{label}: {key} {entry['name']!r}: `{item}` is not a mapping")
        out[entry["name"]] = body
    return out


def _absolute(value: str, base: Path) -> str:
    path = Path(os.path.expanduser(value))
    return str(path if path.is_absolute() else base / path)


def resolve_paths(config: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of `config` whose file references are absolute, relative to `base` (the folder of
    the file that holds them). An exec command is a path only when it contains a separator:
    `kubelogin` is looked up on PATH, `./bin/login` next to the kubeconfig."""
    out = copy.deepcopy(config)
    for key, item in (("clusters", "cluster"), ("users", "user")):
        for entry in out.get(key) or []:
            body = entry.get(item) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for ref in (*_FILE_KEYS, "tokenFile"):
                if isinstance(body.get(ref), str) and body[ref]:
                    body[ref] = _absolute(body[ref], base)
            spec = body.get("exec")
            if isinstance(spec, dict) and os.sep in str(spec.get("command") or ""):
                spec["command"] = _absolute(str(spec["command"]), base)
    return out


def load(explicit: Path | None = None) -> tuple[dict[str, Any], str]:
    """The merged kubeconfig kubectl would use, paths resolved, and a label naming its files."""
    files = kubeconfig_files(explicit)
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    read: list[str] = []
    for path in files:
        if not path.is_file():
            if explicit is not None:
                raise _error(
                    f"no kubeconfig at {path}",
                    hint="Pass --kubeconfig naming an existing file, or enroll the cluster first.",
                )
            continue  # KUBECONFIG may list files that do not exist (yet): kubectl skips them
        config = resolve_paths(_read_one(path), path.parent)
        read.append(str(path))
        for key, item in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for name, body in _named(config, key, item, str(path)).items():
                if name not in seen[key]:
                    seen[key].add(name)
                    merged[key].append({"name": name, item: body})
        if not merged.get("current-context") and config.get("current-context"):
            merged["current-context"] = str(config["current-context"])
    if not read:
        where = os.pathsep.join(str(p) for p in files)
        raise _error(
            f"no kubeconfig: none of {where} exists",
            hint="Pass --kubeconfig FILE, or set KUBECONFIG.",
        )
    return merged, read[0] if len(read) == 1 else f"KUBECONFIG ({os.pathsep.join(read)})"


def choose(config: dict[str, Any], context: str | None, label: str) -> tuple[str, Doc, Doc]:
    """The chosen context's name, its cluster and its user (empty when it names none).

    A context, cluster or user that is named but absent is a usage error (exit 2), as kubectl
    refuses it."""
    contexts = _named(config, "contexts", "context", label)
    name = context or config.get("current-context")
    if not name:
        if len(contexts) != 1:
            raise _error(
                f"{label}: no current-context, and {len(contexts)} contexts to choose from",
                hint="Pass --context NAME (kubectl config get-contexts lists them).",
                exit_code=USAGE,
            )
        name = next(iter(contexts))
    if name not in contexts:
        raise _error(
            f"{label}: no context {name!r} (it has: {', '.join(sorted(contexts)) or 'none'})",
            hint="Pass --context NAME naming one of them.",
            exit_code=USAGE,
        )
    ctx = contexts[name]
    clusters = _named(config, "clusters", "cluster", label)
    users = _named(config, "users", "user", label)
    if ctx.get("cluster") not in clusters:
        raise _error(
            f"{label}: context {name!r} names cluster {ctx.get('cluster')!r}, which it lacks",
            hint="Fix the context, or pass --context NAME naming a complete one.",
            exit_code=USAGE,
        )
    user_name = ctx.get("user")
    if user_name and user_name not in users:
        raise _error(
            f"{label}: context {name!r} names user {user_name!r}, which it lacks",
            hint="Fix the context, or pass --context NAME naming a complete one.",
            exit_code=USAGE,
        )
    return str(name), clusters[ctx["cluster"]], users.get(user_name, {}) if user_name else {}


# ---- one context --------------------------------------------------------------------------

_temp_lock = threading.Lock()


def _remove_if_present(name: str) -> None:
    if os.path.exists(name):
        os.unlink(name)


def temp_file(data: bytes) -> str:
    """Key material as a private file (requests and ssl take certificates by path only),
    removed when the process exits."""
    with _temp_lock:
        fd, name = tempfile.mkstemp(prefix="eksinf-kube-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        atexit.register(_remove_if_present, name)
    return name


def _material(entry: dict[str, Any], key: str, label: str) -> str | None:
    """A certificate or key given inline (`<key>-data`, base64) or as a (resolved) path."""
    if entry.get(f"{key}-data"):
        try:
            return temp_file(base64.b64decode(str(entry[f"{key}-data"]), validate=True))
        except ValueError as exc:
            raise _error(f"{label}: {key}-data is not base64 ({exc})") from exc
    if entry.get(key):
        path = Path(str(entry[key]))
        if not path.is_file():
            raise _error(f"{label}: {key} {path} does not exist")
        return str(path)
    return None


def _exec_plugin(spec: Any, label: str) -> ExecPlugin | None:
    if not spec:
        return None
    if not isinstance(spec, dict) or not spec.get("command"):
        raise _error(f"{label}: the user's exec section names no command")
    version = str(spec.get("apiVersion") or "")
    if version not in EXEC_API_VERSIONS:
        raise _error(
            f"{label}: exec plugin `{spec['command']}` speaks {version or 'no apiVersion'}",
            hint=f"eksinf runs plugins of {' and '.join(EXEC_API_VERSIONS)} (v1alpha1 was "
            "removed from Kubernetes in 1.24): update the plugin's kubeconfig entry.",
        )
    env = tuple(
        (str(e.get("name")), str(e.get("value", "")))
        for e in spec.get("env") or []
        if isinstance(e, dict) and e.get("name")
    )
    return ExecPlugin(
        api_version=version,
        command=str(spec["command"]),
        args=tuple(str(a) for a in spec.get("args") or []),
        env=env,
        interactive_mode=str(spec.get("interactiveMode") or "IfAvailable"),
        provide_cluster_info=bool(spec.get("provideClusterInfo")),
        install_hint=str(spec.get("installHint") or "").strip(),
    )


def _eks_cluster(plugin: ExecPlugin | None) -> str | None:
    """The cluster of an `aws eks get-token` plugin (eksinf signs that token itself)."""
    if plugin is None or Path(plugin.command).name != "aws" or "get-token" not in plugin.args:
        return None
    args = list(plugin.args)
    for flag in ("--cluster-name", "--cluster-id", "-i"):
        if flag in args and args.index(flag) + 1 < len(args):
            return args[args.index(flag) + 1]
    return None


def auth_for(config: dict[str, Any], context: str | None, label: str) -> KubeAuth:
    """The KubeAuth of `context` (default: the current one) of a merged, path-resolved config."""
    name, cluster, user = choose(config, context, label)
    if user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name", "?")
        raise _error(
            f"{label}: context {name!r} authenticates with the auth-provider {provider!r}",
            hint="Auth providers were removed from kubectl; use its exec plugin instead "
            "(kubelogin for OIDC and Azure, gke-gcloud-auth-plugin for GKE).",
        )
    if not cluster.get("server"):
        raise _error(f"{label}: context {name!r}: its cluster has no server")
    plugin = _exec_plugin(user.get("exec"), label)
    cert = _material(user, "client-certificate", label)
    key = _material(user, "client-key", label)
    if bool(cert) != bool(key):
        raise _error(
            f"{label}: context {name!r}: a client certificate needs its key, and the key its "
            "certificate (one of them is missing)"
        )
    ctx = _named(config, "contexts", "context", label)[name]
    return KubeAuth(
        server=str(cluster["server"]).rstrip("/"),
        token=str(user["token"]) if user.get("token") else None,
        ca_file=_material(cluster, "certificate-authority", label),
        cert=(cert, key) if cert and key else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        eks_cluster=_eks_cluster(plugin),
        token_file=str(user["tokenFile"]) if user.get("tokenFile") else None,
        exec_plugin=plugin,
        proxy_url=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
        user=str(ctx.get("user") or ""),
        context=name,
        ca_data=str(cluster["certificate-authority-data"])
        if cluster.get("certificate-authority-data")
        else None,
    )


def read_kubeconfig(path: Path | None = None, context: str | None = None) -> KubeAuth:
    """The KubeAuth of `path` (or KUBECONFIG's files, or ~/.kube/config) and `context`."""
    config, label = load(path)
    return auth_for(config, context, label)


def parse_kubeconfig(config: Any, base: Path, label: str, context: str | None = None) -> KubeAuth:
    """The KubeAuth of a kubeconfig given as a dict; relative paths are relative to `base`."""
    if not isinstance(config, dict):
        raise _error(f"{label}: not a usable kubeconfig (not a mapping)")
    return auth_for(resolve_paths(config, base), context, label)


def one_context(config: dict[str, Any], context: str | None, label: str) -> dict[str, Any]:
    """`config` (merged, paths resolved) reduced to one context, its cluster and its user, with
    certificates and keys inlined: it means the same from any folder and names no other cluster.
    A token file and an exec command stay references (they change, or are code)."""
    name, cluster, user = choose(config, context, label)
    ctx = _named(config, "contexts", "context", label)[name]
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "contexts": [{"name": name, "context": dict(ctx)}],
        "clusters": [{"name": ctx["cluster"], "cluster": _inline(cluster, label)}],
        "users": [],
    }
    if ctx.get("user"):
        out["users"] = [{"name": ctx["user"], "user": _inline(user, label)}]
    return out


def _inline(section: dict[str, Any], label: str) -> dict[str, Any]:
    out = copy.deepcopy(section)
    for key, data_key in _FILE_KEYS.items():
        if key in out:
            data = _read_material(Path(str(out.pop(key))), f"{label}: {key}")
            out[data_key] = base64.b64encode(data).decode()
    return out


def _read_material(path: Path, what: str) -> bytes:
    """A certificate, key or CA bundle file, bounded like the kubeconfig that names it."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        raise _error(f"{what} {path}: cannot read it ({exc.strerror})") from exc
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise _error(f"{what} {path}: larger than any certificate ({MAX_KUBECONFIG_BYTES} bytes)")
    return data


# ---- exec credential plugins --------------------------------------------------------------


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin printed: a token, or a client certificate and key (as private files)."""

    token: str | None
    cert: tuple[str, str] | None
    expires: float | None  # epoch seconds; None: valid for the whole process


_credentials: dict[tuple[ExecPlugin, str], ExecCredential] = {}
_credentials_lock = threading.Lock()


def _cache_key(plugin: ExecPlugin, auth: KubeAuth) -> tuple[ExecPlugin, str]:
    return (plugin, auth.server if plugin.provide_cluster_info else "")


def forget_credential(auth: KubeAuth) -> None:
    """Drop a plugin's cached credential (the server answered 401 to it: mint a new one)."""
    if auth.exec_plugin is not None:
        with _credentials_lock:
            _credentials.pop(_cache_key(auth.exec_plugin, auth), None)


def exec_credential(auth: KubeAuth) -> ExecCredential:
    """The credential of `auth`'s exec plugin: cached until its expirationTimestamp, else run."""
    plugin = auth.exec_plugin
    assert plugin is not None
    key = _cache_key(plugin, auth)
    with _credentials_lock:
        held = _credentials.get(key)
        if held is not None and (
            held.expires is None or held.expires - EXPIRY_MARGIN > time.time()
        ):
            return held
        fresh = _run_plugin(plugin, auth)
        _credentials[key] = fresh
        return fresh


def _exec_info(plugin: ExecPlugin, auth: KubeAuth) -> str:
    spec: dict[str, Any] = {"interactive": False}
    if plugin.provide_cluster_info:
        cluster: dict[str, Any] = {"server": auth.server}
        if auth.ca_data:
            cluster["certificate-authority-data"] = auth.ca_data
        elif auth.ca_file:
            ca = _read_material(Path(auth.ca_file), "certificate-authority")
            cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
        if auth.insecure:
            cluster["insecure-skip-tls-verify"] = True
        if auth.proxy_url:
            cluster["proxy-url"] = auth.proxy_url
        spec["cluster"] = cluster
    return json.dumps({"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec})


def _plugin_error(
    plugin: ExecPlugin, what: str, stderr: bytes = b"", hint: str = ""
) -> EksinfError:
    tail = stderr.decode("utf-8", "replace").strip()[-600:]
    detail = f": {tail}" if tail else ""
    return _error(
        f"exec credential plugin `{plugin.label()}` {what}{detail}",
        hint=hint
        or "The plugin could not mint a credential: run its command yourself to see why (an "
        "expired login, a missing profile), fix that, and re-run. Nothing was read or changed "
        "on the cluster.",
    )


def _run_plugin(plugin: ExecPlugin, auth: KubeAuth) -> ExecCredential:
    if plugin.interactive_mode == "Always":
        raise _plugin_error(
            plugin,
            "needs an interactive terminal (interactiveMode: Always)",
            hint="eksinf runs plugins without a terminal: log in first with the plugin's own "
            "command (or `kubectl get ns`), or set interactiveMode to IfAvailable.",
        )
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": _exec_info(plugin, auth)}
    try:
        done = run_bounded(
            [plugin.command, *plugin.args],
            timeout=EXEC_TIMEOUT,
            max_output=EXEC_MAX_OUTPUT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise _plugin_error(plugin, f"did not finish within {EXEC_TIMEOUT:.0f} s") from None
    except Overflow as exc:
        raise _plugin_error(plugin, f"printed more than {EXEC_MAX_OUTPUT} bytes", exc.err) from None
    except OSError as exc:
        missing = isinstance(exc, FileNotFoundError)
        raise _plugin_error(
            plugin,
            "was not found" if missing else f"could not start ({exc.strerror})",
            hint=plugin.install_hint or "Install the plugin, or put it on PATH.",
        ) from exc
    if done.code != 0:
        raise _plugin_error(plugin, f"exited with {done.code}", done.err)
    return _parse_credential(plugin, done.out, done.err)


def _parse_credential(plugin: ExecPlugin, out: bytes, err: bytes) -> ExecCredential:
    try:
        doc = json.loads(out)
    except ValueError:
        raise _plugin_error(plugin, "printed no ExecCredential JSON", err) from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise _plugin_error(plugin, "printed JSON that is not an ExecCredential", err)
    if doc.get("apiVersion") != plugin.api_version:
        raise _plugin_error(
            plugin,
            f"answered {doc.get('apiVersion')!r} to a request for {plugin.api_version!r}",
            err,
            hint="Set the kubeconfig's exec apiVersion to the one the plugin speaks.",
        )
    status = doc.get("status") or {}
    token = status.get("token")
    cert_pem, key_pem = status.get("clientCertificateData"), status.get("clientKeyData")
    cert = None
    if cert_pem and key_pem:
        cert = (temp_file(str(cert_pem).encode()), temp_file(str(key_pem).encode()))
    elif not token:
        raise _plugin_error(
            plugin,
            "printed an ExecCredential with neither status.token nor "
            "status.clientCertificateData and clientKeyData",
            err,
        )
    expires = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            when = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise _plugin_error(
                plugin, f"printed expirationTimestamp {stamp!r}, not RFC 3339", err
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        expires = when.timestamp()
    return ExecCredential(str(token) if token else None, cert, expires)


def read_token_file(path: str) -> str:
    """A token file's token (whitespace stripped), bounded."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise _error(f"token file {path}: cannot read it ({exc.strerror})") from exc
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise _error(f"token file {path}: larger than any token ({MAX_TOKEN_FILE_BYTES} bytes)")
    token = data.decode("utf-8", "replace").strip()
    if not token:
        raise _error(f"token file {path} is empty")
    return token
