"""Non-finite numbers leave every door as markers, never as the bare words JSON has no place for."""
import json
import math

from bt_exec.events.finite_json import dumps, finite


def strict_loads(text: str):
    def refuse(word):
        raise AssertionError(f"bare {word} in {text!r}")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_markers_at_any_depth():
    value = {"a": [1.5, float("nan"), (float("inf"), {"b": -math.inf})], "c": "NaN text stays"}
    assert strict_loads(dumps(value)) == {"a": [1.5, "NaN", ["Infinity", {"b": "-Infinity"}]], "c": "NaN text stays"}
    assert math.isnan(value["a"][1]), "the caller's value is left as it was"


def test_finite_values_encode_as_json_does():
    value = {"x": [1, 2.5, None, True, "é"], "y": {"z": -0.0}}
    assert dumps(value, ensure_ascii=False) == json.dumps(value, ensure_ascii=False)
    assert finite(value) == value


def test_a_deep_value_does_not_exhaust_the_stack():
    deep = float("nan")
    for _ in range(100_000):
        deep = [deep]
    walked = finite(deep)
    for _ in range(100_000):
        walked = walked[0]
    assert walked == "NaN"


def test_other_encoding_errors_are_not_swallowed():
    loop = []
    loop.append(loop)
    try:
        dumps(loop)
    except ValueError as exc:
        assert "Circular" in str(exc)
    else:
        raise AssertionError("a circular value must not encode")


def test_a_float_subclass_that_prints_otherwise_gets_its_marker():
    class Reading(float):  # as numpy's float64 prints: np.float64(nan)
        def __repr__(self):
            return f"Reading({float(self)!r})"

    assert strict_loads(dumps([Reading("nan"), Reading("inf"), Reading("-inf")])) == ["NaN", "Infinity", "-Infinity"]
