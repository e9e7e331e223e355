"""Settings: config file in the home, HOOKLINE_* overrides, clear errors, the TOML writer."""

from __future__ import annotations

import math
import os
import pickle
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hookline.builtins.config import (
    DEFAULT_MAX_STEPS,
    Settings,
    SettingsError,
    dumps_toml,
    load_settings,
    merge_config,
    misplaced_settings,
    parse_setting,
    rewritten,
    setting_env,
    settings_from_config,
    update_config,
    write_config,
)
from hookline.builtins.config.table import BY_KEY
from hookline.kernel.errors import ErrorKind, HooklineError


def config(home: Path, text: str) -> Path:
    """The config file, private as `hookline onboard` writes it (it may hold a key)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_defaults(tmp_path: Path) -> None:
    s = load_settings({}, home=tmp_path)
    assert s.home == tmp_path
    assert s.config_path == tmp_path / "config.toml"
    assert s.model is None and s.model_spec == "offline" and s.models == []
    assert s.fallback_models == ()
    assert s.api_key is None and s.api_base is None and s.api_format is None
    assert s.max_steps == DEFAULT_MAX_STEPS == 20
    assert s.max_tokens is None
    assert s.tape_store == tmp_path / "tapes.db"
    assert s.stream is True
    assert set(s.sources.values()) == {"default"}
    assert s.extra == {}


def test_home_from_environment_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings({"HOOKLINE_HOME": str(tmp_path)}).home == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert load_settings({}).home == tmp_path / "user" / ".hookline"
    assert load_settings({"HOOKLINE_HOME": str(tmp_path)}, home=tmp_path / "x").home == (
        tmp_path / "x"
    )


def test_reads_os_environ_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path))
    monkeypatch.setenv("HOOKLINE_MAX_STEPS", "7")
    s = load_settings()
    assert s.home == tmp_path and s.max_steps == 7


def test_file_values(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        """
model = "openai:gpt-4o-mini"
fallback_models = ["ollama:llama3", "openai:gpt-4o-mini"]
api_key = "sk-file"
api_base = "http://localhost:8000/v1/"
api_format = "chat"
max_steps = 5
max_tokens = 1000
tape_store = "data/tapes.db"
stream = false

