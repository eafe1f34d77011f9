"""Quantity parsing is exact: capacity decides binding, so no float may blur it."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvchaos.conformance.quantity import compare_quantities, parse_quantity, quantity_at_least, quantity_bytes

GI = 2**30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100Gi", 100 * GI),
        ("1Ti", 2**40),
        ("500M", 500 * 10**6),
        ("1.5Gi", Fraction(3, 2) * GI),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e-3", Fraction(1, 1000)),
        ("1e+2", 100),
        ("1E", 10**18),
        ("100m", Fraction(1, 10)),
        ("0", 0),
        ("2k", 2000),
        ("3u", Fraction(3, 10**6)),
        ("7n", Fraction(7, 10**9)),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+1", 1),
        ("-1Gi", -GI),
        ("1Ki", 1024),
        ("1Ei", 2**60),
        (1000, 1000),
    ],
)
def test_parses_exactly(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " 1Gi", "1Gi ", "1gi", "1K", "1KB", "abc", "1.2.3", "1e", "--1", "1Ki1", "Gi", ".", "1 Gi", "1e3.5", "0x10"],
)
def test_rejects_malformed_text_and_names_it(text):
    with pytest.raises(ValueError) as raised:
        parse_quantity(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("value", [None, 1.5, True, b"1Gi"])
def test_rejects_non_quantity_types(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


def test_rounds_up_below_nano_like_upstream():
    assert parse_quantity("1.5n") == Fraction(2, 10**9)
    assert parse_quantity("0.1n") == Fraction(1, 10**9)
    assert parse_quantity("-1.5n") == Fraction(-2, 10**9)


def test_bytes_round_away_from_zero_like_value():
    assert quantity_bytes("100m") == 1
    assert quantity_bytes("1.5") == 2
    assert quantity_bytes("-1.5") == -2
    assert quantity_bytes("100Gi") == 100 * GI


def test_compare_across_binary_and_decimal_suffixes():
    assert compare_quantities("1Gi", str(GI)) == 0
    assert compare_quantities("1G", "1Gi") == -1
    assert compare_quantities("1Ti", "100Gi") == 1
    assert quantity_at_least("1Ti", "100Gi")
    assert not quantity_at_least("100Gi", "120Gi")


_SUFFIXES = st.sampled_from(["", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "m"])


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6), _SUFFIXES, _SUFFIXES)
def test_ordering_agrees_with_exact_arithmetic(a, b, sa, sb):
    left, right = f"{a}{sa}", f"{b}{sb}"
    expected = (parse_quantity(left) > parse_quantity(right)) - (parse_quantity(left) < parse_quantity(right))
    assert compare_quantities(left, right) == expected
    assert compare_quantities(right, left) == -expected


@given(st.integers(min_value=-(10**12), max_value=10**12), st.integers(min_value=0, max_value=9))
def test_decimal_exponent_equals_integer_scaling(n, exponent):
    assert parse_quantity(f"{n}e{exponent}") == n * 10**exponent
