"""Configuration: the registry of every key, its type, default and meaning, and how values arrive.

The registry (`KEYS`) is the one list of settings. Each is declared once: settings the server reads
itself as `Setting` rows here; settings consumed by a component's config struct on the struct's
field (`coordinator.settings.setting`: `GroupConfig` in the core, the record log's `LogConfig`, the
data plane's `DataPlaneConfig`), collected from there. From the registry come the defaults, the
parsing and validation below, `coordinator serve --help`, the README table (`coordinator.docs`) and
the structs themselves (`Config.build(GroupConfig)`).

Keys are Kafka's names with Kafka's defaults wherever Kafka has the setting; settings of our own are
marked as such in their documentation. Values are resolved, lowest precedence first, from:

1. the defaults in `KEYS`;
2. a `--config FILE` of Kafka-style `key=value` properties (`#` and `!` comments);
3. environment variables `COORDINATOR_<KEY>` with dots and dashes as underscores
   (`COORDINATOR_GROUP_CONSUMER_SESSION_TIMEOUT_MS=30000`);
4. repeatable `--override key=value`;
5. the dedicated command-line flags (`--listen` and friends), which name a key each.

An unknown key, an unknown `COORDINATOR_*` variable (except `OTHER_VARIABLES`), or a value that does
not parse or validate raises `ConfigError` naming the key (and the closest known one for a typo); the
CLI turns it into one line and exit code 2. `advertised.listeners` (or `listeners` when it is unset)
may not be the meta-address 0.0.0.0, as in Kafka; an empty host advertises the canonical host name.

A plug-in group type (`coordinator.plugins`) declares its settings the way a built-in type does: its
module's `GROUP_TYPE` is a `GroupTypeDeclaration` whose config struct has `setting(...)` fields.
`resolve` imports the modules the resolved `coordinator.plugins` names and adds those rows for this
configuration: its keys are accepted from every source above, parsed and validated
as any other (`Config.rows`), and `Config.build(struct)` makes the struct the node hands to the type. A plug-in
module that cannot be imported is the node's to refuse (`node/plugins.py`), unless a key only it
could declare is set: then that import's failure is the one line.

Adding a setting: declare it once, on the field of the struct that uses it with `setting(...)` (and
add the struct to `_SECTIONS` if it is new), or as a `Setting` row here if the server reads it
itself; then run `python -m coordinator.docs`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .clusterlog.settings import ClusterLogConfig
from .core.config import GroupConfig
from .core.registry import GroupTypeDeclaration
from .core.shard import BUILT_IN_TYPES
from .dataplane.config import DataPlaneConfig
from .recordlog.writer import LogConfig
from .security import listeners as listener_specs
from .security.settings import (
    MECHANISMS,
    AuthorizerConfig,
    ConnectionLimits,
    InterBrokerConfig,
    ListenerSecurityConfig,
    UpstreamSecurityConfig,
)
from .settings import INT32_MAX, Setting, at_least, between, declared, parse_host_port
from .share.settings import ShareFetchConfig
from .sidecar.settings import SidecarConfig

ENV_PREFIX = "COORDINATOR_"
OTHER_VARIABLES = {
    "COORDINATOR_ADMIN_BOOTSTRAP": "the admin commands' default --bootstrap",
    "COORDINATOR_ADVERTISED_HOST": "docker-compose.yml's advertised host name",
}
"""`COORDINATOR_*` environment variables that are not configuration keys (not refused by `serve`)."""
NON_ROUTABLE = ("0.0.0.0", "::")
T = TypeVar("T")


class ConfigError(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def _parse_int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _parse_list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _parse_str(raw: str) -> str:
    return raw.strip()


def _parse_listener(raw: str) -> str:
    parse_host_port(raw)
    return raw.strip()


def _parse_listeners(raw: str) -> str:
    """`listeners`: NAME://host:port,... (a bare host:port is PLAINTEXT); see `security.listeners`."""
    if not listener_specs.parse_endpoints(raw):
        raise ValueError("at least one listener is required")
    return raw.strip()


def _parse_optional_listeners(raw: str) -> str:
    if raw.strip():
        listener_specs.parse_endpoints(raw)
    return raw.strip()


def _parse_protocol_map(raw: str) -> dict[str, str]:
    return listener_specs.parse_protocol_map(raw)


