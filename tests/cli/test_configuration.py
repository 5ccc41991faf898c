"""One configuration: a flag, a config-file key and a Python field are one name; values come in layers (default, file,
environment, flag) and each remembers its source; `debate config show --format toml` reloads to the same digest;
old spellings warn once; configurations saved by earlier releases still load and resume their runs."""

from __future__ import annotations

import json
import logging
import math
import operator
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from debate.cli import build_parser
from debate.cli.aliases import ALIASES
from debate.cli.fields import COMMON, FIELDS, ConfigField
from debate.cli.layers import config_digest, config_toml, load_config_file, resolve_config
from debate.cli.options import resolved_config
from debate.config import PrefilterConfig, VerifierConfig
from debate.errors import UsageError
from experiments.runner import RunSpec, open_run_dir, recorded_digest
from tests.support.helpers import ROOT, debate
from tests.support.properties import Reached


def _args(*argv: str) -> Any:
    return build_parser(["verify"]).parse_args(["verify", *argv])


def _resolve(*argv: str, environ: dict[str, str] | None = None, config: Path | None = None) -> Any:
    args = _args(*argv, *(["--config", str(config)] if config else []))
    return resolve_config(file=args.config, flags=args.config_flags, fixed=args.config_fixed, environ=environ or {})


def test_every_field_is_one_name_for_the_flag_the_file_and_python() -> None:
    parser = build_parser(["verify"])
    verify = next(p for p in parser._subparsers._group_actions[0].choices.values() if p.prog == "debate verify")  # type: ignore[union-attr]
    flags = set(verify._option_string_actions)
    config = VerifierConfig()
    for path, field in FIELDS.items():
        # the flag is the path with hyphens (the spelling the help shows); the path's own spelling is the same flag
        assert field.flag == f"--{path.replace('_', '-')}" and field.flag in flags, path
        assert verify.spelled([f"--{path}"]) == [field.flag], path
        if not path.startswith("search."):  # search is None until configured
            operator.attrgetter(path)(config)  # the Python attribute path is the same name
    # every field of every section, nothing left out but what is not configuration (record_prompts)
    assert "debate.record_prompts" not in FIELDS and {"model.api_key", "prefilter.options", "rollup"} <= set(FIELDS)


