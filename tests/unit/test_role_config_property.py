"""One name for a role's model (`roles.<role>.model.<field>`): the config file's table and the flag's entry give the
same configuration, or both refuse it naming the same field; and what a role does not give is `[model]`'s."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.cli.fields import option_entry
from debate.cli.layers import resolve_config
from debate.config import ENDPOINT_FIELDS, ModelConfig, VerifierConfig
from debate.errors import UsageError
from tests.support.properties import Reached

_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "temperature": st.floats(-0.5, 2.5, allow_nan=False),
    "max_tokens": st.integers(0, 2000),
    "seed": st.integers(-5, 5),
    "model": st.sampled_from(["gpt-4o", "strong-1", "x"]),
    "base_url": st.sampled_from(["http://127.0.0.1:9/v1", "ftp://nope", "http://other:1/v1"]),
    "max_concurrency": st.integers(0, 40),
    "price_in": st.floats(-1, 20, allow_nan=False),
    "price_out": st.floats(-1, 20, allow_nan=False),
    "structured_output": st.sampled_from(["auto", "json_schema", "none", "yaml"]),
}
_ROLE = st.sampled_from(["initial", "trust", "skeptic", "leader"])
_ENTRIES = st.dictionaries(
    _ROLE, st.dictionaries(st.sampled_from(sorted(_VALUES)), st.none(), min_size=1, max_size=3), min_size=1, max_size=2
)


def _toml(value: Any) -> str:
    return json.dumps(value)  # numbers and strings are written alike in TOML and JSON


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # `reached` counts across the examples
@given(entries=_ENTRIES, data=st.data())
def test_the_file_and_the_flag_are_one_name(
    entries: dict[str, dict[str, None]], data: st.DataObject, tmp_path: Path, reached: Reached
) -> None:
    reached.require(accepted=0.1, refused=0.2)  # accepted: 25 to 33 of 100 examples in three runs
    given = {role: {f: data.draw(_VALUES[f], label=f"{role}.{f}") for f in fields} for role, fields in entries.items()}
    text = '[model]\nbase_url = "http://127.0.0.1:8/v1"\nmodel = "weak"\nprice_in = 1.0\nprice_out = 4.0\n'
    for role, fields in given.items():
        text += f"[roles.{role}.model]\n" + "".join(f"{f} = {_toml(v)}\n" for f, v in fields.items())
    assert tomllib.loads(text)  # the file is valid TOML: what differs is only where it is given
    path = tmp_path / "team.toml"
    path.write_text(text)
    flags: dict[str, Any] = {}
    for role, fields in given.items():
        for field, value in fields.items():
            flags = option_entry(flags, f"{role}.model.{field}={_toml(value)}", "--roles")
    base = tmp_path / "base.toml"
    base.write_text(text.split("[roles.")[0])
    outcomes: list[VerifierConfig | str] = []
    for file, layered in ((path, {}), (base, {"roles": (flags, "--roles")})):
        try:
            outcomes.append(resolve_config(file=file, flags=layered, environ={}).config)
        except UsageError as exc:
            # The field it names and why, whichever place gave the value (the file, or the flag).
            named = re.search(r"roles\.\w+\.model(\.\w+)?: .*", str(exc))
            outcomes.append(named.group(0) if named else str(exc))
    if isinstance(outcomes[0], str):
        reached("refused")
        assert outcomes[1] == outcomes[0], outcomes
        return
    reached("accepted")
    from_file, from_flags = outcomes
    assert not isinstance(from_flags, str) and not isinstance(from_file, str), (from_file, from_flags)
    assert from_file.roles == from_flags.roles
    for role, fields in given.items():
        resolved = from_file.model_for(role)
        for field in ModelConfig.model_fields:
            if field in fields:
                assert getattr(resolved, field) == fields[field], (role, field)
            elif field in ENDPOINT_FIELDS and resolved.base_url != from_file.model.base_url:
                assert getattr(resolved, field) is None, (role, field)  # another endpoint's, never [model]'s
            elif field in ("price_in", "price_out") and resolved.model != from_file.model.model:
                assert getattr(resolved, field) is None, (role, field)  # [model]'s price is its model's alone
            else:
                assert getattr(resolved, field) == getattr(from_file.model, field), (role, field)