def _parse_topics(raw: str) -> tuple[tuple[str, int], ...]:
    """name:partitions,...: names by Kafka's rules (`Topic.validate`), counts between 1 and 2^31-1."""
    from .catalog.catalog import CatalogError, validate_topic_name

    topics = []
    for item in _parse_list(raw):
        name, sep, partitions = item.partition(":")
        name = name.strip()
        try:
            validate_topic_name(name)
        except CatalogError as exc:
            raise ValueError(exc.message) from None
        count = _parse_int(partitions) if sep else 1
        if not 1 <= count <= INT32_MAX:
            raise ValueError(f"topic {name} must have between 1 and {INT32_MAX} partitions")
        topics.append((name, count))
    return tuple(topics)


def _protocols(value: Any) -> str | None:
    """The names of the registered group types (`core.shard.BUILT_IN_TYPES`); classic always."""
    names = [declared.name for declared in BUILT_IN_TYPES]
    unknown = [v for v in value if v not in names]
    if unknown or "classic" not in value:
        return f"must contain classic and may contain {', '.join(n for n in names if n != 'classic')}"
    return None


def _optional_listener_or_empty(raw: str) -> str:
    return raw.strip() and _parse_listener(raw)


# Settings the server reads itself, by section. Settings consumed by a component's config struct
# are declared on its fields (`coordinator.settings.setting`) and collected from `_STRUCTS`.
_SERVER: tuple[Setting, ...] = (
    Setting("listeners", "PLAINTEXT://127.0.0.1:9092", "Kafka protocol listeners as NAME://host:port,... (an empty host, PLAINTEXT://:9092, binds every interface; a bare host:port is PLAINTEXT).", _parse_listeners),
    Setting("advertised.listeners", "", "Addresses given to clients in Metadata and FindCoordinator, per listener name (default: listeners; an empty host is this host's canonical name; 0.0.0.0 is refused).", _parse_optional_listeners),
    Setting("listener.security.protocol.map", listener_specs.DEFAULT_PROTOCOL_MAP, "Security protocol of each listener name, as NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).", _parse_protocol_map),
    Setting("node.id", "1", "This node's id in Metadata and FindCoordinator answers.", _parse_int, between(0, INT32_MAX)),
    Setting("cluster.id", "coordinator-embedded", "Cluster id reported in Metadata and DescribeCluster (ours).", _parse_str),
    Setting("log.dirs", "./data", "Data directory: the record log, the topic catalog and the lock.", _parse_str),
    Setting("metrics.listen", "127.0.0.1:9644", "Address of the HTTP listener for /metrics, /healthz and /readyz (ours; empty disables it).", _optional_listener_or_empty),
    Setting("socket.request.max.bytes", "104857600", "Largest request frame accepted; a larger one closes the connection.", _parse_int, between(8, INT32_MAX)),
    Setting("queued.max.request.bytes", "104857600", "Request bytes held in memory across all connections (frames arriving, or queued behind a request in flight) before connections holding more than 16 KiB stop reading until some are handled; at least socket.request.max.bytes, or -1 (or 0) for no bound (Kafka's default; ours is finite so peers claiming large frames cannot exhaust memory).", _parse_int, between(-1, INT32_MAX)),
    Setting("max.connections", "10000", "Most client connections open at once; further ones are closed on accept (Kafka's default is unbounded; ours is finite, raise it for more clients).", _parse_int, between(1, INT32_MAX)),
    Setting("shutdown.timeout.ms", "10000", "On SIGTERM, how long in-flight requests may take before connections are cut (ours).", _parse_int, at_least(0)),
    # -- embedded catalog ---------------------------------------------------------------------
    Setting("auto.create.topics.enable", "true", "Create unknown topics named in Metadata requests.", _parse_bool),
    Setting("num.partitions", "1", "Partition count of auto-created topics and CreateTopics without a count.", _parse_int, between(1, INT32_MAX)),
    Setting("topics", "", "Topics declared at start-up, as name:partitions,... (ours).", _parse_topics),
    # -- groups -------------------------------------------------------------------------------
    Setting("offsets.topic.num.partitions", "50", "Log partitions groups are hashed onto (Kafka's formula); fixed once a data directory has a layout.", _parse_int, between(1, INT32_MAX)),
    Setting("coordinator.shards", "1", "Coordinator processes the partitions are spread over; shard k is node node.id+k on each listener's port+k (ours).", _parse_int, at_least(1)),
    Setting("group.coordinator.rebalance.protocols", "classic,consumer", "Group protocols served.", _parse_list, _protocols),
    Setting("coordinator.plugins", "", "Python modules imported at start-up, each adding a group type (its `GROUP_TYPE` declaration, whose settings are then accepted like these, or its `register`) and APIs (its `declarations`) to the node, as name,... (ours; see docs/ARCHITECTURE.md).", _parse_list),
)
_COMPACTION: tuple[Setting, ...] = (
    Setting("log.cleaner.backoff.ms", "15000", "How often the record log looks for closed segments to compact.", _parse_int, at_least(1)),
    Setting("delete.retention.ms", "86400000", "How long compaction keeps tombstones.", _parse_int, at_least(0)),
)
_OBSERVABILITY: tuple[Setting, ...] = (
    Setting("metrics.group.labels.enable", "false", "Label group metrics with the group id (ours; high cardinality).", _parse_bool),
    # -- rebalance history (ours) -------------------------------------------------------------
    Setting("history.enable", "true", "Write the rebalance history (group events as JSON lines) to <log.dirs>/history (ours).", _parse_bool),
    Setting("history.segment.bytes", "104857600", "Rebalance history: a segment is closed once it holds this many bytes (ours).", _parse_int, at_least(1024)),
    Setting("history.segment.ms", "86400000", "Rebalance history: a segment is closed this long after its first row (ours).", _parse_int, at_least(1)),
    Setting("history.retention.ms", "604800000", "Rebalance history: closed segments whose last row is older are deleted (-1: keep all; ours).", _parse_int, at_least(-1)),
    Setting("history.flush.interval.ms", "1000", "Rebalance history: longest time rows wait in memory before being written, unsynced (ours).", _parse_int, at_least(1)),
)
_SECTIONS: tuple[tuple[Setting, ...] | type[Any], ...] = (
    _SERVER, ListenerSecurityConfig, InterBrokerConfig, AuthorizerConfig, ConnectionLimits,
    *(declared.settings for declared in BUILT_IN_TYPES if declared.settings is not None), GroupConfig, LogConfig,
    _COMPACTION,
    DataPlaneConfig, SidecarConfig, ClusterLogConfig, UpstreamSecurityConfig, ShareFetchConfig, _OBSERVABILITY,
)
"""The registry in README order: rows declared here, and config structs whose fields declare
settings (`Config.build(cls)` makes one from resolved values)."""


