"""TF Serving's number text (rapidjson's WriteDecimal): one value at a time, or whole float32 and
float64 arrays at once in numpy, to the same bytes."""

from __future__ import annotations

import math
from itertools import chain

import numpy as np


def decimal(value: float, is_float32: bool) -> str:
    """WriteDecimal(): %g, or max_digits10 if %g does not round-trip; '.0' on whole numbers."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    text = format(value, "g")
    back = float(text)
    if (np.float32(back) != np.float32(value)) if is_float32 else back != value:
        text = format(value, ".9g" if is_float32 else ".17g")
    if "." not in text and "e" not in text:
        text += ".0"
    return text


# ------------------------------------------------------------------------- responses
#
# rapidjson's PrettyWriter: 4-space indent per nesting level; arrays are multi-line
# except where TF Serving sets kFormatSingleLineArray (row format, results).

_POW10 = np.array([float(f"1e{k}") for k in range(-40, 61)])  # correctly rounded 10**k
_POW10_BIAS = 40
_WEIGHTS = (10 ** np.arange(8, -1, -1)).astype(np.uint32)[:, None]  # 1e8 ... 1
_PLACES = np.arange(10, dtype=np.uint8)[:, None]
_SEP_MARK, _GROUP_MARK = "\x01", "\x02"  # never in the text (no control characters)
_CHUNK = 1 << 18
# float32_text() costs ~0.1 ms whatever the size (a few dozen numpy passes); decimal() ~1.5 us
# a value. Below this many values, one decimal() per value is the cheaper way to the same text.
SCALAR_MAX = 64


def _float32_digits(flat: np.ndarray) -> tuple[np.ndarray, ...]:
    """WriteDecimal()'s %g choice for each float32 of a vector, in float64 arithmetic.

    Returns (mantissa, exponent, precision, done): the text has `precision` significant
    digits (6 when they round-trip, else 9) of mantissa * 10**(exponent - 8), mantissa
    having 9 digits (0 for zeros). Not done: NaN/Infinity and the values too close to a
    rounding boundary for float64 to decide, left to decimal().
    """
    bits = flat.view(np.uint32)
    biased = (bits >> 23) & 0xFF
    zero = (bits << 1) == 0
    regular = (biased != 0xFF) & ~zero
    size = np.abs(flat).astype(np.float64)
    exponent = np.floor(np.log10(np.abs(flat))).astype(np.int32) * regular
    wide = size * _POW10[_POW10_BIAS + 8 - exponent]  # 9 digits: [1e8, 1e9]
    off = (wide >= 1e9).view(np.int8) - (wide < 1e8).view(np.int8)  # log10() error
    if off.any():
        exponent += off
        wide = size * _POW10[_POW10_BIAS + 8 - exponent]
    short = wide / 1000  # 6 digits
    wide_digits, short_digits = np.rint(wide), np.rint(short)
    error = np.abs(short_digits - short)
    # The 6 digits round-trip if nearer than half the gap to the next float32 on their side
    # (in units of the 6th digit: short / significand, halved below a power of two).
    significand = (bits & 0x7FFFFF) | (biased != 0).astype(np.uint32) << 23
    below_power_of_two = (significand == 0x800000) & (biased > 1) & (short_digits < short)
    half_gap = short / significand * (0.5 - 0.25 * below_power_of_two)
    round_trips = error < half_gap
    done = (
        regular
        & (np.abs(error - half_gap) > 1e-8)
        & (error < 0.5 - 1e-8)
        & (round_trips | (np.abs(wide_digits - wide) < 0.5 - 1e-6))
    ) | zero
    mantissa = wide_digits + round_trips * (short_digits * 1000 - wide_digits)
    carry = mantissa >= 1e9
    mantissa = (mantissa - carry * 9e8).astype(np.uint32) * regular
    exponent = (exponent + carry) * regular
    return mantissa, exponent, 9 - 3 * (round_trips | zero), done


def float32_text(flat: np.ndarray, group: int, sep: str) -> list[str]:
    """WriteDecimal() of a float32 vector, `group` values per string, joined by `sep`.

    A table gets one column per value and one row per character %g may write (sign,
    "0.000", 9 x (digit, point), ".0", "e+dd") plus the separator; the characters not
    written are NUL, deleted in one pass. decimal() formats what _float32_digits() leaves.
    """
    flat = np.ascontiguousarray(flat)
    with np.errstate(invalid="ignore", divide="ignore"):
        mantissa, exponent, precision, done = _float32_digits(flat)
    quotients = (mantissa // _WEIGHTS).astype(np.uint8)  # mantissa // 1e8 ... // 1, mod 256
    digits = np.empty_like(quotients)
    digits[0] = quotients[0] + np.uint8(48)
    digits[1:] = quotients[1:] - quotients[:-1] * np.uint8(10) + np.uint8(48)
    significant = ((digits != 48) * _PLACES[1:]).max(axis=0)  # %g strips trailing zeros
    fixed = (exponent >= -4) & (exponent < precision) & done
    whole = fixed & (exponent >= 0)
    below_one, scientific = fixed & (exponent < 0), done & ~fixed
    kept = (np.maximum(significant, (exponent + 1) * whole) * done).astype(np.uint8)
    no_point = whole & (significant <= exponent + 1)
    point = (~no_point & whole) * (exponent + 1) + (scientific & (significant > 1))
    magnitude = np.abs(exponent)
    mark = sep if len(sep) < 3 else _SEP_MARK  # long separators are put in afterwards
    separator = np.frombuffer((mark + _GROUP_MARK).encode("ascii"), dtype=np.uint8)
    table = np.empty((30 + separator.size, flat.size), dtype=np.uint8)
    table[0] = np.uint8(45) * (done & np.signbit(flat))
    table[1] = np.uint8(48) * below_one
    table[2] = np.uint8(46) * below_one
    table[3:6] = np.uint8(48) * (below_one & (exponent + _PLACES[1:4] < 0))
    table[6:24:2] = digits * (kept > _PLACES[:9])
    table[7:25:2] = np.uint8(46) * (point.astype(np.uint8) == _PLACES[1:])
    table[24] = np.uint8(46) * no_point
    table[25] = np.uint8(48) * no_point
    table[26] = np.uint8(101) * scientific
    table[27] = (43 + 2 * (exponent < 0)) * scientific
    table[28] = (magnitude // 10 + 48) * scientific
    table[29] = (magnitude % 10 + 48) * scientific
    table[30:] = separator[:, None]
    table[-1] = 0
    table[30:-1, group - 1 :: group] = 0
    table[-1, group - 1 :: group] = ord(_GROUP_MARK)
    table[30:, -1] = 0
    if not done.all():
        left = np.flatnonzero(~done)
        tokens = [decimal(value, True) for value in flat[left].tolist()]
        table[:30, left] = np.array(tokens, dtype="S30").view(np.uint8).reshape(-1, 30).T
    table = table[table.max(axis=1) > 0]  # skip rows no value writes in
    text = table.T.tobytes().translate(None, b"\0")
    if mark != sep:
        text = text.replace(_SEP_MARK.encode(), sep.encode("ascii"))
    text = text.decode("ascii")
    return text.split(_GROUP_MARK) if group < flat.size else [text]


def float32_joined(flat: np.ndarray, group: int, sep: str) -> list[str]:
    """WriteDecimal() of a float32 vector, `group` values per string joined by `sep`: up to
    SCALAR_MAX values by decimal(), else float32_text() over chunks of at most _CHUNK values
    (its tables take ~150 bytes a value): whole groups per chunk, or a group's parts joined."""
    if flat.size <= SCALAR_MAX:
        tokens = [decimal(value, True) for value in flat.tolist()]
        return [sep.join(tokens[i : i + group]) for i in range(0, len(tokens), group)]
    if group > _CHUNK:
        return [
            sep.join(
                float32_text(flat[part : min(part + _CHUNK, start + group)], _CHUNK, sep)[0]
                for part in range(start, start + group, _CHUNK)
            )
            for start in range(0, flat.size, group)
        ]
    step = _CHUNK // group * group
    return list(
        chain.from_iterable(
            float32_text(flat[start : start + step], group, sep)
            for start in range(0, flat.size, step)
        )
    )


def float64_tokens(flat: np.ndarray) -> list[str]:
    """WriteDecimal<double>() of each value: %.17g where the 6-digit %g surely does not
    round-trip (it is more than rounding noise away from the value), else decimal()."""
    with np.errstate(all="ignore"):
        scaled = np.abs(flat) * 10.0 ** (5 - np.floor(np.log10(np.abs(flat))))
        wide = np.abs(np.rint(scaled) - scaled) > 1e-7  # NaN (zeros, non-finite): False
        whole = wide & (flat == np.trunc(flat)) & (np.abs(flat) < 1e17)  # no point in %.17g
    tokens = [
        format(value, ".17g") if is_wide else decimal(value, False)
        for value, is_wide in zip(flat.tolist(), wide.tolist(), strict=True)
    ]
    for i in np.flatnonzero(whole).tolist():
        tokens[i] += ".0"
    return tokens
