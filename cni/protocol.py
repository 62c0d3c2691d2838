"""The CNI vocabulary shared by the plugin executable and contivd's CNI server.

Owns: CNI error codes and the error object, the supported spec versions, validation of the
runtime's environment and network configuration, and the one-line JSON exchange with contivd
(see docs/cni.md), with its JSON codec. Standard library only, and only modules that load in
well under a millisecond: the plugin runs once per pod start, and `python3 -I -S` itself starts
in ~6 ms, so `json` (which imports re, enum and collections: ~8 ms here, measured with
`python3 -X importtime`), `re`, `typing` and `dataclasses` are not imported at run time.
"""

from __future__ import annotations

from _json import encode_basestring_ascii, make_encoder, make_scanner

TYPE_CHECKING = False  # typing itself costs ~2.5 ms to import; mypy reads this as typing.TYPE_CHECKING
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SUPPORTED_VERSIONS = ("1.0.0", "1.1.0")
DEFAULT_SOCKET = "/run/contiv/contiv-cni.sock"
PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 1 << 20

# Well-known codes of the CNI specification.
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENVIRONMENT = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_NETWORK_CONFIG = 7
TRY_AGAIN_LATER = 11
PLUGIN_NOT_AVAILABLE = 50
# contiv's own codes (100 and up).
INTERNAL_ERROR = 100
ADDRESS_UNAVAILABLE = 101  # the pool is exhausted or the requested address is taken
ALREADY_ADDED = 102  # ADD for a container and interface that already have an endpoint
CHECK_FAILED = 103  # CHECK found the interface or address missing or different

COMMANDS = ("ADD", "DEL", "CHECK", "VERSION", "GC", "STATUS")
_ALPHANUMERIC = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_CONTAINER_ID_CHARACTERS = _ALPHANUMERIC | frozenset("_.-")
_JSON_WHITESPACE = " \t\n\r"


class _DecodeOptions:
    """json.JSONDecoder's defaults, as the attributes `_json.make_scanner` reads from its context."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity, as json.loads accepts them


_scan_json = make_scanner(_DecodeOptions)  # type: ignore[arg-type]  # a duck-typed context (see typeshed's _json.pyi)


def decode_json(raw: bytes | str) -> Any:
    """`json.loads(raw)`, by the C scanner json itself uses, without importing json.

    Input the scanner does not accept whole is handed to json.loads, which then raises its
    usual ValueError with line and column (Python 3.11's scanner reports most syntax errors
    through json.decoder and raises SystemError when that is not imported)."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        value, end = _scan_json(text, len(text) - len(text.lstrip(_JSON_WHITESPACE)))
        if not text[end:].strip(_JSON_WHITESPACE):
            return value
    except (StopIteration, SystemError, UnicodeDecodeError):
        pass
    import json  # only for input that is not a single JSON value: its error, or its other encodings

    return json.loads(raw)


def _not_serialisable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def encode_json(value: object) -> str:
    """`json.dumps(value, separators=(",", ":"))`, by the C encoder json itself uses, without importing json."""
    encode = make_encoder({}, _not_serialisable, encode_basestring_ascii, None, ":", ",", False, False, True)
    return "".join(encode(value, 0))


class CniError(Exception):
    """A failure the runtime sees as a CNI error object: `code`, `msg`, `details`."""

    def __init__(self, code: int, msg: str, details: str = ""):
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details

    def to_json(self, cni_version: str = SUPPORTED_VERSIONS[-1]) -> dict[str, Any]:
        error: dict[str, Any] = {"cniVersion": cni_version, "code": self.code, "msg": self.msg}
        if self.details:
            error["details"] = self.details
        return error


