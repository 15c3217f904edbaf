import pytest

from crawl.config import ConfigError, build_config, load_defaults, parse_pairs


def test_defaults_load_and_are_typed():
    d = load_defaults()
    assert d["fetch.delay_s"] == 1.0
    assert isinstance(d["generate.max_urls_per_host"], int)


def test_override_coerces_to_default_type():
    cfg = build_config(overrides=parse_pairs(["fetch.delay_s=2", "generate.top_n=7", "spark.ui_enabled=true"]))
    assert cfg["fetch.delay_s"] == 2.0 and isinstance(cfg["fetch.delay_s"], float)
    assert cfg["generate.top_n"] == 7
    assert cfg["spark.ui_enabled"] is True


def test_unknown_key_is_an_error():
    with pytest.raises(ConfigError, match="unknown config key 'fetch.dealy_s'"):
        build_config(overrides={"fetch.dealy_s": "1"})


def test_wrong_type_is_an_error():
    with pytest.raises(ConfigError, match="expects int"):
        build_config(overrides={"generate.top_n": "lots"})
    with pytest.raises(ConfigError, match="must be > 0"):
        build_config(overrides={"generate.top_n": "0"})


def test_pairs_need_equals():
    with pytest.raises(ConfigError, match="key=value"):
        parse_pairs(["fetch.delay_s"])