[plugins.demo]
colour = "blue"
""",
    )
    s = load_settings({}, home=tmp_path)
    assert s.model == "openai:gpt-4o-mini"
    assert s.fallback_models == ("ollama:llama3", "openai:gpt-4o-mini")
    assert s.models == ["openai:gpt-4o-mini", "ollama:llama3"]
    assert s.api_key == "sk-file"
    assert s.api_base == "http://localhost:8000/v1"
    assert (s.api_format, s.max_steps, s.max_tokens, s.stream) == ("chat", 5, 1000, False)
    assert s.tape_store == tmp_path / "data" / "tapes.db", "relative to the home in the file"
    assert s.sources["model"] == f"file:{path}"
    assert s.extra == {"plugins": {"demo": {"colour": "blue"}}}


def test_environment_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config(tmp_path, 'model = "openai:gpt-4o-mini"\nmax_steps = 5\nstream = false\n')
    monkeypatch.chdir(tmp_path)
    env = {
        "HOOKLINE_MODEL": "openai-compatible:local",
        "HOOKLINE_FALLBACK_MODELS": " ollama:a , ,ollama:b,ollama:a",
        "HOOKLINE_API_KEY": "sk-env",
        "HOOKLINE_API_BASE": "https://example.test/v1",
        "HOOKLINE_API_FORMAT": "Responses",
        "HOOKLINE_MAX_STEPS": "12",
        "HOOKLINE_MAX_TOKENS": "256",
        "HOOKLINE_TAPE_STORE": "rel.db",
        "HOOKLINE_STREAM": "YES",
    }
    s = load_settings(env, home=tmp_path)
    assert s.model == "openai-compatible:local"
    assert s.fallback_models == ("ollama:a", "ollama:b")
    assert s.api_key == "sk-env"
    assert s.api_base == "https://example.test/v1"
    assert s.api_format == "responses"
    assert (s.max_steps, s.max_tokens, s.stream) == (12, 256, True)
    assert s.tape_store == tmp_path / "rel.db", "relative to the working directory in env"
    assert s.sources["max_steps"] == "env:HOOKLINE_MAX_STEPS"


def test_empty_environment_variables_count_as_unset(tmp_path: Path) -> None:
    config(tmp_path, "max_steps = 3\n")
    s = load_settings({"HOOKLINE_MAX_STEPS": "", "HOOKLINE_MODEL": "  "}, home=tmp_path)
    assert s.max_steps == 3 and s.model is None


def test_blank_optional_strings_in_file_are_unset(tmp_path: Path) -> None:
    config(tmp_path, 'model = ""\napi_key = ""\napi_base = " "\n')
    s = load_settings({}, home=tmp_path)
    assert (s.model, s.api_key, s.api_base) == (None, None, None)


def test_api_key_is_not_in_repr(tmp_path: Path) -> None:
    s = load_settings({"HOOKLINE_API_KEY": "sk-secret"}, home=tmp_path)
    assert "sk-secret" not in repr(s)


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("HOOKLINE_MAX_STEPS", "abc", "HOOKLINE_MAX_STEPS must be a positive integer, got 'abc'"),
        ("HOOKLINE_MAX_STEPS", "0", "HOOKLINE_MAX_STEPS must be a positive integer, got '0'"),
        ("HOOKLINE_MAX_TOKENS", "-5", "HOOKLINE_MAX_TOKENS must be a positive integer"),
        ("HOOKLINE_MODEL", "gpt-4o", "HOOKLINE_MODEL must be a model spec 'provider:model'"),
        ("HOOKLINE_FALLBACK_MODELS", "a:b,nocolon", "HOOKLINE_FALLBACK_MODELS must be a list"),
        ("HOOKLINE_API_BASE", "localhost:8000", "HOOKLINE_API_BASE must be an http:// or https://"),
        ("HOOKLINE_API_FORMAT", "soap", "HOOKLINE_API_FORMAT must be one of chat, responses"),
        ("HOOKLINE_STREAM", "maybe", "HOOKLINE_STREAM must be true or false, got 'maybe'"),
    ],
)
def test_invalid_environment_values(tmp_path: Path, var: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({var: value}, home=tmp_path)
    error = caught.value
    assert expected in error.message
    assert f"(from the environment variable {var})" in error.message
    assert f"Fix: set {var}=" in error.message
    assert error.source == f"env:{var}" and error.value == value
    assert isinstance(error, HooklineError) and error.kind is ErrorKind.config
    assert error.details is not None and error.details["key"] == error.key


@pytest.mark.parametrize(
    ("line", "key", "expected"),
    [
        ('max_steps = "abc"', "max_steps", "max_steps must be a positive integer, got 'abc'"),
        ("max_steps = true", "max_steps", "got True"),
        ("stream = 3", "stream", "stream must be true or false, got 3"),
        ('model = "nocolon"', "model", "model must be a model spec"),
        ("fallback_models = 3", "fallback_models", "must be a list"),
        ("api_key = 42", "api_key", "api_key must be a string, got <hidden, 2 characters>"),
    ],
)
def test_invalid_file_values(tmp_path: Path, line: str, key: str, expected: str) -> None:
    path = config(tmp_path, line + "\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    error = caught.value
    assert expected in error.message
    assert f"(from {path})" in error.message
    assert f"Fix: write {key} = " in error.message and "or remove the line" in error.message
    assert error.key == key and error.source == f"file:{path}"


def test_unknown_plain_key_suggests_the_known_one(tmp_path: Path) -> None:
    path = config(tmp_path, 'modle = "openai:gpt-4o"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    message = caught.value.message
    assert "Unknown setting 'modle'" in message and str(path) in message
    assert "Did you mean 'model'?" in message


def test_a_plugin_s_table_may_hold_a_key_named_like_a_setting(tmp_path: Path) -> None:
    """`[plugins.summary] model = ...` is the plugin's own: only the tables hookline reads
    (rules, MCP servers) say a setting landed in them (`misplaced_settings`)."""
    config(tmp_path, 'model = "offline"\n[plugins.summary]\nmodel = "openai:gpt-4o-mini"\n')
    settings = load_settings({}, home=tmp_path)
    assert settings.extra["plugins"] == {"summary": {"model": "openai:gpt-4o-mini"}}
    assert misplaced_settings(["max_steps", "note"]) == (
        "; max_steps is a setting, which TOML puts in this table when written below its "
        "header: move it above the file's first [table] or [[table]] header")
    assert misplaced_settings(["note"]) == ""


def test_a_mistyped_choice_is_answered_with_the_one_it_is_near(tmp_path: Path) -> None:
    path = config(tmp_path, 'approval = "on-reqest"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    assert ("got 'on-reqest' (from " f"{path}). Did you mean 'on-request'? Fix: write "
            'approval = "on-request" in') in caught.value.message
    config(tmp_path, "")
    with pytest.raises(SettingsError) as caught:
        load_settings({"HOOKLINE_SANDBOX": "read_onl"}, home=tmp_path)
    assert caught.value.message.endswith(
        "Did you mean 'read-only'? Fix: set HOOKLINE_SANDBOX=read-only, or unset it.")
    with pytest.raises(SettingsError) as caught:
        load_settings({"HOOKLINE_SANDBOX": "zzz"}, home=tmp_path)
    assert "Did you mean" not in caught.value.message


def test_a_setting_below_a_table_setting_s_header_is_named(tmp_path: Path) -> None:
    """`model = "fast"` appended after `[model_aliases]` lands in that table: the error
    says so, where the table's own fix (write it as a table) would not help."""
    config(tmp_path, '[model_aliases]\nfast = "openai:gpt-4o-mini"\nmodel = "fast"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    assert caught.value.message.endswith(
        "Fix: model is a setting, which TOML puts in this table when written below its "
        "header: move it above the file's first [table] or [[table]] header.")


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = config(tmp_path, "model = \n")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    assert f"The config file {path} is not valid TOML" in caught.value.message
    assert "line 1" in caught.value.message
    config(tmp_path, "a = " + "[" * 20_000)
    with pytest.raises(SettingsError, match="is not valid TOML: it nests too deep"):
        load_settings({}, home=tmp_path)


