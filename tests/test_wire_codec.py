"""engine/wire/codec.py: the one codec. A message reads back as its type; a garbled one is refused naming its
channel, its tag and the field; a tag this end does not know is None; a newer peer's field is ignored."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from engine.wire import codec

pytestmark = pytest.mark.quick


@dataclass(frozen=True)
class Inner:
    name: str
    size: int = 0


@dataclass(frozen=True)
class Outer:
    id: int
    share: float
    inner: Inner | None = None
    inners: list[Inner] = field(default_factory=list)
    by_device: dict[str, Inner] = field(default_factory=dict)
    losses: list[float | None] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    anything: dict = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    sizes: list[int] = field(default_factory=list)


CHANNEL = codec.Channel("the test channel", "kind", {"outer": Outer, "inner": Inner})


def test_a_message_reads_back_as_its_type():
    message = Outer(3, 0.5, Inner("a", 1), [Inner("b")], {"cpu:0": Inner("c", 2)}, [1.0, None], [[1, "x"]],
                    {"free": [1, {"x": None}]})
    assert CHANNEL.read(CHANNEL.line(message)) == message
    assert CHANNEL.decode({"kind": "outer", "id": 1, "share": 2}).share == 2.0   # a whole number is a float
    assert isinstance(CHANNEL.decode({"kind": "outer", "id": 1, "share": 2}).share, float)


def test_json_has_no_nan_so_a_float_that_was_one_reads_back_nan():
    line = codec.dumps(CHANNEL.encode(Outer(1, math.nan, losses=[math.inf, 1.0])), finite=True)
    assert "NaN" not in line and "Infinity" not in line
    back = CHANNEL.read(line)
    assert math.isnan(back.share) and back.losses == [None, 1.0]   # where None is allowed it is None
    # Between our own ends they travel as Python writes them: an infinite learning rate reaches its validation.
    assert codec.loads(codec.dumps({"lr": math.inf}), "x") == {"lr": math.inf}


def test_a_null_where_a_field_has_a_default_is_the_field_left_out():
    assert CHANNEL.decode({"kind": "outer", "id": 1, "share": 1.0, "inners": None, "inner": None}) == Outer(1, 1.0)
    with pytest.raises(codec.WireError, match="id is not int"):
        CHANNEL.decode({"kind": "outer", "id": None, "share": 1.0})


def test_an_unknown_tag_is_none_and_a_newer_peers_field_is_ignored():
    assert CHANNEL.decode({"kind": "telepathy"}) is None and CHANNEL.decode({"kind": []}) is None
    assert CHANNEL.decode({"kind": "inner", "name": "a", "from_a_newer_peer": 1}) == Inner("a")


def test_plain_containers_are_checked_item_by_item_only_where_an_item_is_not_of_jsons_own_types():
    class Count(int):
        pass
    back = CHANNEL.decode({"kind": "outer", "id": 1, "share": 1.0, "counts": {"a": Count(2)}, "sizes": [Count(3), 4],
                           "shares": {"a": 1, "b": 0.5, "c": None}})
    assert back.counts == {"a": 2} and back.sizes == [3, 4]   # a subclass passes, looked at one by one
    assert back.shares["a"] == 1.0 and isinstance(back.shares["a"], float) and math.isnan(back.shares["c"])
    for garbled in ({"counts": {"a": True}}, {"counts": {1: 2}}, {"sizes": [1, 2.5]}, {"shares": {"a": "x"}},
                    {"shares": {"a": False}}):
        name = next(iter(garbled))
        with pytest.raises(codec.WireError, match=f"outer's {name} is not") as caught:
            CHANNEL.decode({"kind": "outer", "id": 1, "share": 1.0, **garbled})
        assert caught.value.field == name


def test_a_unions_options_are_tried_in_its_own_order_though_equal_unions_compare_equal():
    @dataclass
    class IntFirst:
        x: int | float

    @dataclass
    class FloatFirst:
        x: float | int
    assert codec.typed(IntFirst, {"x": 3}, "c").x == 3 and isinstance(codec.typed(IntFirst, {"x": 3}, "c").x, int)
    assert isinstance(codec.typed(FloatFirst, {"x": 3}, "c").x, float)


@pytest.mark.parametrize("data, field_name, words", [
    ({"kind": "outer", "share": 1.0}, "id", "outer message without id"),
    ({"kind": "outer", "id": "1", "share": 1.0}, "id", "outer's id is not int"),
    ({"kind": "outer", "id": True, "share": 1.0}, "id", "outer's id is not int"),
    ({"kind": "outer", "id": 1, "share": 1.0, "inner": {"size": 1}}, "inner.name", "without name"),
    ({"kind": "outer", "id": 1, "share": 1.0, "inners": [{"name": 3}]}, "inners.name", "name is not str"),
    ({"kind": "outer", "id": 1, "share": 1.0, "by_device": {"cpu:0": 1}}, "by_device", "is not an object"),
    ({"kind": "outer", "id": 1, "share": 1.0, "rows": [1]}, "rows", r"rows is not list\[list\]"),
])
def test_a_garbled_message_is_refused_naming_the_channel_the_tag_and_the_field(data, field_name, words):
    with pytest.raises(codec.WireError, match=words) as caught:
        CHANNEL.decode(data)
    assert caught.value.channel == "the test channel" and str(caught.value).startswith("the test channel: ")
    assert caught.value.tag == "outer" and caught.value.field == field_name


def test_text_that_is_no_json_and_an_untagged_answer_of_another_shape_are_refused_naming_the_channel():
    with pytest.raises(codec.WireError, match="the test channel: not JSON"):
        CHANNEL.read("{no")
    with pytest.raises(codec.WireError, match="the test channel: not a JSON object"):
        CHANNEL.read("[1]")
    assert codec.read(Inner, '{"name": "a"}', "an answer") == Inner("a")
    with pytest.raises(codec.WireError, match="an answer: Inner's size is not int") as caught:
        codec.read(Inner, '{"name": "a", "size": 1.5}', "an answer")
    assert caught.value.field == "size" and caught.value.tag is None


def test_the_value_of_a_garbled_field_is_never_in_the_error():
    with pytest.raises(codec.WireError) as caught:
        CHANNEL.decode({"kind": "inner", "name": "a", "size": "SECRET"})
    assert "SECRET" not in str(caught.value)
