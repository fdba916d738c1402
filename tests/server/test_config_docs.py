"""config.example.toml and the configuration reference, rendered from the settings models.

The example file is checked like the generated docs pages (its cog block, ``make docs``); these
tests show that the check catches a changed default or description, that every line a reader may
uncomment is a valid setting, and that secrets are never given a value.
"""

import re
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from memlane.pipeline.config import RecallConfig, secret_fields
from memlane.pipeline.errors import ConfigError
from memlane.server import config_docs
from memlane.server.config_docs import example_toml, toml_value
from memlane.server.settings import Settings, load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.toml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("MEMLANE_"):
            monkeypatch.delenv(k)


def _cog_check(path: Path) -> int:
    cogapp = pytest.importorskip("cogapp", reason="the docs extra (cogapp) is not installed")
    return cogapp.Cog().main(["cog", "--check", str(path)])


def _generated(text: str) -> str:
    """The part of the file between the cog block's markers."""
    return text.split("]]]\n", 1)[1].rsplit("# [[[end]]]", 1)[0]


def test_the_committed_example_is_what_the_models_render():
    assert _generated(EXAMPLE.read_text(encoding="utf-8")) == example_toml()


def test_a_changed_description_or_default_makes_the_docs_check_fail(tmp_path, monkeypatch):
    copy = tmp_path / "config.example.toml"
    copy.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    assert _cog_check(copy) == 0

    with monkeypatch.context() as m:
        m.setattr(RecallConfig.model_fields["rrf_k"], "description", "A description changed in the model.")
        assert _cog_check(copy) == 5
        assert "# A description changed in the model." in example_toml()
    # A nested section's default is the one its parent holds.
    with monkeypatch.context() as m:
        m.setattr(Settings.model_fields["recall"].default, "default_limit", 11)
        assert _cog_check(copy) == 5
        assert "default_limit = 11" in example_toml()
    with monkeypatch.context() as m:
        m.setattr(Settings.model_fields["default_project"], "default", "elsewhere")
        assert _cog_check(copy) == 5
    assert _cog_check(copy) == 0


def _tables(text: str) -> list[tuple[str, str]]:
    """(table, line) for every line of the file, the table being the one the line is in."""
    table, out = "", []
    for line in text.splitlines():
        if m := re.fullmatch(r"\[([\w.]+)\]", line):
            table = m.group(1)
        out.append((table, line))
    return out


def _fields(table: str) -> dict:
    model: type[BaseModel] = Settings
    for part in filter(None, table.split(".")):
        model = model.model_fields[part].annotation
    return model.model_fields


def test_every_commented_out_example_is_a_valid_setting(tmp_path):
    """A reader uncomments a line to set it: each such line, alone, must load."""
    examples = 0
    for table, line in _tables(EXAMPLE.read_text(encoding="utf-8")):
        m = re.fullmatch(r"# (\w+) = (.+)", line)
        if not m or m.group(1) not in _fields(table):
            continue  # prose that happens to say "x = y"
        cfg = tmp_path / "one.toml"
        cfg.write_text((f"[{table}]\n" if table else "") + line[2:] + "\n", encoding="utf-8")
        settings = load(cfg)
        node = settings
        for part in filter(None, table.split(".")):
            node = getattr(node, part)
        assert getattr(node, m.group(1)) is not None, line
        examples += 1
    assert examples >= 15  # every setting unset by default has one


def test_every_setting_is_in_the_example_and_no_secret_has_a_value():
    text = EXAMPLE.read_text(encoding="utf-8")
    shown = set()
    for table, line in _tables(text):
        m = re.match(r"(# )?(\w+)( = |: a secret)", line)
        if m and m.group(2) in _fields(table):
            shown.add(f"{table}.{m.group(2)}".lstrip("."))
    keys = set()

    def walk(model, prefix=""):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                keys.add(prefix + name)

    walk(Settings)
    assert keys - shown == set()
    for path in secret_fields(Settings):
        table, key = ".".join(path[:-1]), path[-1]
        lines = [line for t, line in _tables(text) if t == table]
        assert not any(re.match(rf"#?\s*{key}\s*=", line) for line in lines), key
        env = "MEMLANE_" + "__".join(path).upper()
        assert f"# {key}: a secret, refused in this file: set {env} in the environment" in lines


def test_the_example_loads_and_yields_exactly_the_defaults():
    loaded = load(EXAMPLE)
    assert loaded.model_dump() == Settings().model_dump()
    # Not vacuous: the file sets values (a bare file would also give the defaults).
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert data["recall"]["default_limit"] == Settings().recall.default_limit
    assert data["filter"]["exclude_patterns"] == Settings().filter.exclude_patterns


def test_a_setting_unset_by_default_needs_an_example():
    class Section(BaseModel):
        with_example: str | None = Field(default=None, description="Shown.", examples=["x"])
        without: str | None = Field(default=None, description="Not shown.")

    class Root(BaseModel):
        part: Section = Section()

    with pytest.raises(ValueError, match=r"part\.without is unset by default and has no example"):
        example_toml(Root)


def test_a_new_field_appears_without_touching_the_generator():
    class Recall(RecallConfig):
        brand_new: int = Field(default=7, description="A setting nobody listed anywhere else.")

    class Root(BaseModel):
        recall: Recall = Recall()

    text = example_toml(Root)
    assert "# A setting nobody listed anywhere else.\nbrand_new = 7\n" in text
    assert tomllib.loads(text)["recall"]["brand_new"] == 7


@pytest.mark.parametrize(
    "value",
    [
        r"(you\x27?re welcome)",
        'it\'s "quoted"\nand two lines',
        {"a-b": 1.5, "with space": [1, 2], "nested": {"x": True}},
        [],
        {},
        0.1,
        -3,
    ],
)
def test_toml_values_read_back_as_written(value):
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


def test_an_unknown_key_in_a_copy_of_the_example_is_still_refused(tmp_path):
    """The generated file goes through the same loader as a user's: a typo is an error."""
    text = EXAMPLE.read_text(encoding="utf-8").replace("\nrrf_k = 60\n", "\nrrf_kk = 60\n")
    cfg = tmp_path / "typo.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"recall\.rrf_kk"):
        load(cfg)


def test_the_reference_lists_every_section():
    text = config_docs.reference_markdown()
    for table in ("`[database]`", "`[recall.decay]`", "`[llm.stages.<name>]`", "`[auth]`"):
        assert f"### {table}" in text