class Request:
    """One plugin invocation as the runtime made it; what travels to contivd.

    A plain class: importing dataclasses (and with it inspect) would cost the plugin ~6 ms."""

    __slots__ = ("command", "config", "container_id", "netns", "ifname", "args")

    def __init__(
        self, command: str, config: dict[str, Any], container_id: str = "", netns: str = "", ifname: str = "", args: dict[str, str] | None = None
    ):
        self.command, self.config, self.container_id = command, config, container_id
        self.netns, self.ifname, self.args = netns, ifname, args or {}

    def _fields(self) -> tuple[Any, ...]:
        return (self.command, self.config, self.container_id, self.netns, self.ifname, self.args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Request{self._fields()!r}"

    @property
    def cni_version(self) -> str:
        return str(self.config.get("cniVersion", SUPPORTED_VERSIONS[-1]))

    def to_line(self) -> bytes:
        body = {
            "protocol": PROTOCOL_VERSION,
            "command": self.command,
            "containerId": self.container_id,
            "netns": self.netns,
            "ifname": self.ifname,
            "args": self.args,
            "config": self.config,
        }
        return (encode_json(body) + "\n").encode()


def parse_cni_args(text: str) -> dict[str, str]:
    """CNI_ARGS `K=V;K=V` → dict; a pair without `=` is refused (code 4)."""
    args: dict[str, str] = {}
    for pair in text.split(";"):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CniError(INVALID_ENVIRONMENT, f"CNI_ARGS: {pair!r} is not KEY=VALUE")
        args[key.strip()] = value.strip()
    return args


def validate_ifname(ifname: str) -> str:
    if not ifname or len(ifname) > 15 or ifname in (".", "..") or any(c in ifname for c in "/: \t\n"):
        raise CniError(INVALID_ENVIRONMENT, f"CNI_IFNAME {ifname!r} is not a valid interface name (1-15 characters, no '/', ':' or spaces)")
    return ifname


def validate_container_id(container_id: str) -> str:
    if not container_id or container_id[0] not in _ALPHANUMERIC or not _CONTAINER_ID_CHARACTERS.issuperset(container_id):
        raise CniError(
            INVALID_ENVIRONMENT, f"CNI_CONTAINERID {container_id!r} must be letters, digits, '_', '-' or '.' and start with a letter or digit"
        )
    return container_id


def parse_config(raw: bytes | str) -> dict[str, Any]:
    """The network configuration from stdin: JSON object with a supported cniVersion and a name."""
    try:
        config = decode_json(raw)
    except ValueError as exc:
        raise CniError(DECODE_FAILURE, f"network configuration is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise CniError(DECODE_FAILURE, "network configuration must be a JSON object")
    version = config.get("cniVersion")
    if not isinstance(version, str) or not version:
        raise CniError(INVALID_NETWORK_CONFIG, "network configuration has no cniVersion")
    if version not in SUPPORTED_VERSIONS:
        raise CniError(INCOMPATIBLE_VERSION, f"cniVersion {version} is not supported", f"supported: {', '.join(SUPPORTED_VERSIONS)}")
    if not isinstance(config.get("name"), str) or not config["name"]:
        raise CniError(INVALID_NETWORK_CONFIG, "network configuration has no name")
    for key in ("socket", "tenant", "network", "group"):
        if key in config and not isinstance(config[key], str):
            raise CniError(INVALID_NETWORK_CONFIG, f"network configuration: {key} must be a string")
    return config


def request_from_environment(environ: Mapping[str, str], stdin: bytes) -> Request:
    """Validate what the runtime gave (environment and stdin) into a Request."""
    command = environ.get("CNI_COMMAND", "")
    if command not in COMMANDS:
        raise CniError(INVALID_ENVIRONMENT, f"CNI_COMMAND {command!r} must be one of {', '.join(COMMANDS)}")
    if command == "VERSION":
        return Request(command, {})
    config = parse_config(stdin)
    if command in ("GC", "STATUS"):
        return Request(command, config)
    needed = ("CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS") if command != "DEL" else ("CNI_CONTAINERID", "CNI_IFNAME")
    missing = [name for name in needed if not environ.get(name)]
    if missing:
        raise CniError(INVALID_ENVIRONMENT, f"CNI_COMMAND {command} needs {', '.join(missing)}")
    return Request(
        command,
        config,
        container_id=validate_container_id(environ["CNI_CONTAINERID"]),
        netns=environ.get("CNI_NETNS", ""),
        ifname=validate_ifname(environ["CNI_IFNAME"]),
        args=parse_cni_args(environ.get("CNI_ARGS", "")),
    )


def request_from_line(line: bytes) -> Request:
    """What contivd received on its socket; re-validated (anything root can write may arrive)."""
    try:
        body = decode_json(line)
    except ValueError as exc:
        raise CniError(DECODE_FAILURE, f"request is not valid JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("protocol") != PROTOCOL_VERSION:
        raise CniError(INCOMPATIBLE_VERSION, f"request must be a JSON object with protocol {PROTOCOL_VERSION}")
    args = body.get("args") or {}
    if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
        raise CniError(INVALID_ENVIRONMENT, "args must map names to strings")
    environ = {
        "CNI_COMMAND": str(body.get("command", "")),
        "CNI_CONTAINERID": str(body.get("containerId", "")),
        "CNI_NETNS": str(body.get("netns", "")),
        "CNI_IFNAME": str(body.get("ifname", "")),
        "CNI_ARGS": ";".join(f"{k}={v}" for k, v in args.items()),
    }
    return request_from_environment(environ, encode_json(body.get("config")).encode())


def version_result(cni_version: str) -> dict[str, Any]:
    return {"cniVersion": cni_version or SUPPORTED_VERSIONS[-1], "supportedVersions": list(SUPPORTED_VERSIONS)}


def answer_line(result: dict[str, Any] | None = None, error: CniError | None = None, cni_version: str = SUPPORTED_VERSIONS[-1]) -> bytes:
    """contivd's reply: `{"result": ...}` or `{"error": <CNI error object>}`, one line."""
    body = {"error": error.to_json(cni_version)} if error is not None else {"result": result}
    return (encode_json(body) + "\n").encode()


def parse_answer(line: bytes) -> dict[str, Any]:
    """The result, or raise the CniError contivd answered."""
    try:
        body = decode_json(line)
    except ValueError as exc:
        raise CniError(IO_FAILURE, f"contivd answered something that is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise CniError(IO_FAILURE, "contivd answered something that is not a JSON object")
    error = body.get("error")
    if isinstance(error, dict):
        raise CniError(int(error.get("code", INTERNAL_ERROR)), str(error.get("msg", "")), str(error.get("details", "")))
    result = body.get("result")
    return result if isinstance(result, dict) else {}