def test_unreadable_config(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir(parents=True)
    with pytest.raises(SettingsError, match=r"config\.toml is not a regular file"):
        load_settings({}, home=tmp_path)


def test_settings_error_pickles() -> None:
    error = SettingsError("bad", key="max_steps", source="env:HOOKLINE_MAX_STEPS", value="x")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.key, copy.source, copy.value) == (
        "bad",
        "max_steps",
        error.source,
        "x",
    )
    assert copy.kind is ErrorKind.config
    assert str(copy) == "[config] bad"


def test_settings_is_frozen(tmp_path: Path) -> None:
    s = Settings(home=tmp_path)
    with pytest.raises(AttributeError):
        s.model = "x"  # type: ignore[misc]


# The TOML writer --------------------------------------------------------------------------


def test_write_config_round_trips_and_is_private(tmp_path: Path) -> None:
    data: dict[str, Any] = {
        "model": "openai:gpt-4o-mini",
        "api_key": 'sk-"quoted"\\back\nline\ttab\x01',
        "max_steps": 9,
        "ratio": 0.25,
        "big": 1e300,
        "stream": False,
        "fallback_models": ["a:b", "c:d"],
        "nested": [[1, 2], ["x"]],
        "inline": [{"name": "t", "n": 1}],
        "skipped": None,
        "plugins": {"demo": {"colour": "blue", "deep": {"on": True}}, "empty": {}},
        "odd key": {"ünï": "code"},
    }
    path = write_config(tmp_path / "sub" / "config.toml", data)
    assert path == tmp_path / "sub" / "config.toml"
    assert os.stat(path).st_mode & 0o777 == 0o600
    expected = {key: value for key, value in data.items() if value is not None}
    assert tomllib.loads(path.read_text(encoding="utf-8")) == expected
    assert not [p for p in path.parent.iterdir() if p.name != "config.toml"], "no temp files"


