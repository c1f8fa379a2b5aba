"""Configuration errors a newcomer meets: every unknown key at every level is refused with the
nearest known key, every message starts with the file actually read, and bad YAML is one
sentence with file:line:column. No database is needed: the config is read before any work."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from eval_harness.settings import ConfigError, load_settings
from eval_harness.settings.judges import parse_judge_settings
from eval_harness_pipelines import cli
from paths import REPO

SHIPPED = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
# Levels whose keys are names the user chooses (a dataset, a model's price), not settings.
NAMED_LEVELS = {("datasets",), ("judges", "prices")}


@pytest.fixture
def other(tmp_path, monkeypatch):
    """Write ``other.yaml`` in a fresh working directory; load_settings reads it by that name."""
    monkeypatch.chdir(tmp_path)

    def write(content) -> str:
        text = content if isinstance(content, str) else yaml.safe_dump(content)
        (tmp_path / "other.yaml").write_text(text, encoding="utf-8")
        return "other.yaml"
    return write


def load_error(path: str) -> str:
    with pytest.raises(ConfigError) as error:
        load_settings(path, environ={})
    message = str(error.value)
    assert "\n" not in message, message
    return message


def mapping_paths(node, prefix=()):
    """Every (path, mapping) of the YAML tree whose keys are settings (not chosen names)."""
    if not isinstance(node, dict):
        return
    if prefix not in NAMED_LEVELS:
        yield prefix, node
    for key, value in node.items():
        yield from mapping_paths(value, (*prefix, str(key)))


def at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def parse(config: dict, folder: Path):
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return load_settings(path, environ={})


# --- unknown keys ------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize(("content", "key", "suggestion"), [
    ("hybrid_serch:\n  semantic: 0.5\n", "hybrid_serch", "hybrid_search"),
    ("hybrid_search:\n  semantc: 0.5\n", "hybrid_search.semantc", "hybrid_search.semantic"),
    ("store: {embeded_pgdata: x}\n", "store.embeded_pgdata", "store.embedded_pgdata"),
    ("embedder: {modle: m}\n", "embedder.modle", "embedder.model"),
    ("history: {duckdb: h.duckdb}\n", "history.duckdb", "history.duckdb_path"),
    ("dagster: {hoem: d}\n", "dagster.hoem", "dagster.home"),
    ("dagster: {nightly: {timezon: UTC}}\n", "dagster.nightly.timezon",
     "dagster.nightly.timezone"),
    ("datasets:\n  mine: {path: data, langauge: german}\n", "datasets.mine.langauge",
     "datasets.mine.language"),
    ("datasets:\n  mine: {pth: data}\n", "datasets.mine.pth", "datasets.mine.path"),
    ("agreement: {kappa_flor: 0.6}\n", "agreement.kappa_flor", "agreement.kappa_floor"),
    ("calibration: {grid: {steps: 0.1}}\n", "calibration.grid.steps", "calibration.grid.step"),
    ("quality_gates: {gates: {answer_reward: {treshold: 0.2}}}\n",
     "quality_gates.gates.answer_reward.treshold", "quality_gates.gates.answer_reward.threshold"),
    ("judges: {budget: 3}\n", "judges.budget", "judges.budget_usd"),
    ("judges: {retry: {max_retrys: 2}}\n", "judges.retry.max_retrys", "judges.retry.max_retries"),
    ("judges: {prices: {my-model: {input: 1, output: 2, cached: 0.5}}}\n",
     "judges.prices.my-model.cached", "judges.prices.my-model.cached_input"),
])
def test_an_unknown_key_names_itself_the_nearest_key_and_the_file(other, content, key,
                                                                    suggestion):
    message = load_error(other(content))
    assert message.startswith(f"other.yaml: unknown key '{key}' "
                              f"(did you mean '{suggestion}'?); known "), message
    assert message.endswith(".")
    leaf = suggestion.rsplit(".", 1)[-1]
    assert re.search(rf"known (top-level )?keys.*\b{re.escape(leaf)}\b", message)


def test_every_level_of_the_shipped_config_refuses_a_misspelt_key(tmp_path):
    """For each settings mapping of config.yaml (top level included), one extra misspelt key
    beside the real ones is refused, named in full with the real key as the suggestion."""
    levels = list(mapping_paths(SHIPPED))
    assert len(levels) > 20  # the walk reaches the nested sections
    for path, mapping in levels:
        real = next(iter(mapping))
        config = copy.deepcopy(SHIPPED)
        at(config, path)[f"{real}x"] = at(config, path)[real]
        dotted = ".".join((*path, f"{real}x"))
        with pytest.raises(ConfigError) as error:
            parse(config, tmp_path)
        expected = ".".join((*path, real))
        assert f"unknown key '{dotted}' (did you mean '{expected}'?)" in str(error.value), \
            (dotted, str(error.value))


@pytest.mark.unit
def test_several_unknown_keys_are_named_together_and_a_far_one_gets_no_guess(other):
    message = load_error(other("zzz: 1\nhybrid_serch: {}\n"))
    assert message.startswith("other.yaml: unknown keys 'zzz', 'hybrid_serch' "
                              "(did you mean 'hybrid_search'?); known top-level keys: store, ")
    assert "'zzz' (did you mean" not in message


def dataset_holding(rest: tuple[str, ...], documented: list[tuple[str, ...]]) -> dict:
    """A shipped dataset entry that has the key ``rest``; for a key the harness writes (a
    dataset's calibrated ``hybrid_search``), the ingested entry given the global values of
    ``rest`` and of its documented siblings."""
    for entry in SHIPPED["datasets"].values():
        try:
            at(entry, rest)
        except (KeyError, TypeError):
            continue
        return copy.deepcopy(entry)
    entry = copy.deepcopy(next(e for e in SHIPPED["datasets"].values() if "path" in e))
    for key in [k for k in documented if k[:-1] == rest[:-1]]:
        node = entry
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = copy.deepcopy(at(SHIPPED, key))
    return entry


@pytest.mark.unit
def test_the_shipped_config_and_every_key_of_the_manual_table_load(tmp_path):
    settings = load_settings(REPO / "config.yaml", environ={})
    assert settings.config_path == REPO / "config.yaml"
    page = (REPO / "docs" / "reference" / "config-file.md").read_text(encoding="utf-8")
    table = page.split("Environment variables:", 1)[0]
    keys = []
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        cell = row.split("|")[1]
        names = re.findall(r"`([^`]+)`", cell)
        base = names[0].rsplit(".", 1)[0]
        keys += [f"{base}{name}" if name.startswith(".") else name for name in names]
    assert "hybrid_search.keyword" in keys and "dagster.nightly.timezone" in keys
    assert len(keys) >= 15
    for key in keys:
        path = tuple(key.removesuffix(".*").split("."))
        if path[0] == "datasets":  # <name>: a shipped dataset (live or ingested) with the key
            documented = [tuple(k.split(".")[2:]) for k in keys if k.startswith("datasets.")]
            parse({"datasets": {"documented": dataset_holding(path[2:], documented)}},
                  tmp_path)
            continue
        config: dict = {}
        node = config
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = copy.deepcopy(at(SHIPPED, path))
        parse(config, tmp_path)  # every key the manual documents is known


@pytest.mark.unit
def test_judges_section_parsed_alone_names_its_source():
    with pytest.raises(ConfigError, match=r"^team\.yaml: unknown key 'judges\.concurency' "
                                          r"\(did you mean 'judges\.concurrency'\?\)"):
        parse_judge_settings({"concurency": 4}, {}, source="team.yaml")


# --- the file actually read --------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize(("content", "rest"), [
    ("hybrid_search: {semantic: 2.0}\n", "hybrid_search weights must lie in [0, 1]."),
    ("hybrid_search: 3\n", "'hybrid_search' must be a mapping."),
    ("agreement: {kappa_floor: 2}\n", "'agreement.kappa_floor' must lie in [-1, 1]."),
    ("calibration: {grid: {step: 0.005}}\n",
     "'calibration.grid.step' must lie between 0.01 and 1."),
    ("quality_gates: {gates: {answer_reward: {threshold: -2}}}\n",
     "'quality_gates.gates.answer_reward.threshold' must lie in [-1, 1]."),
    ("judges: {concurrency: 0}\n", "'judges.concurrency' must be an integer >= 1, got 0."),
    ("dagster: {nightly: {cron: '0 2 *'}}\n",
     "'dagster.nightly.cron' must have five fields, got '0 2 *'."),
    ("datasets: {mine: {language: german}}\n",
     "'datasets.mine' needs a 'path' (an ingested BEIR folder) or a 'live' mapping onto your "
     "own tables."),
    ("- a list\n", "the top level must be a mapping of keys."),
])
def test_every_message_starts_with_the_file_that_was_read(other, content, rest):
    assert load_error(other(content)) == f"other.yaml: {rest}"


@pytest.mark.unit
def test_bad_yaml_is_one_sentence_with_line_and_column(other):
    text = ("store:\n  embedded_pgdata: x\nhybrid_search:\n  semantic: 0.7\n  keyword: 0.3\n"
            "datasets:\n  a: b: c\n")
    # line 7 is "  a: b: c"; the second ':' (column 7) is where a mapping value may not start
    assert load_error(other(text)) == ("other.yaml:7:7: not valid YAML: mapping values are "
                                       "not allowed here.")


@pytest.mark.unit
def test_an_unconfigured_dataset_names_the_file(other):
    path = other("datasets:\n  mine: {path: data}\n")
    settings = load_settings(path, environ={})
    with pytest.raises(ConfigError) as error:
        settings.dataset("theirs")
    assert str(error.value) == (f"{Path(path).resolve()}: dataset 'theirs' is not configured "
                                "under datasets (configured: mine).")


@pytest.mark.unit
def test_the_command_prints_the_file_and_the_suggestion_in_one_line(other, capsys):
    path = other("hybrid_serch:\n  semantic: 0.5\n")
    code = cli.main(["--config", path, "report"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == ("eval-harness: error: other.yaml: unknown key 'hybrid_serch' (did you mean "
                   "'hybrid_search'?); known top-level keys: store, default_dataset, datasets, "
                   "embedder, hybrid_search, agreement, calibration, history, quality_gates, ci, "
                   "judges, ground_truth, dagster.\n")


@pytest.mark.unit
@pytest.mark.parametrize(("relation", "column", "fragment"), [
    ("rag.l2 insights", "content", "'datasets.live.live.corpus.relation' must be a table or "
                                   "view name as SQL writes it"),
    ('"open.quote', "content", "'datasets.live.live.corpus.relation'"),
    ("db.rag.l2_insights", "content", "'datasets.live.live.corpus.relation'"),
    ("rag.l2_insights", "body text", "'datasets.live.live.corpus.content' must be a column "
                                     "name as SQL writes it"),
    ("rag." + "x" * 5000, "content", "…"),  # a long value is cut, not echoed whole
])
def test_a_name_sql_cannot_read_is_one_sentence(other, relation, column, fragment):
    message = load_error(other({"datasets": {"live": {
        "embedder": "local:m", "live": {
            "corpus": {"relation": relation, "id": "id", "content": column,
                       "embedding": "embedding"},
            "queries": {"relation": "rag.q", "id": "id", "query": "query"}}}}}))
    assert fragment in message and len(message) < 400, message


# --- the one formatter: each kind of refusal pydantic reports, as one sentence ------------

@pytest.mark.unit
@pytest.mark.parametrize(("content", "rest"), [
    ("judges: {grid_pool: 1}\n", "'judges.grid_pool' must be true or false, got 1."),
    ("judges: {shards: 2.5}\n", "'judges.shards' must be an integer >= 1, got 2.5."),
    ("judges: {shards: true}\n", "'judges.shards' must be an integer >= 1, got True."),
    ("judges: {timeout_seconds: fast}\n", "'judges.timeout_seconds' must be a number, got 'fast'."),
    ("judges: {timeout_seconds: .nan}\n", "'judges.timeout_seconds' must be a number, got nan."),
    ("judges: {timeout_seconds: 0}\n", "'judges.timeout_seconds' must be > 0, got 0."),
    ("judges: {max_tokens: {grounding: 0}}\n",
     "'judges.max_tokens.grounding' must be an integer >= 1, got 0."),
    ("judges: {temperatures: {reflexion: 3}}\n",
     "'judges.temperatures.reflexion' must lie in [0, 2]."),
    ("judges: {prices: {m: {input: 1, output: -2}}}\n",
     "'judges.prices.m.output' must be >= 0, got -2."),
    ("judges: {retry: 3}\n", "'judges.retry' must be a mapping."),
    ("agreement: {confidence: 1}\n", "'agreement.confidence' must lie strictly between 0 and 1."),
    ("agreement: {disagreement_threshold: 1}\n",
     "'agreement.disagreement_threshold' must lie in [0, 1)."),
    ("agreement: {stand_in_judges: maybe}\n",
     "'agreement.stand_in_judges' must be warn or block, got 'maybe'."),
    ("quality_gates: {partition_start: soon}\n",
     "'quality_gates.partition_start' must be a date YYYY-MM-DD, got 'soon'."),
    ("store: {schema: My-Schema}\n",
     "'store.schema' must be a lower-case schema name (letters, digits, _), got 'My-Schema'."),
    ("datasets: {prod: {embedder: local:m, live: {corpus: {relation: r, id: id}, "
     "queries: {relation: q, id: id, query: q}}}}\n",
     "'datasets.prod.live.corpus.content' is missing."),
    ("judges: {rate_limits: {gemini: {requests_per_minute: 5}}}\n",
     "unknown key 'judges.rate_limits.gemini'; known keys of 'judges.rate_limits': openai, "
     "anthropic."),
])
def test_each_kind_of_refusal_is_one_sentence_naming_the_key(other, content, rest):
    assert load_error(other(content)) == f"other.yaml: {rest}"


@pytest.mark.unit
def test_an_unknown_key_is_named_before_a_bad_value_elsewhere(other):
    message = load_error(other("judges: {shards: 0}\nagreement: {kapa_floor: 0.5}\n"))
    assert message.startswith("other.yaml: unknown key 'agreement.kapa_floor' (did you mean "
                              "'agreement.kappa_floor'?)"), message


@pytest.mark.unit
def test_a_budget_from_the_environment_names_its_variable(tmp_path):
    with pytest.raises(ConfigError, match=r"^'EVAL_HARNESS_JUDGE_BUDGET_USD' must be a number "
                                          r"of USD or none, got 'lots'\.$"):
        parse_judge_settings({}, {"EVAL_HARNESS_JUDGE_BUDGET_USD": "lots"}, source=None)
