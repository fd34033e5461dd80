"""An error's advice in the words of its entry point (dpframe.core.advice, issue 32)."""

from __future__ import annotations

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.core.advice import advise, current_entry, entry, spec_entry
from dpframe.core.neighbours import require_substitute
from dpframe.errors import InvalidDataError, InvalidParameterError


def test_python_is_the_default_and_an_entry_holds_only_inside():
    assert current_entry() == "python"
    with entry("spec"):
        assert advise(python="p", spec="s", cli="c") == "s"
        with entry("cli"):
            assert advise(python="p", spec="s", cli="c") == "c"
            assert advise(python="p", spec="s") == "s"  # a command takes the spec's names
        assert current_entry() == "spec"
    assert advise(python="p", spec="s", cli="c") == "p"
    with pytest.raises(ValueError, match="entry"), entry("java"):  # type: ignore[arg-type]
        pass


def test_spec_entry_advises_in_the_spec_words_even_when_it_raises():
    @spec_entry
    def refuse() -> None:
        require_substitute("add_remove", "pram", argument="release 'micro'")

    with pytest.raises(InvalidParameterError, match=r'privacy\.neighbours = "substitute"'):
        refuse()
    with pytest.raises(InvalidParameterError, match="Use an accountant with"):
        require_substitute("add_remove", "pram", argument="release 'micro'")


def test_a_command_does_not_leave_its_words_behind(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["ledger", "show", "missing.db"])
    assert res.exit_code != 0 and "missing.db" in res.output
    assert current_entry() == "python"
    frame = pl.DataFrame({"region": ["N", "X"]})
    with dpframe.Accountant(epsilon=1.0), pytest.raises(InvalidDataError) as refused:
        dpframe.group_by(frame, "region", margins=pl.DataFrame({"region": ["N"]})).agg(
            dpframe.agg.count(epsilon=0.5)
        ).collect()
    assert "pass unknown_keys='drop'" in str(refused.value)
