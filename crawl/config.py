"""Configuration: the documented defaults in conf/defaults.toml, overridden by a site file and
by ``key=value`` pairs.

A config (``Config``) is built once, validated, and read-only. Every key must exist in the defaults
file, and an override must have the default's type (ints are accepted where a float is expected):
a typo is an error, never a silent fallback. It is read two ways:

- by section and attribute, ``cfg.fetch.delay_s``: each ``[section]`` of the defaults file is a
  frozen dataclass (``FetchConfig``, ...) whose fields and their types are the section's keys and
  their defaults' types, generated from the file when this module is imported;
- as a mapping of dotted keys, ``cfg["fetch.delay_s"]``, for code that still reads it so.

It pickles (Spark ships it to the executors inside a task's closure) and compares equal to any
mapping with the same keys and values.
"""
from __future__ import annotations

import dataclasses
import json
import keyword
import math
import re
import tomllib
from importlib import resources
from types import MappingProxyType
from typing import Any, Iterable, Mapping


class ConfigError(ValueError):
    """A configuration problem the user can fix; its message is one clear line."""


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def load_defaults() -> dict[str, Any]:
    text = resources.files("conf").joinpath("defaults.toml").read_text(encoding="utf-8")
    return _flatten(tomllib.loads(text))


def _coerce(key: str, default: Any, value: Any) -> Any:
    """Return ``value`` converted to the type of ``default`` or raise ConfigError."""
    kind = type(default)
    if isinstance(value, str) and kind is list:
        try:  # lists (fetch.host_overrides) come from the command line as JSON
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"config key '{key}' expects a JSON list, got '{value}'") from None
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        try:
            if kind is bool:
                lowered = text.lower()
                if lowered in ("true", "1", "yes", "on"):
                    return True
                if lowered in ("false", "0", "no", "off"):
                    return False
                raise ValueError(text)
            if kind is int:
                return int(text)
            if kind is float:
                number = float(text)
        except ValueError:
            raise ConfigError(f"config key '{key}' expects {kind.__name__}, got '{value}'") from None
        if kind is float:
            return _finite(key, number)
        raise ConfigError(f"config key '{key}' cannot be set from the command line")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not kind:
        raise ConfigError(f"config key '{key}' expects {kind.__name__}, got {value!r}")
    return _finite(key, value) if kind is float else value


def _finite(key: str, value: float) -> float:
    """Every number of the config is finite: a nan delay compares false with everything (a fetch
    waited forever after one request per host), an infinite one never ends."""
    if not math.isfinite(value):
        raise ConfigError(f"config key '{key}' expects a finite number, got {value}")
    return value


# The dict methods a Config refuses: a section may take one of these names (the [update] section).
_REFUSED = ("clear", "pop", "popitem", "setdefault", "update")


