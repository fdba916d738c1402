import pytest
from pydantic import SecretStr

from memlane.pipeline.config import DatabaseConfig, EngineConfig, RecallConfig, masked_dump, secret_fields
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import ConfigError
from memlane.server.settings import Settings, load


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("MEMLANE_"):
            monkeypatch.delenv(k)


def test_environment_overrides_the_file_and_nested_keys_merge(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[recall]\ndefault_limit = 5\nrrf_k = 30\n")
    monkeypatch.setenv("MEMLANE_RECALL__DEFAULT_LIMIT", "7")
    s = load(cfg)
    assert s.recall.default_limit == 7
    assert s.recall.rrf_k == 30


def test_an_empty_environment_variable_counts_as_unset(tmp_path, monkeypatch):
    """A host that fills the environment from a form (an MCP bundle's user_config) passes "" for a
    field left blank: that is the default, never "." for the data directory or "" for a key."""
    from memlane.pipeline.config import default_data_dir

    cfg = tmp_path / "c.toml"
    cfg.write_text('default_project = "work"\n')
    blank = ("MEMLANE_DATA_DIR", "MEMLANE_DEFAULT_PROJECT", "MEMLANE_LLM__PROVIDER", "MEMLANE_LLM__API_KEY")
    for name in blank:
        monkeypatch.setenv(name, "")
    s = load(cfg)
    assert s.data_dir is None
    assert s.default_project == "work"  # the file's value stands
    assert s.llm.provider == "none" and s.llm.api_key is None
    assert Engine(s.engine(), embedder=object()).runtime.data_dir == default_data_dir()


def test_config_path_can_come_from_the_environment(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('default_project = "work"\n')
    monkeypatch.setenv("MEMLANE_CONFIG", str(cfg))
    assert load().default_project == "work"


def test_unknown_key_in_file_is_an_error_naming_the_key(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[recall]\ndefault_limt = 5\n")
    with pytest.raises(ConfigError, match=r"recall\.default_limt"):
        load(cfg)


def test_unknown_environment_variable_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("MEMLANE_RECAL__DEFAULT_LIMIT", "5")
    with pytest.raises(ConfigError, match="MEMLANE_RECAL__DEFAULT_LIMIT"):
        load()


def test_bad_value_names_the_key(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[server]\nport = 70000\n")
    with pytest.raises(ConfigError, match=r"server\.port"):
        load(cfg)


def test_secrets_in_the_file_are_refused(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[database]\nurl = "postgresql://u:hunter2@h/db"\n')
    with pytest.raises(ConfigError, match="MEMLANE_DATABASE__URL") as e:
        load(cfg)
    assert "hunter2" not in str(e.value)


def test_secret_from_environment_is_masked_but_reaches_the_engine(monkeypatch):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", "postgresql://u:hunter2@h/db")
    s = load()
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.model_dump())
    assert s.engine().database.url.get_secret_value() == "postgresql://u:hunter2@h/db"


def test_read_urls_come_from_the_environment_as_a_json_list_and_need_a_primary(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", "postgresql://u:pw@primary/db")
    monkeypatch.setenv("MEMLANE_DATABASE__READ_URLS", '["postgresql://u:hunter2@standby1/db"]')
    s = load()
    assert "hunter2" not in repr(s)
    assert [u.get_secret_value() for u in s.engine().database.read_urls] == [
        "postgresql://u:hunter2@standby1/db"
    ]
    assert masked_dump(s.engine())["database"]["read_urls"] == "set"
    cfg = tmp_path / "c.toml"
    cfg.write_text('[database]\nread_urls = ["postgresql://u:hunter2@standby1/db"]\n')
    with pytest.raises(ConfigError, match="MEMLANE_DATABASE__READ_URLS") as e:
        load(cfg)
    assert "hunter2" not in str(e.value)
    monkeypatch.delenv("MEMLANE_DATABASE__URL")
    with pytest.raises(ConfigError, match="read_urls needs database.url"):
        load()


def test_missing_and_malformed_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[recall\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(bad)


def test_secrets_are_found_by_type_and_masked_in_reports():
    assert set(secret_fields(Settings)) == {
        ("database", "url"),
        ("database", "read_urls"),
        ("embedding", "api_key"),
        ("llm", "api_key"),
        ("auth", "tokens"),
    }
    cfg = EngineConfig(database=DatabaseConfig(url=SecretStr("postgresql://u:hunter2@h/db")))
    dumped = masked_dump(cfg)
    assert dumped["database"]["url"] == "set" and dumped["embedding"]["api_key"] is None
    assert "hunter2" not in repr(dumped)


def test_settings_hand_the_engine_the_same_sections_with_the_real_secret():
    s = Settings(database=DatabaseConfig(url=SecretStr("postgresql://u:pw@h/db")))
    e = s.engine()
    assert type(e) is EngineConfig and "server" not in type(e).model_fields
    assert e.database is s.database and e.database.url.get_secret_value() == "postgresql://u:pw@h/db"


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("directives_max", "instructions_max", 4),
        ("directive_min_similarity", "instruction_min_similarity", 0.55),
    ],
)
def test_the_old_names_of_the_instructions_settings_are_still_read(tmp_path, monkeypatch, old, new, value):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[recall]\n{old} = {value}\n")
    with pytest.warns(FutureWarning, match=f"recall.{old} is deprecated: use recall.{new}"):
        from_file = load(cfg)
    assert getattr(from_file.recall, new) == value
    monkeypatch.setenv(f"MEMLANE_RECALL__{old.upper()}", str(value))
    with pytest.warns(FutureWarning, match=f"recall.{old} is deprecated"):
        from_env = load()
    assert getattr(from_env.recall, new) == value
    assert getattr(from_env.engine().recall, new) == value  # what the engine reads
    assert getattr(RecallConfig(), new) != value  # (the value is not the default)
    with pytest.warns(FutureWarning):  # both names: the new one wins
        assert getattr(RecallConfig.model_validate({old: value, new: 1}), new) == 1


def test_the_recall_steps_are_switched_in_their_section(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[recall.steps]\necho = false\n")
    with pytest.raises(ConfigError, match="recall.steps.echo"):
        load(cfg)
    cfg.write_text("[recall.steps]\nechoes = false\n")
    monkeypatch.setenv("MEMLANE_RECALL__STEPS__COVERAGE", "false")
    steps = load(cfg).recall.steps
    assert (steps.echoes, steps.coverage, steps.current_first, steps.instructions) == (
        False,
        False,
        True,
        True,
    )
