"""`debate new-key` writes only what it printed (issue 73): a name is a documented alphabet, so `eve:admin` or a
name with a line break cannot make the keys line say another user, role or key; every keys line is written and
read by one module (markov_debate.desk.auth), and a line with more fields than it knows is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.cli import main
from debate.errors import UsageError
from markov_debate.desk.auth import find_key, guard_key_table, hash_key, key_line, load_keys, new_key
from tests.support.properties import Reached


def _new_key(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(["new-key", name, "submitter"])
    except SystemExit as exc:  # argparse refuses the name
        code = int(str(exc.code))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["eve:admin", "", "eve\nmallory:admin:x", "eve admin", "é", "x" * 65])
def test_a_name_outside_the_alphabet_is_refused_and_nothing_is_written(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _new_key(name, capsys)
    assert code == 2 and out == ""
    assert "1 to 64 of A-Z, a-z, 0-9" in err and "Traceback" not in err


def test_the_line_new_key_writes_admits_only_the_key_it_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _new_key("eve", capsys)
    assert code == 0
    key = err.rsplit(": ", 1)[1].strip()
    keys = tmp_path / "keys.txt"
    keys.write_text(out)
    [loaded] = load_keys(keys, env="")
    assert (loaded.name, loaded.role) == ("eve", "submitter")
    assert find_key([loaded], key) is loaded
    # the text after the role is the key's hash, never a key: presenting it gets nothing
    assert find_key([loaded], out.strip().split(":", 2)[2]) is None


def test_a_keys_line_with_more_fields_than_it_knows_is_refused(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("eve:admin:submitter:sha256:" + "0" * 64 + "\n")
    with pytest.raises(UsageError, match=r"keys.txt:1: more fields than NAME:ROLE:KEY"):
        load_keys(keys, env="")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=70), st.from_regex(r"[A-Za-z0-9_.@-]{1,64}", fullmatch=True)))
def test_any_name_is_refused_or_reads_back_as_itself(name: str, reached: Reached) -> None:
    reached.require(refused=0.05, written=0.2)  # one_of draws each side about half; text is refused mostly
    key = new_key()
    try:
        line = key_line(name, "reviewer", key)
    except UsageError:
        reached("refused")
        return
    [loaded] = load_keys(None, env=line)
    assert (loaded.name, loaded.role) == (name, "reviewer") and find_key([loaded], key) is loaded
    assert "\n" not in line and line.count(":") == 3
    reached("written")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.from_regex(r"[A-Za-z0-9_.@-]{1,64}", fullmatch=True), min_size=1, max_size=4, unique=True))
def test_guard_tables_appended_to_a_guard_config_admit_only_their_keys(
    names: list[str], tmp_path_factory: pytest.TempPathFactory, reached: Reached
) -> None:
    """`debate new-key NAME --for guard >> guard.toml`, for several names: the guard reads each table as that name
    and the key printed for it, and nothing else (the file needs no field cut out of a keys line)."""
    reached.require(read=0.9)
    from markov_debate.guard.cli import _file_settings
    from markov_debate.guard.settings import GuardSettings

    keys = {name: new_key() for name in names}
    config = tmp_path_factory.mktemp("guard") / "guard.toml"
    config.write_text('policy = "flag"\n' + "".join(guard_key_table(n, k) + "\n" for n, k in keys.items()))
    settings = GuardSettings.model_validate({**_file_settings(config), "upstream": "http://u/v1", "db_url": "x"})
    for name, key in keys.items():
        found = settings.key_for(key)
        assert found is not None and found.name == name
    assert {k.name for k in settings.keys} == set(names) and settings.key_for(hash_key(keys[names[0]])) is None
    reached("read")


def test_new_key_for_the_guard_prints_a_table_and_refuses_a_role(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-key", "support-bot", "--for", "guard"]) == 0
    out, err = capsys.readouterr()
    key = err.rsplit(": ", 1)[1].strip()
    assert out == f'[keys."support-bot"]\nsha256 = "{hash_key(key)}"\n'
    assert main(["new-key", "support-bot", "reviewer", "--for", "guard"]) == 2
    assert main(["new-key", "alice"]) == 2
    assert "needs a ROLE" in capsys.readouterr().err