@dataclass(frozen=True, slots=True)
class Key:
    """One registry row: a setting, how its text parses, and the struct field it feeds (if any)."""

    name: str
    default: str
    doc: str
    parse: Callable[[str], Any]
    check: Callable[[Any], str | None] | None = None
    owner: type[Any] | None = None
    field: str = ""
    scale: int = 1


def _parser_for(kind: Any) -> Callable[[str], Any]:
    """How the text of a setting declared on a struct field of type `kind` parses."""
    if kind is bool:
        return _parse_bool
    if kind is int:
        return _parse_int
    if kind is str:
        return _parse_str
    if kind == tuple[str, ...]:
        return _parse_list
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        choices = [str(member.value) for member in kind]

        def parse_choice(raw: str) -> Any:
            if raw.strip() not in choices:
                raise ValueError(f"must be one of {', '.join(choices)}")
            return kind(raw.strip())

        return parse_choice
    raise TypeError(f"no parser for settings of type {kind!r}")


def _row(spec: Setting, owner: type[Any] | None = None, field: str = "", kind: Any = None) -> Key:
    return Key(spec.name, spec.default, spec.doc, spec.parse or _parser_for(kind), spec.check, owner, field,
               spec.scale)


def _registry() -> tuple[Key, ...]:
    rows: list[Key] = []
    for section in _SECTIONS:
        if isinstance(section, tuple):
            rows += [_row(s) for s in section]
        else:
            # A struct's own settings: those it inherits (GroupConfig: each group type's) are its
            # base's rows, listed where the base is.
            inherited = {name for base in section.__mro__[1:] if dataclasses.is_dataclass(base)
                         for name, _, _ in declared(base)}
            rows += [_row(spec, section, name, kind) for name, spec, kind in declared(section) if name not in inherited]
    names = [r.name for r in rows]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise RuntimeError(f"settings declared twice: {duplicated}")
    return tuple(rows)


_KEYS: tuple[Key, ...] = _registry()

KEYS: Mapping[str, Key] = {k.name: k for k in _KEYS}

LISTENER_PREFIX = "listener.name."
_JAAS = "sasl.jaas.config"
_SCOPED: Mapping[str, Key] = {k.name: k for k in _KEYS if k.owner is ListenerSecurityConfig}
"""The keys a listener may override as `listener.name.<listener>.<key>` (Kafka's listener prefix)."""


