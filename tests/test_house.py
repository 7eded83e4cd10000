"""The house's limits (issue 55; docs/architecture.md, "The house's figures"), counted by tools/house_figures.py:
a change that makes the code more expensive to change again fails here, named."""
from __future__ import annotations

import pytest

from tools.house_figures import FILE_CAP, FUNCTION_CAP, measure

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def house():
    return measure()


def test_json_is_written_and_read_in_few_places(house):
    assert len(house.json_files) <= 8, house.json_files
    assert "engine/wire/codec.py" in house.json_files   # the one codec: the counter still finds what it counts


def test_few_dict_reads_by_name(house):
    assert 0 < house.get_reads <= 40, house.get_reads


def test_the_engine_keeps_its_rooms(house):
    assert len(house.engine_top_level) <= 12, house.engine_top_level


def test_no_function_or_file_over_its_cap(house):
    assert not house.long_functions, f"functions over {FUNCTION_CAP} lines: {house.long_functions}"
    assert not house.long_files, f"files over {FILE_CAP} lines: {house.long_files}"


def test_no_arrow_runs_back_up(house):
    assert not house.window_controls, house.window_controls
    assert not house.engine_imports_splitscope, house.engine_imports_splitscope