class Config(dict):
    """A validated, read-only config: ``cfg.section.key`` or ``cfg["section.key"]`` (see the module's
    docstring). Built by build_config (options) and with_values (values the program computed);
    ``Config.of`` turns a plain mapping of every key (a test's ``{**cfg, key: value}``) into one.

    A dict whose changing methods refuse, so that a read is a dict's (``cfg["fetch.delay_s"]``
    as fast as it was when the config was a plain mapping) and each section an attribute of the
    instance (no lookup through ``__getattr__``)."""

    def __init__(self, flat: Mapping[str, Any]) -> None:
        missing = [key for key in _DEFAULTS if key not in flat]
        if missing:
            raise ConfigError(f"config misses key '{missing[0]}' (a config holds every key of conf/defaults.toml)")
        dict.__init__(self, flat)
        for name, cls in SECTIONS.items():
            values = {field: self[f"{name}.{field}"] for field in _FIELDS[name]}
            if name == "spark":
                values["conf"] = MappingProxyType(spark_settings(self))
            object.__setattr__(self, name, cls(**values))

    @classmethod
    def of(cls, cfg: Mapping[str, Any]) -> "Config":
        """``cfg`` itself if it is a Config, else a Config of its keys (taken as already valid)."""
        return cfg if isinstance(cfg, Config) else cls(cfg)

    def __getattr__(self, name: str) -> Any:  # only called for what is not a section
        raise AttributeError(f"config has no section '{name}' (every section is in conf/defaults.toml)")

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a config is read-only: build another (crawl.config.with_values)")

    __setattr__ = __delattr__ = __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = __ior__ = _read_only  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Config({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Config, (dict(self),)

    def __copy__(self) -> "Config":
        return self

    def __deepcopy__(self, memo: Any) -> "Config":
        return self


def _section_class(name: str, defaults: Mapping[str, Any]) -> type:
    """The frozen dataclass of one [section]: a field per key, typed as its default."""
    fields: list[tuple[str, Any]] = []
    for field, default in defaults.items():
        if not field.isidentifier() or keyword.iskeyword(field) or (name, field) == ("spark", "conf"):
            raise ConfigError(f"conf/defaults.toml: key '{name}.{field}' is not a Python name")
        fields.append((field, type(default)))
    if hasattr(dict, name) and name not in _REFUSED:  # cfg.update is [update]: dict's update refuses anyway
        raise ConfigError(f"conf/defaults.toml: section [{name}] would hide the config's method {name}()")
    if name == "spark":
        fields.append(("conf", Mapping[str, str]))  # [spark.conf]: Spark's own settings, passed as they are
    cls = dataclasses.make_dataclass(f"{name.capitalize()}Config", fields, frozen=True)
    cls.__module__ = __name__  # module level below, so a section pickles by reference like any class
    cls.__doc__ = f"The [{name}] options of conf/defaults.toml (crawl.config.Config.{name})."
    return cls


# Keys under this prefix are Spark's own settings, passed to the SparkSession as they are
# (``spark.conf.spark.executor.memory=4g`` sets ``spark.executor.memory``); see conf/defaults.toml.
SPARK_PASSTHROUGH = "spark.conf."


def _spark_setting(key: str, value: Any) -> str:
    name = key[len(SPARK_PASSTHROUGH):]
    if not name.startswith("spark."):
        raise ConfigError(f"config key '{key}': Spark settings start with 'spark.' (e.g. spark.conf.spark.executor.memory)")
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, (str, int, float)):
        raise ConfigError(f"config key '{key}' expects a string or number, got {value!r}")
    return str(value)


def spark_settings(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The pass-through Spark settings of a config: {spark key: value}."""
    return {k[len(SPARK_PASSTHROUGH):]: v for k, v in cfg.items() if k.startswith(SPARK_PASSTHROUGH)}


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings (from ``--conf``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf expects key=value, got '{pair}'")
        out[key.strip()] = value
    return out


def build_config(conf_file: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then the site file, then explicit overrides; validated and frozen."""
    defaults = load_defaults()
    merged = dict(defaults)
    layers: list[Mapping[str, Any]] = []
    if conf_file:
        try:
            with open(conf_file, "rb") as fh:
                layers.append(_flatten(tomllib.load(fh)))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {conf_file}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {conf_file}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {conf_file} is not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {conf_file} is not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    if overrides:
        layers.append(overrides)
    for layer in layers:
        for key, value in layer.items():
            if key.startswith(SPARK_PASSTHROUGH) and key not in defaults:
                merged[key] = _spark_setting(key, value)
                continue
            if key not in defaults:
                raise ConfigError(f"unknown config key '{key}' (every key is listed in conf/defaults.toml)")
            merged[key] = _coerce(key, defaults[key], value)
    _validate(merged)
    return Config(merged)


def with_values(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> Config:
    """``cfg`` with some keys replaced by values the program computed (already valid), frozen.
    Only options: what update fits to the crawl is not one (crawl.crawldb.schedule_fit.Fitted)."""
    unknown = [k for k in values if k not in cfg]
    if unknown:
        raise ConfigError(f"unknown config key '{unknown[0]}'")
    return Config({**cfg, **values})


# What SparkContext.setLogLevel accepts.
SPARK_LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")
SPARK_JIT_MODES = ("auto", "full", "quick")
DRIVER_READERS = ("auto", "spark")


def _validate(cfg: dict[str, Any]) -> None:
    from crawl.net.addresses import AddressPolicy
    from crawl.net.filters import LinkFilter
    from crawl.fetch.politeness import validate_overrides
    try:
        cfg["fetch.host_overrides"] = validate_overrides(cfg["fetch.host_overrides"])
    except ValueError as exc:
        raise ConfigError(f"config key 'fetch.host_overrides': {exc}") from None
    sections = Config(cfg)  # what the policies below read (cfg.fetch, cfg.discovery)
    try:
        AddressPolicy.from_config(sections)  # bad CIDRs or ports: one clear message now, not in a task
    except ValueError as exc:
        raise ConfigError(f"config key {exc}") from None
    try:
        LinkFilter.from_config(sections)  # bad regexes or scope: one clear message now, not in a task
    except ValueError as exc:
        raise ConfigError(f"discovery: {exc}") from None
    agent = cfg["fetch.user_agent"]
    if not agent.strip() or not agent.isprintable():  # a header line: aiohttp would refuse CR/LF in a task
        raise ConfigError(f"config key 'fetch.user_agent' must be one line of printable text naming you and a "
                          f"contact (a URL or e-mail), got {agent!r}")
    positive = ["crawldb.host_buckets", "generate.max_urls_per_host", "generate.top_n", "generate.lease_s",
                "fetch.max_concurrency", "fetch.max_body_bytes", "fetch.total_timeout_s",
                "fetch.connect_timeout_s", "fetch.read_timeout_s", "fetch.time_limit_s", "fetch.max_backoff_s", "fetch.max_consecutive_errors",
                "fetch.robots_max_bytes", "spark.shuffle_partitions", "spark.task_max_failures", "spark.snapshot_partitions",
                "spark.codegen_cache_entries", "parse.max_outlinks",
                "schedule.min_interval_s", "schedule.max_interval_s", "schedule.retry_interval_s",
                "schedule.gone_interval_s", "schedule.prior_min_change_s", "schedule.prior_max_change_s",
                "schedule.depth_decay", "schedule.score_floor", "schedule.fit_headroom", "schedule.fit_sample_urls",
                "parse.workers",
                "parse.memory_limit_mb", "parse.time_limit_s", "warc.max_file_bytes", "warc.gzip_level",
                "dedup.max_band_candidates", "discovery.bloom_max_mb", "discovery.max_url_length",
                "discovery.max_path_depth", "discovery.max_urls_per_host_total", "discovery.trap_min_pages",
                "discovery.trap_min_budget", "sitemaps.max_files_per_host", "sitemaps.max_urls_per_host",
                "sitemaps.max_urls_per_file", "sitemaps.max_bytes_per_file"]
    for key in positive:
        if cfg[key] <= 0:
            raise ConfigError(f"config key '{key}' must be > 0, got {cfg[key]}")
    if cfg["crawldb.deletion_vectors_min_mb"] < 0:
        raise ConfigError(f"config key 'crawldb.deletion_vectors_min_mb' must be >= 0, "
                          f"got {cfg['crawldb.deletion_vectors_min_mb']}")
    if not 0 <= cfg["dedup.max_hamming"] <= 3:
        raise ConfigError("config key 'dedup.max_hamming' must be 0..3 (4 SimHash bands find pairs within 3 bits)")
    if not 0 <= cfg["discovery.bloom_fpr"] < 1:
        raise ConfigError(f"config key 'discovery.bloom_fpr' must be in [0, 1) (0 turns the filter off), "
                          f"got {cfg['discovery.bloom_fpr']}")
    for key in ("dedup.min_jaccard", "dedup.duplicate_link_factor", "generate.discovery_share"):
        if not 0 <= cfg[key] <= 1:
            raise ConfigError(f"config key '{key}' must be in [0, 1], got {cfg[key]}")
    if not 1 <= cfg["warc.gzip_level"] <= 9:
        raise ConfigError(f"config key 'warc.gzip_level' must be 1..9, got {cfg['warc.gzip_level']}")
    _validate_s3(cfg)
    _validate_maintain(cfg)
    _validate_parse(cfg)
    _validate_lists(cfg)
    level = str(cfg["spark.log_level"]).upper()
    if level not in SPARK_LOG_LEVELS:  # Spark would refuse it from inside the JVM, as a failure
        raise ConfigError(f"config key 'spark.log_level' must be one of {', '.join(SPARK_LOG_LEVELS)}, "
                          f"got {cfg['spark.log_level']!r}")
    cfg["spark.log_level"] = level
    if cfg["crawldb.driver_reader"] not in DRIVER_READERS:
        raise ConfigError(f"config key 'crawldb.driver_reader' must be one of {', '.join(DRIVER_READERS)}, "
                          f"got {cfg['crawldb.driver_reader']!r}")
    if cfg["spark.jit"] not in SPARK_JIT_MODES:
        raise ConfigError(f"config key 'spark.jit' must be one of {', '.join(SPARK_JIT_MODES)}, "
                          f"got {cfg['spark.jit']!r}")
    non_negative = ["log.progress_s", "fetch.delay_s", "fetch.max_redirects", "fetch.delay_factor", "fetch.max_delay_s", "fetch.max_wait_in_cycle_s",
                    "fetch.host_time_factor", "fetch.host_time_floor_s",
                    "fetch.robots_retry_s", "fetch.max_crawl_delay_s", "fetch.tasks", "fetch.robots_ttl_s",
                    "schedule.max_retries", "schedule.gone_max_checks", "schedule.fetch_value_s",
                    "schedule.score_exponent", "schedule.information_horizon_cycles",
                    "schedule.information_max_changes", "update.max_depth", "devweb.hosts", "devweb.pages_per_host",
                    "devweb.port", "devweb.crawl_delay_s", "stats.top_hosts", "sitemaps.ttl_s",
                    "discovery.max_segment_repeats", "discovery.trap_new_urls_per_page"]
    for key in non_negative:
        if cfg[key] < 0:
            raise ConfigError(f"config key '{key}' must be >= 0, got {cfg[key]}")
    for key in ("devweb.port", "devweb.https_port", "devweb.dns_port"):  # 0: any free port
        if not 0 <= cfg[key] <= 65535:
            raise ConfigError(f"config key '{key}' must be a port number (0 to 65535), got {cfg[key]}")


# Lists whose own checks above say what their entries must be (tables, port numbers or ranges,
# networks, the link filter's names and patterns); every other list option is a list of names.
_CHECKED_LISTS = ("fetch.host_overrides", "fetch.allow_ports", "fetch.allow_networks")


def _validate_lists(cfg: dict[str, Any]) -> None:
    """Every other list option holds strings: a number in discovery.tracking_params was accepted
    at load and failed later, an AttributeError inside a step (crawl.net.urls.UrlRules)."""
    for key, default in _DEFAULTS.items():
        if isinstance(default, list) and key not in _CHECKED_LISTS:
            bad = [v for v in cfg[key] if not isinstance(v, str)]
            if bad:
                raise ConfigError(f"config key '{key}' must be a list of strings, got {bad[0]!r} in it")


def _validate_parse(cfg: dict[str, Any]) -> None:
    """What is fetched in full and parsed (fetch.content_types, parse.*): checked at load, not when
    a fetch task first builds its parser options."""
    for key in ("fetch.content_types", "parse.disabled"):
        values = cfg[key]
        if not all(isinstance(v, str) and v.strip() for v in values):
            raise ConfigError(f"config key '{key}' must be a list of names, got {values!r}")
    bad = [t for t in cfg["fetch.content_types"] if not re.fullmatch(r"[\w.+-]+/[\w.+-]+", t.strip())]
    if bad:
        raise ConfigError(f"config key 'fetch.content_types': not a media type (type/subtype): {bad}")
    for key in ("parse.pdf_max_pages", "parse.pdf_max_stream_mb", "parse.pdf_max_document_mb", "fetch.max_pdf_bytes"):
        if not cfg[key] > 0:
            raise ConfigError(f"config key '{key}' must be > 0, got {cfg[key]}")
    if not cfg["fetch.max_other_body_bytes"] >= 0:
        raise ConfigError(f"config key 'fetch.max_other_body_bytes' must be >= 0, got {cfg['fetch.max_other_body_bytes']}")


def _validate_maintain(cfg: dict[str, Any]) -> None:
    for key in ("maintain.vacuum_retain_hours", "maintain.segment_retain_days", "maintain.quiet_s"):
        if cfg[key] < 0:
            raise ConfigError(f"config key '{key}' must be >= 0, got {cfg[key]}")
    for key in ("maintain.log_retain_days", "maintain.checkpoint_interval"):
        if cfg[key] <= 0:
            raise ConfigError(f"config key '{key}' must be > 0, got {cfg[key]}")
    hours = cfg["maintain.vacuum_retain_hours"]
    if hours < 168 and not cfg["maintain.unsafe_short_retention"]:
        raise ConfigError(f"config key 'maintain.vacuum_retain_hours' = {hours} is below Delta's safety limit of "
                          f"168 hours (set maintain.unsafe_short_retention = true if you mean it)")
    if cfg["maintain.log_retain_days"] * 24 < hours:
        raise ConfigError("config key 'maintain.log_retain_days' must cover maintain.vacuum_retain_hours "
                          "(time travel needs the commit as well as its files)")


# S3's limits on a multipart upload: every part but the last at least 5 MiB, at most 10,000 parts
# (re-exported by crawl.s3, which uploads WARC files in parts of warc.s3_part_mb).
S3_MIN_PART_BYTES = 5 * 2**20
S3_MAX_PARTS = 10_000


def _validate_s3(cfg: dict[str, Any]) -> None:
    part_bytes = cfg["warc.s3_part_mb"] * 2**20
    if part_bytes < S3_MIN_PART_BYTES:
        raise ConfigError(f"config key 'warc.s3_part_mb' must be >= {S3_MIN_PART_BYTES // 2**20} "
                          f"(S3's minimum part size), got {cfg['warc.s3_part_mb']}")
    # a file grows past max_file_bytes by the one exchange that crosses it: one part of room for that
    if cfg["warc.max_file_bytes"] > part_bytes * (S3_MAX_PARTS - 1):
        raise ConfigError(f"config key 'warc.max_file_bytes' ({cfg['warc.max_file_bytes']}) needs more than "
                          f"{S3_MAX_PARTS} parts of warc.s3_part_mb ({cfg['warc.s3_part_mb']} MiB): raise warc.s3_part_mb")
    style = cfg["s3.path_style"].strip().lower()
    if style not in ("auto", "true", "false"):
        raise ConfigError(f"config key 's3.path_style' must be auto, true or false, got '{cfg['s3.path_style']}'")
    cfg["s3.path_style"] = style
    if bool(cfg["s3.access_key_id"]) != bool(cfg["s3.secret_access_key"]):
        raise ConfigError("config keys 's3.access_key_id' and 's3.secret_access_key' go together: set both or neither")
    if cfg["s3.session_token"] and not cfg["s3.access_key_id"]:
        raise ConfigError("config key 's3.session_token' needs s3.access_key_id and s3.secret_access_key")


# The sections, generated from conf/defaults.toml once, at import.
_DEFAULTS = load_defaults()
_FIELDS: dict[str, dict[str, Any]] = {}
for _key, _default in _DEFAULTS.items():
    _section, _, _field = _key.partition(".")
    _FIELDS.setdefault(_section, {})[_field] = _default
SECTIONS: dict[str, type] = {name: _section_class(name, fields) for name, fields in _FIELDS.items()}
globals().update({cls.__name__: cls for cls in SECTIONS.values()})
del _key, _default, _section, _field
