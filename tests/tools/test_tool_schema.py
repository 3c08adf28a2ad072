"""The JSON-schema subset validator: each keyword, the messages a model reads, and rejected schemas."""

from __future__ import annotations

import pytest

from tools.schema import SchemaError, check_schema, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2, "maxLength": 20, "pattern": "^[A-Z]"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "unit": {"type": "string", "enum": ["km", "mi"]},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": True},
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["city", "count"],
    "additionalProperties": False,
}


def test_valid_arguments_have_no_problems():
    assert validate({"city": "Bramholt", "count": 3, "ratio": 0.5, "unit": "km", "tags": ["a", "b"]}, SCHEMA) == []
    assert validate({"city": "Bo", "count": 10, "flag": False, "maybe": None}, SCHEMA) == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"count": 3}, "arguments.city is required but missing"),
        ({"city": "Bo", "count": "3"}, 'arguments.count must be an integer, got string "3"'),
        ({"city": "Bo", "count": True}, "arguments.count must be an integer, got boolean true"),
        ({"city": "Bo", "count": 2.5}, "arguments.count must be an integer, got number 2.5"),
        ({"city": "Bo", "count": 0}, "arguments.count must be >= 1, got 0"),
        ({"city": "Bo", "count": 11}, "arguments.count must be <= 10, got 11"),
        ({"city": "Bo", "count": 1, "ratio": 1}, "arguments.ratio must be < 1, got 1"),
        ({"city": "Bo", "count": 1, "ratio": 0}, "arguments.ratio must be > 0, got 0"),
        ({"city": "Bo", "count": 1, "unit": "m"}, 'arguments.unit must be one of "km", "mi", got "m"'),
        ({"city": "bo", "count": 1}, "arguments.city must match the pattern '^[A-Z]', got \"bo\""),
        ({"city": "B", "count": 1}, "arguments.city must have at least 2 characters, got 1"),
        ({"city": "Bo", "count": 1, "tags": []}, "arguments.tags must have at least 1 items, got 0"),
        ({"city": "Bo", "count": 1, "tags": ["a", "a"]}, "arguments.tags must not repeat items"),
        ({"city": "Bo", "count": 1, "tags": ["a", 7]}, "arguments.tags[1] must be a string, got integer 7"),
        ({"city": "Bo", "count": 1, "maybe": 3}, "arguments.maybe must be a string or null, got integer 3"),
        ({"city": "Bo", "count": 1, "speed": 3}, "arguments.speed is not an accepted argument (accepted: city,"),
    ],
)
def test_each_violation_is_reported_with_its_location(arguments, problem):
    problems = validate(arguments, SCHEMA)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_all_problems_are_reported_together():
    problems = validate({"count": "x", "unit": "yd"}, SCHEMA)
    assert len(problems) == 3  # city missing, count's type, unit's enum


def test_integral_floats_are_integers_and_booleans_are_not_numbers():
    # JSON cannot tell 3 from 3.0; Python's bool is an int subclass but JSON's true is no number.
    assert validate(3.0, {"type": "integer"}) == []
    assert validate(True, {"type": "number"}) == ["arguments must be a number, got boolean true"]
    assert validate(1, {"enum": [True]}) != [] and validate(1.0, {"enum": [1]}) == []


def test_additional_properties_schema_and_nested_objects():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validate({"a": 1, "b": "2"}, schema) == ['arguments.b must be an integer, got string "2"']
    nested = {"type": "object", "properties": {"p": {"type": "object", "required": ["q"]}}}
    assert validate({"p": {}}, nested) == ["arguments.p.q is required but missing"]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "oneOf": []}, "unsupported keywords ['oneOf']"),
        ({"type": "dict"}, "unknown type 'dict'"),
        ({"type": "object", "properties": {"x": {"type": "float"}}}, "schema.properties.x: unknown type 'float'"),
        ({"type": "string", "pattern": "("}, "not a valid regular expression"),
        ({"type": "object", "required": "x"}, "required must be a list"),
        ([], "must be a JSON object"),
    ],
)
def test_check_schema_rejects_what_it_cannot_enforce(schema, message):
    with pytest.raises(SchemaError, match=message.replace("[", r"\[").replace("(", r"\(")):
        check_schema(schema)


def test_check_schema_accepts_the_subset_with_annotations():
    check_schema({**SCHEMA, "description": "d", "title": "t", "$comment": "c"})
