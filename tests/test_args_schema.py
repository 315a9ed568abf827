"""The args check: its compiled fast pass never takes what jsonschema (Draft 2020-12) refuses."""
import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from bt_exec.compilers.args_schema import ArgsSchema

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from(["", "a", "ab c", "x1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["step", "name", "n", "x"]), inner,
                                                                max_size=3),
    max_leaves=8)

SHARED_SCHEMAS = [
    {"type": "object", "required": ["step"], "properties": {"step": {"type": "integer", "minimum": 1}},
     "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "pattern": "^[a-z]"},
                                      "n": {"type": "number", "exclusiveMaximum": 3}}},
    {"type": "object", "properties": {"x": {"type": "array", "items": {"type": ["integer", "null"]}, "maxItems": 2,
                                            "uniqueItems": True}}, "minProperties": 1},
    {"anyOf": [{"type": "object", "required": ["n"]}, {"type": "object", "maxProperties": 0}]},
    {"type": "object", "properties": {"name": {"enum": ["a", "x1", None]}}, "not": {"required": ["x"]}},
]


@pytest.mark.parametrize("schema", SHARED_SCHEMAS)
@settings(max_examples=300, derandomize=True, deadline=None)
@given(instance=json_values)
def test_same_verdict_as_jsonschema(schema, instance):
    checked = ArgsSchema(schema)
    assert checked._fast_valid is not None  # these schemas do take the fast pass
    assert (checked.problems(instance) == []) == jsonschema.Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}},  # annotation in 2020-12
    {"type": "array", "prefixItems": [{"type": "integer"}]},                                  # not in Draft 7
    {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
    {"properties": {"n": {"enum": [1, 2]}}},                                                 # 1 == True in Python
    {"properties": {"flag": {"const": False}}},
])
def test_other_schemas_go_to_jsonschema_alone(schema):
    checked = ArgsSchema(schema)
    assert checked._fast_valid is None
    assert checked.problems({"n": True, "flag": 0}) == [
        (f"/{e.path[0]}" if e.path else "", e.message)
        for e in sorted(jsonschema.Draft202012Validator(schema).iter_errors({"n": True, "flag": 0}),
                        key=lambda e: list(e.absolute_path))]


def test_problems_name_where_and_what():
    checked = ArgsSchema(SHARED_SCHEMAS[0])
    assert checked.problems({"step": 0, "extra": 1}) == [
        ("", "Additional properties are not allowed ('extra' was unexpected)"),
        ("/step", "0 is less than the minimum of 1")]
