"""Which config file a command read: one line on stderr, before any work, unless
``--config`` named it, so that ``report`` run from a folder without a config file does not
start a new embedded store there without a word."""

from __future__ import annotations

import pytest

from eval_harness_pipelines import cli


@pytest.fixture
def elsewhere(tmp_path, monkeypatch, store):
    """A working directory without config.yaml; the store is the test database."""
    folder = tmp_path / "somewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    monkeypatch.delenv("EVAL_HARNESS_PGDATA", raising=False)
    monkeypatch.setenv("DATABASE_URL", store.url)
    return folder


def _config_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("eval-harness: config:")]


def test_no_config_file_is_said_in_one_line_with_what_the_defaults_mean(elsewhere, capsys):
    code = cli.main(["report"])
    err = capsys.readouterr().err
    [line] = _config_lines(err)
    assert line.startswith(f"eval-harness: config: none (no config.yaml in {elsewhere}, "
                           "EVAL_HARNESS_CONFIG unset): defaults apply, with the store at "
                           "DATABASE_URL")
    assert err.index(line) == 0  # said before anything else
    assert code == 2  # the default dataset is in no store here: one sentence after it


def test_without_database_url_the_line_names_the_embedded_store_it_would_start(
        elsewhere, monkeypatch, capsys):
    monkeypatch.delenv("DATABASE_URL")
    # an unknown dataset stops `search` before a store is opened: nothing is started here
    code = cli.main(["search", "--dataset", "nope", "--k", "0", "text"])
    [line] = _config_lines(capsys.readouterr().err)
    assert code == 2
    assert f"an embedded store in {elsewhere / '.eval-harness' / 'pgdata'}" in line
    assert not (elsewhere / ".eval-harness").exists()


def test_a_found_or_environment_config_is_named_and_a_given_one_is_not(elsewhere, monkeypatch,
                                                                       capsys):
    config = elsewhere / "config.yaml"
    config.write_text("default_dataset: nope\n", encoding="utf-8")
    cli.main(["report"])
    [line] = _config_lines(capsys.readouterr().err)
    assert line == f"eval-harness: config: {config} (found in the working directory)"

    other = elsewhere / "other.yaml"
    other.write_text("default_dataset: nope\n", encoding="utf-8")
    monkeypatch.setenv("EVAL_HARNESS_CONFIG", str(other))
    cli.main(["report"])
    [line] = _config_lines(capsys.readouterr().err)
    assert line == f"eval-harness: config: {other} (from EVAL_HARNESS_CONFIG)"

    cli.main(["--config", str(other), "report"])  # named on the command line: no line
    assert _config_lines(capsys.readouterr().err) == []


def test_doctor_says_it_in_its_config_line(elsewhere, capsys):
    cli.main(["doctor", "--offline"])
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.split()[1:2] == ["config"]]
    assert line.startswith("warn  config       none (no config.yaml in ")