def test_conf_file_layers_under_overrides(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text("[fetch]\ndelay_s = 3\nuser_agent = 'x'\n")
    cfg = build_config(str(site), {"fetch.delay_s": "4"})
    assert cfg["fetch.delay_s"] == 4.0 and cfg["fetch.user_agent"] == "x"


def test_conf_file_errors_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        build_config(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[fetch\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        build_config(str(bad))
    typo = tmp_path / "typo.toml"
    typo.write_text("[fetch]\nspeed = 3\n")
    with pytest.raises(ConfigError, match="unknown config key 'fetch.speed'"):
        build_config(str(typo))


def test_config_is_read_only():
    cfg = build_config()
    with pytest.raises(TypeError):
        cfg["fetch.delay_s"] = 0


def test_a_bloom_filter_rate_of_one_is_refused_at_load_not_in_fetch():
    import pytest
    from crawl.config import ConfigError
    with pytest.raises(ConfigError, match="bloom_fpr"):
        build_config(overrides={"discovery.bloom_fpr": 1.0})
    assert build_config(overrides={"discovery.bloom_fpr": 0.0})["discovery.bloom_fpr"] == 0.0  # off


def test_spark_log_level_is_checked_before_a_jvm_starts():
    assert build_config(overrides={"spark.log_level": "warn"})["spark.log_level"] == "WARN"
    with pytest.raises(ConfigError, match="'spark.log_level' must be one of ALL, DEBUG"):
        build_config(overrides={"spark.log_level": "LOUD"})
    with pytest.raises(ConfigError, match="'log.progress_s' must be >= 0"):
        build_config(overrides={"log.progress_s": -1})


def test_jvm_options_join_ours_and_reach_a_clusters_executors():
    from jobs.engine.session import java_options
    plain = java_options(build_config(), "local[2]")
    assert list(plain) == ["spark.driver.extraJavaOptions"]
    assert plain["spark.driver.extraJavaOptions"].startswith("-Dlog4j.configurationFile=file:")
    cfg = build_config(overrides={"spark.jvm_options": " -XX:TieredStopAtLevel=1  -Dx=y "})
    local, cluster = java_options(cfg, "local[*, 4]"), java_options(cfg, "spark://127.0.0.1:7077")
    assert local["spark.driver.extraJavaOptions"].split()[1:] == ["-XX:TieredStopAtLevel=1", "-Dx=y"]
    assert "spark.executor.extraJavaOptions" not in local  # local executors live in the driver's JVM
    assert cluster["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -Dx=y"


def test_the_quick_jit_compiler_for_one_step_and_the_users_options_after_it(tmp_path):
    from jobs.engine.session import QUICK_JIT, java_options

    def driver(cfg, one_step, root=None, master="local[2]"):
        return java_options(cfg, master, one_step=one_step, crawl_root=root)["spark.driver.extraJavaOptions"].split()[1:]
    auto = build_config()
    assert auto["spark.jit"] == "auto"
    assert driver(auto, one_step=True) == [*QUICK_JIT, "-XX:+UseParallelGC"]  # a process per step
    assert driver(auto, one_step=False) == ["-XX:+UseParallelGC"]  # deltacrawl crawl, sql, shell: no root known
    # crawl, sql and shell on a local master: the quick compiler while the crawl root's crawldb is
    # small (crawldb.local_read_max_mb of data files; a new crawl has none), both once it is not
    root = tmp_path / "crawl"
    assert driver(auto, False, str(root)) == [*QUICK_JIT, "-XX:+UseParallelGC"]
    part = root / "crawldb" / "host_bucket=3"
    part.mkdir(parents=True)
    with open(part / "part-0.parquet", "wb") as fh:
        fh.truncate(10 * 1024 * 1024)  # 10 MB (sparse)
    (root / "crawldb" / "_delta_log").mkdir()
    with open(root / "crawldb" / "_delta_log" / "00000000000000000099.checkpoint.json", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # the log is not data
    assert driver(auto, False, f"file://{root}") == [*QUICK_JIT, "-XX:+UseParallelGC"]
    with open(part / "part-1.parquet", "wb") as fh:
        fh.truncate(7 * 1024 * 1024)  # 17 MB in all: more than local_read_max_mb's 16
    assert driver(auto, False, str(root)) == ["-XX:+UseParallelGC"]
    assert driver(build_config(overrides={"crawldb.local_read_max_mb": 32}), False, str(root)) == [*QUICK_JIT, "-XX:+UseParallelGC"]
    for remote in ("s3a://bucket/crawl", "hdfs://namenode/crawl"):
        assert driver(auto, False, remote) == ["-XX:+UseParallelGC"]  # not read from here
    new = str(tmp_path / "other")
    assert driver(auto, False, new, "spark://127.0.0.1:7077") == ["-XX:+UseParallelGC"]  # a cluster's crawl
    quick = build_config(overrides={"spark.jit": "quick", "spark.jvm_options": "-XX:TieredStopAtLevel=4"})
    # the user's own option comes last, and the JVM takes the last of a repeated option
    assert driver(quick, one_step=False) == [*QUICK_JIT, "-XX:TieredStopAtLevel=4"]
    full = build_config(overrides={"spark.jit": "full"})
    assert driver(full, one_step=True) == ["-XX:+UseParallelGC"]
    # a cluster's executors live as long as the application: the same compiler as its driver
    on_cluster = java_options(auto, "spark://127.0.0.1:7077", one_step=True)
    assert on_cluster["spark.executor.extraJavaOptions"] == " ".join([*QUICK_JIT, "-XX:+UseParallelGC"])
    with pytest.raises(ConfigError, match="'spark.jit' must be one of auto, full, quick, got 'fast'"):
        build_config(overrides={"spark.jit": "fast"})


def test_values_the_program_computes_replace_options_and_fitted_ones_are_not_options():
    """crawl.config.with_values replaces options and refuses any unknown key, as a typo would be;
    what update fits to the crawl (crawl/crawldb/schedule_fit.py) is no option but a Fitted, which
    schedule_policy puts beside the schedule's options for apply_fetch."""
    from crawl.config import with_values
    from crawl.crawldb.schedule_fit import NOT_FITTED, Fitted
    from crawl.crawldb.status import schedule_policy
    cfg = build_config()
    assert with_values(cfg, {"fetch.delay_s": 2.5}).fetch.delay_s == 2.5
    for key in ("schedule.fetch_valu_s", "fitted.rate_prior"):
        with pytest.raises(ConfigError, match=f"unknown config key '{key}'"):
            with_values(cfg, {key: 1.0})
    policy = schedule_policy(cfg, Fitted(12.5, (0.5, 0.5), 600.0))
    assert (policy.fetch_value_s, policy.rate_prior, policy.information_horizon_s) == (12.5, (0.5, 0.5), 600.0)
    assert policy.options is cfg.schedule
    # μ fitted or not: a Fitted without one keeps the configured value, as nothing fitted does
    configured = cfg.schedule.fetch_value_s
    assert schedule_policy(cfg, Fitted(None, None, 0.0)).fetch_value_s == configured
    assert schedule_policy(cfg) == schedule_policy(cfg, NOT_FITTED) == schedule_policy(cfg, None)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", float("nan"), float("inf")])
def test_numbers_must_be_finite(value):
    # a nan delay compared false with everything: the fetch hung after one request per host
    with pytest.raises(ConfigError, match="fetch.delay_s.*finite number"):
        build_config(overrides={"fetch.delay_s": value})


def test_a_conf_file_nan_is_refused_too(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("[fetch]\ndelay_s = nan\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="finite"):
        build_config(str(path))


def test_a_conf_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "site.toml"
    path.write_bytes(b'[fetch]\nuser_agent = "caf\\xe9"\n'.replace(b"\\xe9", b"\xe9"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        build_config(str(path))


def test_ports_are_checked_with_the_config_before_anything_is_made(tmp_path):
    from jobs.cli import main
    root = tmp_path / "crawl"
    assert main(["crawl", "--with-devweb", "--conf", "devweb.port=70000", "--crawl-root", str(root)]) == 2
    assert not root.exists()
    for key in ("devweb.port", "devweb.https_port", "devweb.dns_port"):
        with pytest.raises(ConfigError, match="port number"):
            build_config(overrides={key: 65536})


def test_the_config_is_typed_sections_and_a_mapping_of_dotted_keys():
    import dataclasses
    import pickle
    from crawl.config import Config, FetchConfig, with_values
    cfg = build_config(overrides={"fetch.delay_s": "2", "spark.conf.spark.executor.memory": "4g"})
    assert isinstance(cfg.fetch, FetchConfig) and dataclasses.is_dataclass(cfg.fetch)
    assert cfg.fetch.delay_s == cfg["fetch.delay_s"] == 2.0
    assert {f.name: f.type for f in dataclasses.fields(cfg.generate)}["top_n"] is int
    assert dict(cfg.spark.conf) == {"spark.executor.memory": "4g"}
    assert cfg["spark.conf.spark.executor.memory"] == "4g"
    # one field per key of conf/defaults.toml, no more, no fewer
    assert sorted(f"{name}.{f.name}" for name in ("fetch", "schedule") for f in dataclasses.fields(getattr(cfg, name))) \
        == sorted(k for k in load_defaults() if k.startswith(("fetch.", "schedule.")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.fetch.delay_s = 0.0
    with pytest.raises(TypeError):
        cfg.fetch = None
    with pytest.raises(AttributeError, match="no section 'fetchh'"):
        _ = cfg.fetchh
    # Spark pickles it into a task's closure: the same config, sections and all, comes back
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and back.fetch == cfg.fetch and back.spark.conf == cfg.spark.conf
    assert pickle.loads(pickle.dumps(cfg.fetch)) == cfg.fetch
    # it compares as a mapping, to a plain dict as to another config
    assert cfg == dict(cfg) and cfg != build_config()
    assert Config.of({**cfg, "fetch.delay_s": 3.0}).fetch.delay_s == 3.0 and Config.of(cfg) is cfg
    assert with_values(cfg, {"fetch.tasks": 3}).fetch.tasks == 3 and cfg.fetch.tasks == 0
    with pytest.raises(ConfigError, match="misses key"):
        Config({"fetch.delay_s": 1.0})


# --- Every key the code reads is declared in conf/defaults.toml --------------------------------

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]
CONFIG_NAME = __import__("re").compile(r"(?:^|[._])(?:cfg|config)$")  # cfg, self.cfg, run_cfg, ctx.cfg
# calls that return a config: Config.of(cfg).warc.s3_part_mb reads a key like cfg.warc.s3_part_mb
CONFIG_CALLS = ("Config", "Config.of", "build_config", "make_config", "with_values")
# objects that carry one section as a field: a SchedulePolicy's ``options`` is the [schedule] section
# (crawl.crawldb.status), read as policy.options.min_interval_s
HOLDER = __import__("re").compile(r"(?:^|[._])policy$")
HELD_FIELDS = {"options": "schedule"}


def _is_config(node) -> bool:
    """``node`` is an expression holding a config: a name like one, or a call that makes one."""
    import ast
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        return name in CONFIG_CALLS or name.endswith(tuple(f".{call}" for call in CONFIG_CALLS))
    return isinstance(node, (ast.Name, ast.Attribute)) and bool(CONFIG_NAME.search(ast.unparse(node)))


def _section_names(scope, sections) -> dict[str, str]:
    """{name: section} of the names that hold one section of a config in a function (or a
    module's top level): ``fetch = cfg.fetch``, or a parameter annotated ``schedule: ScheduleConfig``."""
    import ast
    held: dict[str, str] = {}
    classes = {f"{name.capitalize()}Config": name for name in sections}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for arg in [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]:
            if arg.annotation is not None and ast.unparse(arg.annotation).strip("'\"") in classes:
                held[arg.arg] = classes[ast.unparse(arg.annotation).strip("'\"")]
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Attribute) and node.value.attr in sections and _is_config(node.value.value):
            held[node.targets[0].id] = node.value.attr
    return held


def _own_nodes(scope):
    """The nodes of a function (or module) outside the functions defined in it."""
    import ast
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def config_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) of every config key a Python source reads: a "section.key" literal read by
    subscript or .get() (from any mapping: a config, or a part of one),
    a key given to with_values or to a ``{**cfg, ...}`` copy, ``cfg.section.key`` on anything
    named like a config or made by a call that makes one (``Config.of(cfg).warc.s3_part_mb``), and
    ``name.key`` where the function's ``name`` holds a section (``fetch = cfg.fetch``, or a
    parameter ``fetch: FetchConfig``). Spark's own settings ("spark.speculation") are set or read
    from Spark's objects, never subscripted out of a config, so they do not count; nor do
    [spark.conf]'s pass-through keys."""
    import ast
    import re
    from crawl.config import SECTIONS, SPARK_PASSTHROUGH
    key_pattern = re.compile(r"(?:%s)\.[A-Za-z_]\w*" % "|".join(SECTIONS))
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        literals: list[ast.expr | None] = []
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and not isinstance(node.value, ast.Call):
            literals = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and node.args and not isinstance(node.func.value, ast.Call):
                literals = [node.args[0]]
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("with_values") and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Dict):
            literals = list(node.args[1].keys)
        elif isinstance(node, ast.Dict) and any(k is None and CONFIG_NAME.search(ast.unparse(v))
                                                for k, v in zip(node.keys, node.values)):
            literals = list(node.keys)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr in SECTIONS and _is_config(node.value.value):
            found.append((node.lineno, f"{node.value.attr}.{node.attr}"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr in HELD_FIELDS and HOLDER.search(ast.unparse(node.value.value)):
            found.append((node.lineno, f"{HELD_FIELDS[node.value.attr]}.{node.attr}"))
        for literal in literals:
            if isinstance(literal, ast.Constant) and isinstance(literal.value, str) \
                    and key_pattern.fullmatch(literal.value) and not literal.value.startswith(SPARK_PASSTHROUGH):
                found.append((literal.lineno, literal.value))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            held = _section_names(node, SECTIONS)
            found += [(read.lineno, f"{held[read.value.id]}.{read.attr}") for read in _own_nodes(node)
                      if isinstance(read, ast.Attribute) and isinstance(read.value, ast.Name)
                      and read.value.id in held and isinstance(read.ctx, ast.Load)]
    return found


def test_the_declared_key_checker_sees_an_undeclared_key():
    source = ("def f(cfg, ctx):\n"
              "    a = cfg['fetch.delay_s'] + cfg.get('fetch.dealy_s', 1.0)\n"
              "    b = ctx.cfg.fetch.delay_s + ctx.cfg.fetch.dely_s + with_values(cfg, {'generate.top_m': 1})\n"
              "    conf = {'spark.speculation': 'false'}; conf['spark.jars'] = ''\n"
              "    return {**cfg, 'dedup.max_hammin': 2}, spark_settings(cfg).get('spark.speculation')\n"
              # a section held by a name, by an annotated parameter, or read off a call that makes a config
              "def g(cfg, schedule: ScheduleConfig, other):\n"
              "    parse = cfg.parse\n"
              "    other.fetch.delay_ss = 1  # not a config: no read\n"
              "    return parse.max_outlinks + parse.max_outlink + schedule.min_intervall_s + other.max_outlink, \\\n"
              "        Config.of(cfg).warc.s3_part_mbb, build_config().generate.top_n\n"
              "def h(parse, policy):\n"
              "    return parse.max_outlinkz, policy.options.depth_decayy  # parse: not a section here\n")
    reads = config_reads(source)
    assert sorted(key for _, key in reads) == ["dedup.max_hammin", "fetch.dealy_s", "fetch.delay_s", "fetch.delay_s",
                                               "fetch.dely_s", "generate.top_m", "generate.top_n", "parse.max_outlink",
                                               "parse.max_outlinks", "schedule.depth_decayy", "schedule.min_intervall_s",
                                               "warc.s3_part_mbb"]
    declared = set(load_defaults())
    assert sorted(key for _, key in reads if key not in declared) == ["dedup.max_hammin", "fetch.dealy_s",
                                                                      "fetch.dely_s", "generate.top_m",
                                                                      "parse.max_outlink", "schedule.depth_decayy",
                                                                      "schedule.min_intervall_s", "warc.s3_part_mbb"]


def test_every_config_key_read_in_code_is_declared():
    """A key read with .get() and a default, or in a branch no test takes, would silently never be
    set by any config: every one the crawler, its jobs and the DAG read is in conf/defaults.toml."""
    declared = set(load_defaults())
    reads, undeclared = 0, []
    for top in ("crawl", "jobs", "airflow_dags"):
        for path in sorted((REPO / top).rglob("*.py")):
            for line, key in config_reads(path.read_text(encoding="utf-8")):
                reads += 1
                if key not in declared:
                    undeclared.append(f"{path.relative_to(REPO)}:{line} {key}")
    assert reads > 200 and undeclared == []  # reads: the scan still sees the code's reads


def test_no_method_changes_a_config():
    import copy
    from crawl.config import Config, UpdateConfig
    cfg = build_config()
    assert isinstance(cfg.update, UpdateConfig)  # the [update] section, not dict.update
    for change in (lambda: Config.update(cfg, {"fetch.delay_s": 0.0}), lambda: cfg.pop("fetch.delay_s"),
                   lambda: cfg.setdefault("fetch.delay_s", 0.0), cfg.popitem, cfg.clear,
                   lambda: cfg.__delitem__("fetch.delay_s"), lambda: cfg.__ior__({"fetch.delay_s": 0.0})):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert cfg == build_config() and copy.deepcopy(cfg) is cfg
    # a copy to change is a plain dict, and Config.of makes a config of it again
    changed = {**cfg, "fetch.delay_s": 0.5}
    assert type(changed) is dict and Config.of(changed).fetch.delay_s == 0.5


def test_list_options_hold_strings_unless_their_own_check_says_otherwise():
    from crawl.config import load_defaults
    lists = [k for k, v in load_defaults().items() if isinstance(v, list)]
    assert "fetch.dns_servers" in lists and "devweb.hostile" in lists
    for key in lists:
        if key in ("fetch.host_overrides", "fetch.allow_ports", "fetch.allow_networks"):
            continue  # tables, port numbers, networks: their own checks and messages
        with pytest.raises(ConfigError, match=f"'{key}' must be a list of|{key.split('.')[1]} must be a list of"):
            build_config(overrides={key: "[1]"})
    assert build_config(overrides={"fetch.allow_ports": "[80, 8080]"})["fetch.allow_ports"] == [80, 8080]


def test_a_config_in_a_closure_reaches_a_task_whole():
    """jobs/fetch.py's mapPartitionsWithIndex closes over the config: Spark pickles the closure
    with its own cloudpickle, and the task reads sections and keys of the same config."""
    from pyspark import cloudpickle
    cfg = build_config(overrides={"fetch.delay_s": "0.25", "spark.conf.spark.executor.memory": "1g"})
    task = cloudpickle.loads(cloudpickle.dumps(lambda: (cfg.fetch.delay_s, cfg["fetch.delay_s"], cfg)))
    delay, dotted, shipped = task()
    assert delay == dotted == 0.25 and shipped == cfg and type(shipped) is type(cfg)
    assert shipped.spark.conf == {"spark.executor.memory": "1g"}
