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


def test_the_quick_jit_compiler_for_one_step_and_the_users_options_after_it():
    from jobs.engine.session import QUICK_JIT, java_options

    def driver(cfg, one_step):
        return java_options(cfg, "local[2]", one_step=one_step)["spark.driver.extraJavaOptions"].split()[1:]
    auto = build_config()
    assert auto["spark.jit"] == "auto"
    assert driver(auto, one_step=True) == [*QUICK_JIT, "-XX:+UseParallelGC"]  # a process per step
    assert driver(auto, one_step=False) == ["-XX:+UseParallelGC"]  # deltacrawl crawl, sql, shell
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


def test_values_the_program_computes_replace_options_and_fitted_ones_ride_along():
    """crawl.config.with_values: update's fitted schedule (crawl/crawldb/schedule_fit.py) replaces
    schedule.fetch_value_s and adds fitted.* values, which schedule_policy hands to apply_fetch; any
    other unknown key is refused, as a typo would be."""
    from crawl.config import with_values
    from crawl.crawldb.status import schedule_policy
    cfg = build_config()
    fitted = with_values(cfg, {"schedule.fetch_value_s": 12.5, "fitted.rate_prior": (0.5, 0.5),
                               "fitted.information_horizon_s": 600.0})
    policy = schedule_policy(fitted)
    assert policy["schedule.fetch_value_s"] == 12.5 and policy["fitted.rate_prior"] == (0.5, 0.5)
    assert policy["fitted.information_horizon_s"] == 600.0 and "fitted.rate_prior" not in cfg
    with pytest.raises(ConfigError, match="unknown config key 'schedule.fetch_valu_s'"):
        with_values(cfg, {"schedule.fetch_valu_s": 1.0})


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