def scoped_key(key: str) -> tuple[str, Key] | None:
    """(listener name, overridden row) of `listener.name.<listener>.<key>`, also the JAAS form
    `listener.name.<listener>.<mechanism>.sasl.jaas.config`; None for any other key."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    listener, sep, base = key[len(LISTENER_PREFIX):].partition(".")
    if not sep or not listener:
        return None
    if base in _SCOPED:
        return listener, _SCOPED[base]
    mechanism, sep, rest = base.partition(".")
    if sep and rest == _JAAS and mechanism.upper() in MECHANISMS:
        return listener, _SCOPED[_JAAS]
    return None


def _scoped_env(name: str) -> str | None:
    """`COORDINATOR_LISTENER_NAME_SASL_SSL_SSL_KEYSTORE_LOCATION` -> `listener.name.sasl_ssl.ssl.keystore.location`:
    the longest known key ending the name wins; what is left is the listener name."""
    prefix = env_name(LISTENER_PREFIX)
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    bases = [*_SCOPED, *(f"{m.lower()}.{_JAAS}" for m in MECHANISMS)]
    for base in sorted(bases, key=len, reverse=True):
        suffix = "_" + env_name(base).removeprefix(ENV_PREFIX)
        if rest.endswith(suffix) and len(rest) > len(suffix):
            return f"{LISTENER_PREFIX}{rest[:-len(suffix)].lower()}.{base}"
    return None


PLUGIN_GROUP_TYPE = "GROUP_TYPE"
"""The attribute of a plug-in module that declares its group type with its settings."""


def plugin_group_type(module: Any) -> GroupTypeDeclaration | None:
    """The `GroupTypeDeclaration` a plug-in module offers as `GROUP_TYPE` (None: it offers none,
    or something else, which `node/plugins.py` refuses)."""
    declared_type = getattr(module, PLUGIN_GROUP_TYPE, None)
    return declared_type if isinstance(declared_type, GroupTypeDeclaration) else None


def _plugin_rows(names: Iterable[str], needed: bool) -> tuple[Key, ...]:
    """The settings rows of the plug-ins named: each module's declared group type's config struct.
    A module that cannot be imported is skipped (the node refuses it in one line) unless `needed`
    (a key no known setting declares was given): then its failure is what the user must read."""
    rows: list[Key] = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # whatever the module raises: one line
            if needed:
                raise ConfigError("coordinator.plugins", f"cannot import {name}: {type(exc).__name__}: {exc}") from None
            continue
        declared_type = plugin_group_type(module)
        if declared_type is None or declared_type.settings is None:
            continue
        for field, spec, kind in declared(declared_type.settings):
            if spec.name in KEYS or any(row.name == spec.name for row in rows):
                raise ConfigError(spec.name, f"declared twice (plug-in {name} declares a setting that exists)")
            rows.append(_row(spec, declared_type.settings, field, kind))
    return tuple(rows)


class Config(Mapping[str, Any]):
    """Resolved, typed configuration. Read with `config["group.max.size"]`."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str], keys: tuple[Key, ...] = _KEYS) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self.rows = keys
        """The registry's rows and those of the plug-ins this configuration names."""

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def source(self, key: str) -> str:
        return self._sources[key]

    def build(self, cls: type[T]) -> T:
        """The config struct `cls` (`GroupConfig`, `LogConfig`, `DataPlaneConfig`) from the resolved
        values of the settings its fields declare; its other fields keep their defaults."""
        return cls(**{k.field: self._values[k.name] * k.scale if k.scale != 1 else self._values[k.name]
                      for k in self.rows if k.owner is not None and issubclass(cls, k.owner)})

    def for_listener(self, cls: type[T], listener: listener_specs.Listener) -> T:
        """`build(cls)` for one listener: `listener.name.<name>.<key>` wins over `<key>`."""
        values = self._values
        return cls(**{k.field: values.get(listener.prefix + k.name, values[k.name])
                      for k in _KEYS if k.owner is cls})

    def jaas_config(self, listener: listener_specs.Listener, mechanism: str) -> str:
        """The JAAS configuration of `mechanism` on `listener`, most specific first (Kafka's
        `listener.name.<l>.<mechanism>.sasl.jaas.config`, then the listener's, then the global one)."""
        for key in (f"{listener.prefix}{mechanism.lower()}.{_JAAS}", listener.prefix + _JAAS, _JAAS):
            value = self._values.get(key)
            if value:
                return str(value)
        return ""

    @property
    def listeners(self) -> tuple[listener_specs.Listener, ...]:
        """Every listener with its security protocol and advertised address (checked by `resolve`)."""
        return listener_specs.of(self)

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"])

    @property
    def listen(self) -> tuple[str, int]:
        """Host and port of the first listener; host "" (`PLAINTEXT://:9092`) binds every interface."""
        first = self.listeners[0]
        return first.host, first.port

    @property
    def advertised(self) -> tuple[str, int]:
        """What Metadata and FindCoordinator tell clients of the first listener: its
        `advertised.listeners` entry, else its `listeners` one; an empty host is this machine's
        canonical host name, as Kafka advertises it."""
        first = self.listeners[0]
        return first.advertised_host or socket.getfqdn(), first.advertised_port

    @property
    def metrics_listen(self) -> tuple[str, int] | None:
        raw = self["metrics.listen"]
        return parse_host_port(raw) if raw else None


