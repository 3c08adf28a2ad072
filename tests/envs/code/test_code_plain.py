"""The strict codec of values crossing the judge's sandbox boundary: round trips, and refusal of anything not plain."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.code.plain import NotPlain, decode_plain, encode_plain

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary() | st.complex_numbers()
HASHABLE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=8,
)
PLAIN = st.recursive(
    SCALARS | HASHABLE,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(HASHABLE, inner, max_size=4)
        | st.sets(HASHABLE, max_size=4)
    ),
    max_leaves=20,
)


def same(a, b) -> bool:
    """Equality with NaN equal to itself and exact types."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@given(PLAIN)
def test_plain_values_round_trip_through_json_with_their_exact_types(value):
    decoded = decode_plain(json.loads(json.dumps(encode_plain(value))))
    assert same(decoded, value)


class EqualStr(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [EqualStr("x"), Anything(), [1, Anything()], {"k": EqualStr("v")}, (True, object())])
def test_anything_not_exactly_a_builtin_is_refused(value):
    with pytest.raises(NotPlain):
        encode_plain(value)


def test_deep_nesting_is_refused_not_a_crash():
    value: list = []
    for _ in range(200):
        value = [value]
    with pytest.raises(NotPlain, match="too deep"):
        encode_plain(value)


@pytest.mark.parametrize(
    "data", [{"tuple": 1}, {"set": [1], "list": []}, {"float": "zero"}, {"dict": [[1]]}, {"unknown": []}, {"bytes": 3}]
)
def test_malformed_data_is_a_value_error(data):
    with pytest.raises(ValueError):
        decode_plain(data)


def test_a_dict_whose_keys_look_like_tags_stays_a_dict():
    # A returned {"tuple": [1, 2]} must not come back as the tuple (1, 2).
    value = {"tuple": [1, 2], "float": "nan"}
    assert decode_plain(json.loads(json.dumps(encode_plain(value)))) == value
