"""sagemaker_serving.config.settings' parsers: each kind of variable text, accepted and refused."""

from __future__ import annotations

import pytest

from sagemaker_serving.config import settings as ev

STRATEGIES = ("MULTI_RECORD", "SINGLE_RECORD")

ACCEPTED = [
    (ev.integer(1, 65535), {"1": 1, "65535": 65535, "+4": 4, "0001": 1}),
    (ev.integer(0, ev.INT64_MAX), {"0": 0, str(ev.INT64_MAX): ev.INT64_MAX}),
    (ev.boolean, {"TRUE": True, "False": False, "true": True, "FALSE": False}),
    (ev.tf_boolean, {"1": True, "TRUE": True, "0": False, "false": False}),
    (ev.choice(("sync", "gthread")), {"Sync": "sync", "GTHREAD": "gthread"}),
    (ev.fraction, {"0": 0.0, "0.5": 0.5, "1e-3": 0.001}),
    (ev.port_range, {"9000-9999": (9000, 9999), "10 - 10": (10, 10)}),
    (ev.model_name, {"half_plus_two": "half_plus_two", "0-model.v2": "0-model.v2"}),
    (ev.model_name, {"m" * 255: "m" * 255, "None": None}),
    (
        ev.container_strategy,
        {"MultiRecord": STRATEGIES[0], "multi_record": STRATEGIES[0]},
    ),
    (
        ev.container_strategy,
        {"SingleRecord": STRATEGIES[1], "Single_Record": STRATEGIES[1]},
    ),
    (ev.text, {"2.21": "2.21", "code/v1": "code/v1"}),
]


@pytest.mark.parametrize(("parse", "cases"), ACCEPTED)
def test_accepted(parse, cases):
    # None: the ev.text reads as the previous case's value (another spelling of it)
    previous = None
    for raw, expected in cases.items():
        value = parse(raw)
        assert value == (previous if expected is None and raw != "None" else expected), raw
        previous = value


REFUSED = [
    (ev.integer(1, 65535), ["0", "65536", "80a", "8080.0", "1_000", "٣", "-5"]),
    (ev.integer(1, 2**31 - 1), ["0", str(2**31), "two"]),
    (ev.boolean, ["1", "0", "yes", "on"]),
    (ev.tf_boolean, ["yes", "2", "on"]),
    (ev.choice(("debug", "info")), ["warn", "verbose"]),
    (ev.fraction, ["1", "-0.1", "nan", "lots", "inf"]),
    (ev.port_range, ["9000", "9999-9000", "0-10", "9000-70000", "a-b", "-5-10"]),
    (ev.model_name, ["my model", "-model", ".model", "a/b", "m" * 256]),
    (ev.container_strategy, ["MULTI", "None", "MULTIRECORDS"]),
]


@pytest.mark.parametrize(("parse", "refused"), REFUSED)
def test_refused_saying_what_was_expected_and_given(parse, refused):
    for raw in refused:
        with pytest.raises(ev.BadValue, match=r"^expected .*, got ") as info:
            parse(raw)
        assert str(info.value).endswith(f"got {raw!r}")


@pytest.mark.parametrize(
    ("parse", "raw", "message"),
    [
        (ev.integer(1, 65535), "0", "expected an integer from 1 to 65535, got '0'"),
        (ev.integer(1, 2**31 - 1), "abc", "expected a positive integer, got 'abc'"),
        (ev.integer(0, 100_000), "-1", "expected a non-negative integer, got '-1'"),
        (
            ev.integer(1, 2**31 - 1),
            str(2**31),
            f"expected a positive integer no larger than {2**31 - 1}, got '{2**31}'",
        ),
        (ev.boolean, "yes", "expected true or false, got 'yes'"),
        (ev.tf_boolean, "yes", "expected 0, 1, true or false, got 'yes'"),
        (ev.choice(("a", "b")), "c", "expected one of a, b, got 'c'"),
        (ev.container_strategy, "x", "expected MULTI_RECORD or SINGLE_RECORD, got 'x'"),
        (ev.port_range, "x", "expected 'low-high' (for example '9000-9999'), got 'x'"),
        (ev.port_range, "2-1", "expected ports 1 <= low <= high <= 65535, got '2-1'"),
    ],
)
def test_messages(parse, raw, message):
    with pytest.raises(ev.BadValue) as info:
        parse(raw)
    assert str(info.value) == message