def test_the_layers_and_their_sources(tmp_path: Path) -> None:
    file = tmp_path / "debate.toml"
    file.write_text('rollup = "major"\n[debate]\nmin_rounds = 3\nmax_rounds = 6\n[model]\nmodel = "from-file"\n')
    env = {"DEBATE_MODEL": "from-env", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    resolved = _resolve("--debate.max-rounds", "8", environ=env, config=file)
    config = resolved.config
    assert (config.rollup, config.debate.min_rounds, config.debate.max_rounds) == ("major", 3, 8)
    assert config.model.model == "from-env" and config.model.base_url == "http://127.0.0.1:9/v1"
    assert resolved.sources["rollup"] == f"file {file}"
    assert resolved.sources["debate.max_rounds"] == "flag --debate.max-rounds"
    assert resolved.sources["model.model"] == "environment DEBATE_MODEL"
    assert resolved.sources["debate.chain"] == "default"
    # a search key in the environment does not turn search on; with a backend configured it is its key
    assert _resolve(environ={"SERPER_API_KEY": "k"}).config.search is None
    searched = _resolve("--search.backend", "serper", environ={"SERPER_API_KEY": "k"})
    assert searched.config.search is not None and searched.config.search.api_key.get_secret_value() == "k"


def test_what_a_command_fixes_is_not_offered_and_wins() -> None:
    parser = build_parser(["ablate"])
    args = parser.parse_args(["ablate", "transitions"])
    assert args.config_fixed == {"debate.chain": "true-to-skeptic", "debate.min_rounds": 2}
    with pytest.raises(SystemExit):
        parser.parse_args(["ablate", "transitions", "--debate.min-rounds", "3"])
    assert resolved_config(args).sources["debate.min_rounds"] == "command"


@pytest.mark.parametrize(
    ("argv", "toml", "env", "expected"),
    [
        (["--debate.min-rounds", "-1"], "", {}, "--debate.min-rounds: Input should be greater than or equal to 0"),
        (["--min-rounds", "x"], "", {}, "--min-rounds: Input should be a valid integer"),
        ([], "[debate]\nmin_round = 2\n", {}, "debate.toml: debate.min_round: Extra inputs are not permitted"),
        ([], '[model]\ntemperature = "hot"\n', {}, 'debate.toml: model.temperature = "hot": expected a number'),
        ([], "[debate\n", {}, "not valid TOML: Expected ']' at the end of a table declaration (at line 1"),
        ([], "", {"OPENAI_BASE_URL": "ftp://x"}, "OPENAI_BASE_URL: must be an http(s) URL with a host"),
        (
            ["--debate.max-rounds", "1"],
            "",
            {},
            "min_rounds (2) must not exceed max_rounds (1) (set by --debate.max-rounds)",
        ),
    ],
)
def test_a_bad_value_is_named_where_it_was_set(
    tmp_path: Path, argv: list[str], toml: str, env: dict[str, str], expected: str
) -> None:
    file = tmp_path / "debate.toml"
    file.write_text(toml)
    with pytest.raises(UsageError) as caught:
        _resolve(*argv, environ=env, config=file if toml else None)
    assert expected in str(caught.value)


def test_old_spellings_set_the_field_and_warn_once(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING, "debate.cli")
    from debate.cli import aliases

    aliases._WARNED.clear()
    config = _resolve(
        "--min-rounds",
        "3",
        "--min-rounds",
        "4",
        "--max-parse-retries",
        "1",
        "--cache",
        str(tmp_path),
        "--prefilter",
        "rules,logprob",
        "--prefilter-option",
        "rules.invalid_citation_decides=true",
        "--trust-grounded",
        "--prompts-dir",
        "paper",
    )
    assert config.config.debate.min_rounds == 4 and config.sources["debate.min_rounds"] == "flag --min-rounds"
    assert config.config.debate.max_parse_retries == config.config.claims.max_parse_retries == 1
    assert config.config.call_cache == str(tmp_path / "calls.sqlite")
    assert config.config.prefilter.options == {
        "rules": {"invalid_citation_decides": True},
        "logprob": {"trust_grounded": True},
    }
    warned = [r.getMessage() for r in caplog.records if "old spelling" in r.getMessage()]
    assert warned.count("--min-rounds is the old spelling of --debate.min-rounds; it goes in the next release") == 1
    assert len(warned) == 7 and "--cache is the old spelling of --call-cache DIR/calls.sqlite" in warned[2]
    # every alias names a field, and none is offered as a suggestion
    assert all(path in FIELDS for alias in ALIASES for path in alias.paths)


@pytest.mark.slow  # runs the `debate` command
def test_brief_help_and_help_all() -> None:
    brief = debate("verify", "--help")
    # a screen: the common options, and the examples within 80 columns (a long one continues on its own line)
    assert brief.returncode == 0 and len(brief.stdout.splitlines()) < 66, brief.stdout
    assert all(FIELDS[path].flag in brief.stdout for path in COMMON)
    full = debate("verify", "--help-all")
    assert full.returncode == 0 and all(field.flag in full.stdout for field in FIELDS.values())
    assert "--min-rounds" in full.stdout and "now --debate.min-rounds" in " ".join(full.stdout.split())
    # a typo is answered with today's name, never an old spelling
    typo = debate("verify", "--debate.min_runds", "2")
    assert "did you mean --debate.min-rounds" in typo.stderr


@pytest.mark.slow  # runs the `debate` command
def test_config_show_round_trips_through_toml(tmp_path: Path) -> None:
    argv = ("--debate.min-rounds", "3", "--model.seed", "none", "--prefilter.prefilters", "all", "--rollup", "soft")
    shown = debate("config", "show", *argv, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    file = tmp_path / "resolved.toml"
    file.write_text(debate("config", "show", *argv, "--format", "toml").stdout)
    again = debate("config", "show", "--config", str(file), "--format", "json")
    assert json.loads(again.stdout)["digest"] == json.loads(shown.stdout)["digest"]
    text = debate("config", "show", "--config", str(file), "--debate.max-rounds", "9")
    assert "debate.max_rounds" in text.stdout and "(flag --debate.max-rounds)" in text.stdout
    assert f"(file {file})" in text.stdout and "digest: " in text.stdout


def _value(field: ConfigField) -> st.SearchStrategy[Any]:
    """A value the field takes, for the fields whose values are not names looked up elsewhere."""
    meta = {type(m).__name__: m for m in field.info.metadata}
    annotation = field.info.annotation
    if field.kind == "bool":
        return st.booleans()
    if field.choices:
        return st.sampled_from(field.choices)
    if annotation in (int, int | None):
        low = getattr(meta.get("Ge"), "ge", -(2**63))
        return st.integers(low, getattr(meta.get("Le"), "le", 2**63 - 1))
    if annotation in (float, float | None):
        low = getattr(meta.get("Ge"), "ge", None)
        high = getattr(meta.get("Le"), "le", None)
        return st.floats(
            low if low is not None else getattr(meta.get("Gt"), "gt", -1e6),
            high if high is not None else getattr(meta.get("Lt"), "lt", 1e6),
            exclude_min="Gt" in meta,
            exclude_max="Lt" in meta,
            allow_nan=False,
        )
    # free text (a model name, a prompt name, a path), any script, NUL included; never a lone surrogate
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


_FREE = [
    f
    for f in FIELDS.values()
    if not f.secret
    and f.kind in ("bool", "value")
    and not f.path.startswith(("search.", "telemetry.endpoint", "debate.stop", "debate.calibration"))
    and f.path not in ("model.base_url", "debate.chain", "prompt_set", "rollup", "team", "retrieval.retriever")
]


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_any_configuration_reloads_to_the_same_digest(tmp_path: Path, data: st.DataObject | None) -> None:
    values: dict[str, Any] = {}
    if data is not None:
        chosen = data.draw(st.lists(st.sampled_from(_FREE), max_size=12, unique_by=lambda f: f.path))
        values = {f.path: data.draw(_value(f)) for f in chosen}
        if values.get("debate.min_rounds", 0) > values.get("debate.max_rounds", 100):
            values["debate.min_rounds"], values["debate.max_rounds"] = (
                values["debate.max_rounds"],
                values["debate.min_rounds"],
            )
    else:
        values = {"model.seed": None, "claims.max_claims": None, "model.model": "a\x00b \u05e9"}
    try:
        config = resolve_config(fixed=values, environ={}).config
    except UsageError:
        return  # a combination the models refuse (checked elsewhere); the round trip is of valid ones
    file = tmp_path / "c.toml"
    file.write_text(config_toml(config), encoding="utf-8")
    again = resolve_config(file=file, environ={}).config
    assert config_digest(again) == config_digest(config)


EARLIER = sorted((ROOT / "results").glob("*/*/config.json"))


@pytest.mark.parametrize("saved", EARLIER, ids=[p.parent.name[-30:] for p in EARLIER])
def test_configurations_of_earlier_releases_still_load_and_resume(tmp_path: Path, saved: Path) -> None:
    recorded = json.loads(saved.read_text())
    spec = RunSpec.model_validate(recorded["spec"])  # 0.1's prefilter.mode and concurrency are migrated
    assert load_config_file(saved).values and resolve_config(file=saved, environ={}).config == spec.verifier
    # the run folder of an earlier release is found by its settings, although its name has that release's digest
    runs = tmp_path / "runs"
    shutil.copytree(saved.parent, runs / saved.parent.name)
    assert recorded_digest(runs / saved.parent.name) == spec.digest()
    assert open_run_dir(spec, out=None, runs_root=runs) == runs / saved.parent.name
    other = spec.model_copy(update={"verifier": spec.verifier.model_copy(update={"rollup": "soft"})})
    assert open_run_dir(other, out=None, runs_root=runs) != runs / saved.parent.name


_TOML_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.sampled_from([*FIELDS, *{p.split(".")[0] for p in FIELDS}, "verifier", "spec"]) | st.text(max_size=12)


def _bounds(field: ConfigField) -> tuple[float, float]:
    """The field's own range (its ge/gt/le/lt), clipped to small numbers: what a user who read the docs writes."""
    low, high = 0.0, math.inf
    for item in field.info.metadata:
        low = max(low, getattr(item, "ge", None) or 0, (getattr(item, "gt", None) or -1) + 0.01)
        high = min(high, getattr(item, "le", None) or high, (getattr(item, "lt", None) or high + 1) - 0.01)
    return low, min(high, low + 5)


def _typed(path: str) -> st.SearchStrategy[Any]:
    """A value of the field's own type and range, else (one draw in four) any value."""
    field = FIELDS.get(path)
    own: st.SearchStrategy[Any] = _TOML_VALUES
    if field is not None and field.core is bool:
        own = st.booleans()
    elif field is not None and field.core in (int, float):
        low, high = _bounds(field)
        own = st.integers(math.ceil(low), math.floor(high)) if field.core is int else st.floats(low, high)
    return st.integers(0, 3).flatmap(lambda k: _TOML_VALUES if k == 0 else own)


# the numbers and switches a file may set alone (search.* turns search on, which then needs a backend; a prior
# needs a calibration)
_SCALARS = st.sampled_from(
    sorted(
        p
        for p, f in FIELDS.items()
        if f.core in (int, float, bool) and not p.startswith("search.") and p != "debate.prior"
    )
)


# three keys in four a number or switch of the configuration, the fourth any key (a section, a typo, any text)
_CONFIG = st.lists(st.integers(0, 3).flatmap(lambda k: _KEYS if k == 0 else _SCALARS), max_size=4, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({key: _typed(key) for key in keys})
)


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """The file's values by dotted path, as a reader of the file sees them (tables opened, a field's table whole)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in FIELDS:
            out |= _leaves(value, f"{path}.")
        else:
            out[path] = value
    return out


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_CONFIG, flag=st.sampled_from([(), ("--debate.min-rounds", "1")]))
@example(data={"debate": 5}, flag=("--debate.min-rounds", "1"))
@example(data={"verifier": {"debate": {"min_rounds": "x"}}}, flag=())
@example(data={"\n": None}, flag=())  # a key that is a line break: named quoted, on one line
@example(data={"debate.min_rounds": True}, flag=())  # found: true was read as 1 round (issue 65)
@example(data={"claim_concurrency": 1, "verifier": {}}, flag=())  # found: a [verifier] table dropped the rest
@example(data={"debate.max_rounds": False, "claims.max_claims": 3}, flag=())
def test_any_config_file_is_a_configuration_or_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any], flag: tuple[str, ...], reached: Reached
) -> None:
    """Correct outcome: every number and switch the file sets is the configuration's value, from the file (the
    flag winning over it), and a true or false where a number goes is refused; or one line naming the problem. A
    twentieth of the examples at least are configurations."""
    import tomli_w

    reached.require(configuration=0.05)
    folder = tmp_path_factory.mktemp("cfg")
    nested: dict[str, Any] = {}
    for key, value in data.items():  # dotted keys as TOML tables, the way a user writes them
        node = nested
        *parents, leaf = key.split(".") if key else [key]
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[leaf] = value
    try:
        text = tomli_w.dumps({k: v for k, v in nested.items()})
    except (TypeError, ValueError):
        text = json.dumps(nested)  # None has no TOML form: the same settings as a JSON config
        file = folder / "c.json"
    else:
        file = folder / "c.toml"
    file.write_text(text, encoding="utf-8")
    written = _leaves(json.loads(json.dumps(nested)))
    args = _args("--config", str(file), *flag)
    try:
        resolved = resolve_config(file=args.config, flags=args.config_flags, environ={})
    except UsageError as exc:
        reached("refused")
        assert "\n" not in str(exc) and str(exc).strip()
        return
    reached("configuration")
    for path, value in written.items():
        field = FIELDS.get(path)
        if field is None or field.core not in (int, float, bool) or (flag and path == "debate.min_rounds"):
            continue
        got = operator.attrgetter(path)(resolved.config)
        assert resolved.sources[path] == f"file {file}", path
        assert isinstance(value, bool) == (field.core is bool) or value is None, (path, value, "accepted")
        assert got == value or (value is None and got is None) or got == pytest.approx(value), (path, value, got)
    if flag:
        assert (
            resolved.config.debate.min_rounds == 1
            and resolved.sources["debate.min_rounds"] == "flag --debate.min-rounds"
        )


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
@example(data=b"\xff\xfe[debate]")
@example(data=b"[debate]\nmin_rounds = 1e999\n")
def test_any_bytes_as_a_config_file_are_refused_in_one_line_or_read(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    file = tmp_path_factory.mktemp("cfg") / "c.toml"
    file.write_bytes(data)
    try:
        resolve_config(file=file, environ={})
    except UsageError as exc:
        assert "\n" not in str(exc) and str(exc).strip()


def test_the_built_in_stages_knobs_of_0_2_become_their_options() -> None:
    """0.2 wrote the built-in prefilters' knobs flat on `prefilter` and the citation reading there too: they load as
    each stage's options (a knob at 0.2's default, or of a prefilter not listed, is dropped: it had no effect)."""
    saved = {
        "prefilter": {
            "prefilters": ["rules", "logprob", "rag-judge"],
            "citation_variant": "occurrences",
            "invalid_citation_decides": False,
            "trust_grounded": True,
            "grounded_confidence": 0.8,
            "budget_unit": "bits",
            "judge_on": "always",
            "judge_two_step": True,
            "judge_model": "small",
        }
    }
    config = VerifierConfig.model_validate(saved)
    assert config.prefilter.options == {
        "logprob": {"trust_grounded": True, "budget_unit": "bits"},
        "rag-judge": {"when": "always", "two_step": True, "convert_model": "small"},
    }
    assert config.task_options == {"rag": {"citation_variant": "occurrences"}}
    unlisted = VerifierConfig.model_validate({"prefilter": {"prefilters": ["rules"], "trust_grounded": True}})
    assert unlisted.prefilter.options == {}
    with pytest.raises(ValueError, match=r"prefilter\.citation_variant is now task_options\.rag\.citation_variant"):
        PrefilterConfig.model_validate({"citation_variant": "occurrences"})


def test_stage_options_round_trip_through_the_config_file(tmp_path: Path) -> None:
    fixed = {
        "prefilter.prefilters": ["rules", "logprob"],
        "prefilter.options": {"logprob": {"trust_grounded": True, "top_logprobs": 5}},
        "task_options": {"rag": {"citation_variant": "occurrences"}},
        "rollup_options": {"soft": {"threshold": 0.25}},
    }
    config = resolve_config(fixed=fixed, environ={}).config
    file = tmp_path / "c.toml"
    file.write_text(config_toml(config), encoding="utf-8")
    assert "[prefilter.options.logprob]" in file.read_text() and "[task_options.rag]" in file.read_text()
    again = resolve_config(file=file, environ={}).config
    assert again == config and config_digest(again) == config_digest(config)


def test_the_built_in_stage_options_are_all_in_the_documented_table() -> None:
    from debate.plugins import PREFILTERS, ROLLUPS, TASKS, stage_options

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = {line.split("|")[2].strip(" `"): line.split("|")[3] for line in page.splitlines() if line.startswith("| ")}
    for registry in (PREFILTERS, TASKS, ROLLUPS):
        for name in registry.names():
            model = stage_options(registry, name)
            if model is None:
                assert name not in rows
                continue
            for key, info in model.model_fields.items():
                default = "none" if info.default is None else json.dumps(info.default)
                assert f"`{key}` ({default})" in rows[name], (name, key)