def parse_properties(text: str, origin: str = "config file") -> dict[str, str]:
    """Kafka-style properties: `key=value` (or `key: value`), `#`/`!` comments, blank lines."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        separators = [i for i in (stripped.find("="), stripped.find(":")) if i > 0]
        if not separators:
            raise ConfigError(stripped, f"{origin} line {number} is not key=value")
        cut = min(separators)
        values[stripped[:cut].strip()] = stripped[cut + 1 :].strip()
    return values


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


KEYS_BY_ENV: Mapping[str, str] = {env_name(k): k for k in KEYS}
"""`COORDINATOR_GROUP_MAX_SIZE` -> `group.max.size`."""


def resolve(
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Iterable[str] = (),
    flags: Mapping[str, str | None] | None = None,
) -> Config:
    """Resolve the configuration from every source; raises ConfigError naming the bad key."""
    raw: dict[str, str] = {k.name: k.default for k in _KEYS}
    sources: dict[str, str] = {k.name: "default" for k in _KEYS}
    # Keys (and variables) no built-in setting declares: a plug-in's, once `coordinator.plugins` is
    # known (below), else refused. Kept in arrival order, so precedence holds among them.
    unknown: list[tuple[str, str, str, bool]] = []

    def put(key: str, value: str, source: str) -> None:
        if key not in KEYS and scoped_key(key) is None:
            unknown.append((key, value, source, False))
            return
        raw[key] = value
        sources[key] = source

    if config_file is not None:
        try:
            text = config_file.read_text()
        except OSError as exc:
            raise ConfigError("--config", f"cannot read {config_file}: {exc.strerror}") from exc
        for key, value in parse_properties(text, str(config_file)).items():
            put(key, value, str(config_file))
    env = os.environ if environ is None else environ
    by_env = KEYS_BY_ENV
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name in OTHER_VARIABLES:
            continue
        known = by_env.get(name) or _scoped_env(name)
        if known is None:
            unknown.append((name, value, f"environment {name}", True))
            continue
        put(known, value, f"environment {name}")
    for item in overrides:
        key, sep, override = item.partition("=")
        if not sep:
            raise ConfigError(item, "--override takes key=value")
        put(key.strip(), override, "--override")
    for key, flag in (flags or {}).items():
        if flag is not None:
            put(key, flag, "command line")

    plugin_rows = _plugin_rows(_parse_list(raw["coordinator.plugins"]), bool(unknown))
    keys = {**KEYS, **{row.name: row for row in plugin_rows}}
    for row in plugin_rows:
        raw[row.name] = row.default
        sources[row.name] = "default"
    plugin_env = {env_name(row.name): row.name for row in plugin_rows}
    for name, value, source, is_env in unknown:
        target = plugin_env.get(name) if is_env else (name if name in keys else None)
        if target is None:
            if is_env:
                raise ConfigError(name, f"unknown environment variable{_closest(name, {**by_env, **plugin_env})}")
            raise ConfigError(name, f"unknown configuration key (from {source}){_closest(name, keys)}")
        raw[target] = value
        sources[target] = source

    values: dict[str, Any] = {}
    for key, text in raw.items():
        scoped = scoped_key(key)
        spec = keys[key] if scoped is None else scoped[1]
        try:
            parsed = spec.parse(text)
        except (ValueError, TypeError) as exc:
            raise ConfigError(key, f"invalid value {text!r} ({sources[key]}): {exc}") from exc
        problem = spec.check(parsed) if spec.check else None
        if problem:
            raise ConfigError(key, f"invalid value {text!r} ({sources[key]}): {problem}")
        values[key] = parsed
    _check_relations(values, sources)
    _check_listeners(values)
    return Config(values, sources, (*_KEYS, *plugin_rows))


def _closest(name: str, known: Iterable[str]) -> str:
    """"; did you mean X?" for the known name closest to a misspelt one, else "". Environment
    names are compared without their common prefix, which would make every name look close."""
    def bare(n: str) -> str:
        return n.removeprefix(ENV_PREFIX).lower()

    candidates = {bare(k): k for k in known}
    match = difflib.get_close_matches(bare(name), list(candidates), n=1, cutoff=0.75)
    if not match:
        return ""
    key = candidates[match[0]]
    spelt = f"{key} (key {KEYS_BY_ENV[key]})" if key in KEYS_BY_ENV else key
    return f"; did you mean {spelt}?"


def _check_listeners(values: Mapping[str, Any]) -> None:
    """Every listener has a security protocol and an address clients can reach (Kafka refuses to
    advertise the non-routable meta-address); per-listener keys name a listener."""
    try:
        listeners = listener_specs.of(values)
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise ConfigError(key, message) from exc
    for listener in listeners:
        if listener.advertised_host in NON_ROUTABLE:
            told = (listener.advertised_host, listener.advertised_port) != (listener.host, listener.port)
            hint = "" if told or values["advertised.listeners"] else (
                f" (listeners={values['listeners']} with no advertised.listeners)")
            raise ConfigError("advertised.listeners",
                              f"cannot use the nonroutable meta-address {listener.advertised_host}{hint}; "
                              "use a routable host name or address, or PLAINTEXT://:PORT to advertise this host's name")
    names = {listener.name.lower() for listener in listeners}
    for key in values:
        scoped = scoped_key(key)
        if scoped is not None and scoped[0].lower() not in names:
            raise ConfigError(key, f"no listener named {scoped[0].upper()} in listeners")


def _check_relations(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """Kafka's cross-checks of the session and heartbeat settings (`GroupCoordinatorConfig`); each
    refusal names the value, where it came from and the range it must lie in."""
    def refuse(key: str, allowed: str) -> ConfigError:
        return ConfigError(key, f"invalid value {values[key]} ({sources[key]}): {allowed}")

    triples = (
        ("group.min.session.timeout.ms", None, "group.max.session.timeout.ms"),
        ("group.consumer.min.session.timeout.ms", "group.consumer.session.timeout.ms",
         "group.consumer.max.session.timeout.ms"),
        ("group.consumer.min.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms",
         "group.consumer.max.heartbeat.interval.ms"),
    )
    for low, mid, high in triples:
        if values[low] > values[high]:
            raise refuse(low, f"must be at most {high} ({values[high]})")
        if mid is not None and not values[low] <= values[mid] <= values[high]:
            raise refuse(mid, f"must be between {values[low]} and {values[high]} ({low} and {high})")
    heartbeat, session = "group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms"
    if values[heartbeat] >= values[session]:
        most = min(values[session] - 1, values["group.consumer.max.heartbeat.interval.ms"])
        raise refuse(heartbeat, f"must be between {values['group.consumer.min.heartbeat.interval.ms']} and "
                                f"{most} (lower than {session}, {values[session]})")
    if values["max.connections.per.ip"] == 0 and not values["max.connections.per.ip.overrides"]:
        raise ConfigError("max.connections.per.ip", "can be 0 only if max.connections.per.ip.overrides is set "
                          "(else no client could connect)")
    if values["coordinator.log.storage"] == "upstream" and not values["upstream.bootstrap.servers"]:
        raise ConfigError("coordinator.log.storage", f"upstream needs sidecar mode ({sources['coordinator.log.storage']}): "
                          "set upstream.bootstrap.servers, or keep local in embedded mode")
    queued = values["queued.max.request.bytes"]
    if 0 < queued < values["socket.request.max.bytes"]:  # else the largest request could never be read
        raise refuse("queued.max.request.bytes", f"must be -1 or 0 (no bound), or between "
                     f"{values['socket.request.max.bytes']} and {INT32_MAX} (at least socket.request.max.bytes)")


def reference_table() -> str:
    """Markdown table of every key, for README and --help."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key in _KEYS:
        lines.append(f"| `{key.name}` | `{key.default}` | {key.doc} |")
    return "\n".join(lines)
