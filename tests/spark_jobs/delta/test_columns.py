"""Which column names a snapshot refuses before anything is written (spark_jobs.delta.columns)."""

import pytest

from spark_jobs.delta.columns import check_column_names
from spark_jobs.errors import ConfigError


@pytest.mark.parametrize("name, says", [("a b", "cannot be recorded"), ("a.b", "cannot be recorded"),
                                        ("_change_type", "reserved"), ("*", "plain column names"),
                                        ("say`hi`", "plain column names")])
def test_a_name_the_trip_cannot_carry_is_refused_by_name(name, says):
    with pytest.raises(ConfigError, match=says):
        check_column_names(["id", name], "Snapshot t")


def test_names_with_quotes_stars_and_other_scripts_are_data():
    check_column_names(["id", "o'neil", 'say"hi"', "漢字", "_mine", "a*b", "**"], "Snapshot t")
