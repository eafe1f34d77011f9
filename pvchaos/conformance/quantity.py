"""Kubernetes resource quantities ("100Gi", "1.5Gi", "1e3", "100m") as exact numbers.

Capacity decides which PV a claim binds to, so comparisons must be exact: floats would
let 1Ti and 1099511627776.0000001 collide. Grammar and rounding follow apimachinery
``pkg/api/resource/quantity.go`` (ParseQuantity):

    <quantity>  ::= <sign>? <number> <suffix>
    <number>    ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>    ::= Ki|Mi|Gi|Ti|Pi|Ei | n|u|m|""|k|M|G|T|P|E | (e|E)<sign>?<digits>

Like upstream, a non-zero magnitude is rounded up to a multiple of 10^-9 (nano), and
``quantity_bytes`` rounds up to a whole number as ``Quantity.Value()`` does. Upstream's
cap at 2^63-1 is not modelled. No whitespace is allowed anywhere.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"(?P<sign>[+-]?)(?P<number>[0-9]+\.?[0-9]*|\.[0-9]+)(?P<suffix>.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+", re.ASCII)
_NANO = Fraction(1, 10**9)
_MAX_EXPONENT = 1000  # far beyond any real quantity; keeps Fraction arithmetic bounded

Quantity = str | int
"""What a JSON object holds for a quantity: usually a string, an int when hand-written."""


def parse_quantity(value: Quantity) -> Fraction:
    """Return the exact value of a quantity; raise ValueError naming the text if malformed."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"quantity must be a string or an int, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"malformed quantity {value!r}")
    magnitude = Fraction(match["number"]) * _suffix_multiplier(match["suffix"], value)
    if magnitude and magnitude % _NANO:
        magnitude = math.ceil(magnitude / _NANO) * _NANO
    return -magnitude if match["sign"] == "-" else magnitude


def _suffix_multiplier(suffix: str, text: str) -> Fraction:
    """Multiplier of a suffix; "E" alone is exa, "E3"/"e-3" are decimal exponents."""
    if suffix in _BINARY:
        return Fraction(_BINARY[suffix])
    if suffix in _DECIMAL:
        return Fraction(10) ** _DECIMAL[suffix]
    if _EXPONENT.fullmatch(suffix):
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"quantity {text!r}: exponent out of the modelled range")
        return Fraction(10) ** exponent
    raise ValueError(f"malformed quantity {text!r}: unknown suffix {suffix!r}")


def quantity_bytes(value: Quantity) -> int:
    """Whole units, rounded away from zero, as upstream ``Quantity.Value()`` returns them."""
    exact = parse_quantity(value)
    return math.ceil(exact) if exact >= 0 else math.floor(exact)


def compare_quantities(left: Quantity, right: Quantity) -> int:
    """-1, 0 or 1 as ``left`` is smaller than, equal to or larger than ``right`` (``Cmp``)."""
    a, b = parse_quantity(left), parse_quantity(right)
    return (a > b) - (a < b)


def quantity_at_least(value: Quantity, minimum: Quantity) -> bool:
    """True when ``value`` >= ``minimum``: the capacity test of claim binding."""
    return compare_quantities(value, minimum) >= 0
