"""`~/.config/contivd/ctl.toml`: where `contivd ctl` finds its server and token.

Flags win over the environment (CONTIVD_SERVER, CONTIVD_TOKEN, as before), the environment
over this file, the file over the built-in default. The file holds a credential, so it is
written with mode 0600 (atomically: a reader never sees half a file) and refused when others
may read it, as ssh refuses a readable private key. `contivd ctl login` writes it.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .client import CtlError

FILE_NAME = "ctl.toml"


@dataclass(frozen=True)
class CtlSettings:
    server: str | None = None
    token: str | None = None
    ca_file: str | None = None  # verify the server's certificate with this CA bundle
    fingerprint: str | None = None  # or pin the server certificate's SHA-256 fingerprint


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/contivd/ctl.toml, else ~/.config/contivd/ctl.toml."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "contivd" / FILE_NAME


def parse_settings(text: str, where: str) -> CtlSettings:
    """The settings a ctl.toml holds; CtlError naming the problem for bad TOML, unknown keys or non-strings."""
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CtlError(f"{where} is not valid TOML: {exc}") from None
    known = {f.name for f in fields(CtlSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise CtlError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    wrong = sorted(name for name, value in values.items() if not isinstance(value, str))
    if wrong:
        raise CtlError(f"{where}: {', '.join(wrong)} must be strings")
    return CtlSettings(**values)


def render_settings(settings: CtlSettings) -> str:
    """TOML text for the set fields (basic strings, JSON-escaped, which TOML accepts)."""
    return "".join(f"{f.name} = {json.dumps(getattr(settings, f.name))}\n" for f in fields(settings) if getattr(settings, f.name) is not None)


def effective(server: str, server_given: bool, token: str | None, settings: CtlSettings) -> CtlSettings:
    """What a command uses: `server`/`token` as flags or the environment gave them, else the
    file's. `server_given` is False when `server` is only the built-in default. The file's
    token and certificate settings belong to the file's server: they are never sent elsewhere."""
    chosen = server if server_given or not settings.server else settings.server
    own = settings.server is None or settings.server.rstrip("/") == chosen.rstrip("/")
    return CtlSettings(
        chosen,
        token if token is not None else settings.token if own else None,
        settings.ca_file if own else None,
        settings.fingerprint if own else None,
    )


def read_settings(path: Path) -> CtlSettings:
    """The file's settings; none when it does not exist."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return CtlSettings()
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CtlError(f"{path} holds a token but others may read it (mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}")
    return parse_settings(path.read_text(), str(path))


def save_settings(settings: CtlSettings, path: Path | None = None) -> Path:
    """Write the settings to `path` (default: config_path()) with mode 0600, atomically."""
    target = path or config_path()
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # an old temporary file keeps its mode through O_CREAT
        with os.fdopen(descriptor, "w") as out:
            out.write(render_settings(settings))
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def save_login(server: str, token: str, ca_file: str | None = None, fingerprint: str | None = None, path: Path | None = None) -> Path:
    return save_settings(CtlSettings(server, token, ca_file, fingerprint), path)