def test_written_config_loads_as_settings(tmp_path: Path) -> None:
    write_config(tmp_path / "config.toml", {"model": "ollama:llama3", "max_steps": 4})
    s = load_settings({}, home=tmp_path)
    assert (s.model, s.max_steps) == ("ollama:llama3", 4)


def test_special_floats() -> None:
    text = dumps_toml({"a": math.inf, "b": -math.inf, "c": math.nan})
    loaded = tomllib.loads(text)
    assert loaded["a"] == math.inf and loaded["b"] == -math.inf and math.isnan(loaded["c"])


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"when": object()}, TypeError),
        ({1: "x"}, TypeError),
        ({"n": 2**64}, ValueError),
        ({"t": {"deep": {3: 1}}}, TypeError),
    ],
)
def test_unsupported_values(data: dict[Any, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        dumps_toml(data)


def test_update_config_merges_and_removes(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    write_config(path, {"model": "a:b", "max_steps": 3, "plugins": {"x": {"k": 1, "j": 2}}})
    result = update_config(path, {"max_steps": None, "api_key": "k", "plugins": {"x": {"j": 5}}})
    assert result == {"model": "a:b", "api_key": "k", "plugins": {"x": {"k": 1, "j": 5}}}
    assert tomllib.loads(path.read_text()) == result
    assert update_config(tmp_path / "new" / "config.toml", {"model": "c:d"}) == {"model": "c:d"}


def test_a_config_file_that_is_a_link_stays_one(tmp_path: Path) -> None:
    """Dotfiles kept with stow: the file the link names is written, the link stays."""
    dotfiles = tmp_path / "dotfiles" / "config.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text('model = "a:b"  # mine\n')
    link = tmp_path / "home" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    update_config(link, {"max_steps": 4})
    assert link.is_symlink() and link.resolve() == dotfiles
    assert dotfiles.read_text() == 'model = "a:b"  # mine\nmax_steps = 4\n'


COMMENTED = """\
# my models
model = "openai:gpt-4o"  # the main one
max_steps = 10

# never push from the agent
[[rules]]
action = "deny"  # I push myself
tool = "shell"
command = "git push"

[mcp_servers.files]
command = "npx"
"""


def test_a_rewrite_keeps_the_file_s_comments_and_layout(tmp_path: Path) -> None:
    """`hookline onboard` and `hookline mcp add` rewrite the user's file: what they do not
    change stays as the user wrote it ([[rules]] as an array of tables, not inline)."""
    path = config(tmp_path, COMMENTED)
    result = update_config(path, {"model": "offline", "max_steps": None,
                                  "mcp_servers": {"web": {"url": "http://127.0.0.1:9/mcp"}}})
    text = path.read_text()
    assert tomllib.loads(text) == result and "max_steps" not in text
    assert text.startswith('# my models\nmodel = "offline"  # the main one\n')
    assert '# never push from the agent\n[[rules]]\naction = "deny"  # I push myself\n' in text
    assert "[mcp_servers.web]" in text and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_table_s_comment_stays_above_it_when_another_goes_or_keys_come(
        tmp_path: Path) -> None:
    """The comment right above a table's header is the table's: removing the table before
    it keeps it (and takes that table's own), and settings added go above it."""
    path = config(tmp_path, 'model = "offline"\n\n# about alpha\n[mcp_servers.alpha]\n'
                            'command = "a"\n\n# about beta\n[mcp_servers.beta]\n'
                            'command = "b"\n')
    update_config(path, {"mcp_servers": {"alpha": None}, "api_base": "http://127.0.0.1:9"})
    text = path.read_text()
    assert "about alpha" not in text
    assert text.index("api_base") < text.index("# about beta\n[mcp_servers.beta]")


_keys = st.text(min_size=0, max_size=8)
_scalars = (
    st.text(max_size=20)
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=10)
_tables = st.recursive(
    st.dictionaries(_keys, _values, max_size=4),
    lambda inner: st.dictionaries(_keys, _values | inner, max_size=4),
    max_leaves=12,
)


@hsettings(max_examples=200, deadline=None)
@given(_tables)
def test_dumps_toml_round_trips(data: dict[str, Any]) -> None:
    assert tomllib.loads(dumps_toml(data)) == data


@hsettings(max_examples=200, deadline=None)
@given(_tables, _tables)
def test_a_rewrite_holds_exactly_the_new_tables(old: dict[str, Any], new: dict[str, Any]) -> None:
    text = rewritten(dumps_toml(old).encode(), new)
    assert text is None or tomllib.loads(text) == new


def test_api_key_env_names_the_variable_read_when_api_key_is_unset(tmp_path: Path) -> None:
    path = config(tmp_path, 'api_key_env = "MY_KEY"\n')
    s = load_settings(environ={}, home=tmp_path)
    assert s.api_key_env == "MY_KEY" and s.api_key is None
    assert s.resolved_api_key({"MY_KEY": " sk-from-env "}) == "sk-from-env"
    with pytest.raises(SettingsError) as info:
        s.resolved_api_key({})
    assert "MY_KEY" in info.value.message and str(path) in info.value.message
    assert info.value.key == "api_key_env"
    both = load_settings(environ={"HOOKLINE_API_KEY": "sk-direct"}, home=tmp_path)
    assert both.resolved_api_key({}) == "sk-direct", "api_key wins over api_key_env"
    assert Settings(home=tmp_path).resolved_api_key({}) is None
    env = load_settings(environ={"HOOKLINE_API_KEY_ENV": "OTHER"}, home=tmp_path)
    assert env.api_key_env == "OTHER" and env.sources["api_key_env"] == "env:HOOKLINE_API_KEY_ENV"


def test_api_key_env_must_be_a_variable_name(tmp_path: Path) -> None:
    config(tmp_path, 'api_key_env = "$MY KEY"\n')
    with pytest.raises(SettingsError, match="api_key_env must be the name of an environment"):
        load_settings(environ={}, home=tmp_path)


def test_parse_setting_checks_one_value_without_a_file() -> None:
    assert parse_setting("api_base", "http://localhost:11434/v1/") == "http://localhost:11434/v1"
    assert parse_setting("model", "offline") == "offline"
    with pytest.raises(SettingsError) as info:
        parse_setting("api_base", "localhost:11434")
    assert info.value.message == ("api_base must be an http:// or https:// URL, got "
                                  "'localhost:11434'")
    with pytest.raises(SettingsError, match="provider:model"):
        parse_setting("model", "gpt-4o")
    with pytest.raises(SettingsError, match="hidden"):
        parse_setting("api_key", 42)
    with pytest.raises(SettingsError, match="Unknown setting 'modle'"):
        parse_setting("modle", "x")


def test_settings_from_config_resolves_data_not_yet_written(tmp_path: Path) -> None:
    data = {"model": "openai:gpt-4o-mini", "tape_store": "t.db", "plugins": {"x": {"k": 1}}}
    s = settings_from_config(data, {"HOOKLINE_MAX_STEPS": "4"}, tmp_path)
    assert (s.model, s.max_steps, s.tape_store) == ("openai:gpt-4o-mini", 4, tmp_path / "t.db")
    assert s.extra == {"plugins": {"x": {"k": 1}}}
    assert not (tmp_path / "config.toml").exists()
    with pytest.raises(SettingsError, match="Unknown setting 'modle'"):
        settings_from_config({"modle": "x"}, {}, tmp_path)


def test_merge_config_leaves_its_input_alone() -> None:
    base = {"model": "a:b", "plugins": {"x": {"k": 1}}}
    merged = merge_config(base, {"model": None, "plugins": {"x": {"j": 2}}})
    assert merged == {"plugins": {"x": {"k": 1, "j": 2}}}
    assert base == {"model": "a:b", "plugins": {"x": {"k": 1}}}


def test_a_config_file_that_is_a_fifo_or_huge_is_refused_not_read(tmp_path: Path) -> None:
    import os
    import threading

    from hookline.builtins.config import MAX_CONFIG_BYTES, SettingsError, load_settings

    os.mkfifo(tmp_path / "config.toml")
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_settings(environ={"HOOKLINE_HOME": str(tmp_path)})
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(5)
    assert outcome, "a FIFO as the config file blocked"
    assert isinstance(outcome[0], SettingsError)
    assert "is not a regular file" in str(outcome[0]) and "config.toml" in str(outcome[0])

    os.unlink(tmp_path / "config.toml")
    (tmp_path / "config.toml").write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(SettingsError, match=f"is over {MAX_CONFIG_BYTES} bytes"):
        load_settings(environ={"HOOKLINE_HOME": str(tmp_path)})


@pytest.mark.parametrize("loose", [0o640, 0o604])
def test_a_config_with_a_secret_that_group_or_others_can_read_is_refused(
        tmp_path: Path, loose: int) -> None:
    path = config(tmp_path, 'api_key = "sk-file"\n')
    path.chmod(loose)
    with pytest.raises(SettingsError) as info:
        load_settings({}, home=tmp_path)
    assert info.value.message == (
        f"The config file {path} holds api_key and other users can read it (mode "
        f"{loose:04o}); run `chmod 600 {path}`.")
    assert "sk-file" not in str(info.value)
    path.chmod(0o600)
    assert load_settings({}, home=tmp_path).api_key == "sk-file"
    write_config(path, {"api_key": "sk-new"})  # what onboard writes is private
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


ROOT = Path(__file__).resolve().parents[3]
_NAMED = re.compile(r"""setting_env\(\s*["']([^"']+)["']\s*\)""")


def test_a_message_names_a_setting_s_variable_from_the_table() -> None:
    """Messages name a setting's variable with `setting_env(key)`: every key the sources
    pass is a setting, so renaming one fails here rather than in an error path."""
    assert setting_env("max_steps") == "HOOKLINE_MAX_STEPS"
    with pytest.raises(KeyError):
        setting_env("no_such_setting")
    named = sorted({(str(path.relative_to(ROOT)), key)
                    for folder in ("builtins", "cli", "testing")
                    for path in (ROOT / folder).rglob("*.py")
                    for key in _NAMED.findall(path.read_text("utf-8"))})
    assert len(named) > 10, "setting_env calls are no longer found: update the pattern"
    assert [f"{path}: {key}" for path, key in named if key not in BY_KEY] == []


def test_a_bad_alias_is_named_not_the_model_that_uses_a_good_one(tmp_path: Path) -> None:
    config(tmp_path, 'model = "x"\n[model_aliases]\nx = "openai-compatible:m"\ny = "bad spec"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    assert caught.value.message.startswith("model_aliases must be ")
    config(tmp_path, 'model = "x"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({"HOOKLINE_MODEL_ALIASES": "x=openai-compatible:m,y=bad spec"},
                      home=tmp_path)
    assert caught.value.message.startswith("HOOKLINE_MODEL_ALIASES must be ")
