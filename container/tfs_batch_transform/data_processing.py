"""DataProcessing: InputFilter, JoinSource and OutputFilter.

The JSONPath subset SageMaker documents: `$`, `.name`, `*` (`.*` or `[*]`), `['a','b']`,
`[i,j]` (negative indexes count from the end), `[start:end]` (either bound may be omitted).
Semantics follow Jayway JsonPath, the implementation SageMaker's guide points to:
- a path of names and single indexes selects one value; `*`, several indexes and slices select
  a list of values (later steps apply to each);
- several names in brackets select an object with those keys, in the order given;
- a missing key or an index out of range is an error (the record fails);
- slices are end-exclusive, like Array.slice() and Python. (The guide's prose once calls
  `$[1:4]` "the second through fifth columns", i.e. inclusive; its operator table and JsonPath
  say exclusive; this follows the table.)

Records are JSON values (`application/json`, `application/jsonlines`) or CSV rows taken as
arrays of strings (`text/csv`, RFC 4180).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_FILTER_LENGTH = 63
JOIN_SOURCES = ("None", "Input")
OUTPUT_KEY = "SageMakerOutput"
INPUT_KEY = "SageMakerInput"
JSON_TYPES = frozenset({"application/json", "application/jsonlines", "application/x-jsonlines"})
CSV_TYPES = frozenset({"text/csv"})


class JsonPathError(ValueError):
    """A JSONPath outside the supported subset, or one that does not apply to a record."""


Step = Callable[[Any], list[Any]]

_NAME = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*|\*)")
_BRACKET = re.compile(r"\.?\[([^\]]*)\]")
_QUOTED = re.compile(r"""\s*(?:'([^']*)'|"([^"]*)")\s*""")
_INDEX = re.compile(r"\s*(-?\d+)\s*")
_SLICE = re.compile(r"\s*(-?\d+)?\s*:\s*(-?\d+)?\s*")


@dataclass(frozen=True)
class JsonPath:
    """A compiled JSONPath of the supported subset; `apply(value)` selects from a record."""

    text: str
    steps: tuple[tuple[Step, bool], ...]  # (step, definite)

    @property
    def is_root(self) -> bool:
        return not self.steps

    def apply(self, value: Any) -> Any:
        nodes = [value]
        definite = True
        for step, step_definite in self.steps:
            nodes = [found for node in nodes for found in step(node)]
            definite = definite and step_definite
        return nodes[0] if definite else nodes


def compile_path(text: str) -> JsonPath:
    """Parse a JSONPath of the subset; JsonPathError names what is wrong."""
    if len(text) > MAX_FILTER_LENGTH:
        raise JsonPathError(f"{text!r} is {len(text)} characters (at most {MAX_FILTER_LENGTH})")
    if not text.startswith("$"):
        raise JsonPathError(f"{text!r} must start with '$'")
    steps: list[tuple[Step, bool]] = []
    pos = 1
    while pos < len(text):
        name = _NAME.match(text, pos)
        bracket = None if name else _BRACKET.match(text, pos)
        if name:
            steps.append(_wildcard() if name.group(1) == "*" else _key(name.group(1)))
            pos = name.end()
        elif bracket:
            steps.append(_bracket_step(text, bracket.group(1)))
            pos = bracket.end()
        else:
            raise JsonPathError(f"{text!r}: unsupported syntax at character {pos + 1}")
    return JsonPath(text, tuple(steps))


def _bracket_step(text: str, inner: str) -> tuple[Step, bool]:
    if inner.strip() == "*":
        return _wildcard()
    quoted = [_QUOTED.fullmatch(part) for part in inner.split(",")]
    if all(quoted):
        names = [m.group(1) if m.group(1) is not None else m.group(2) for m in quoted if m]
        if any("." in name for name in names) and len(names) > 1:
            raise JsonPathError(f"{text!r}: nested names inside brackets are not supported")
        return _key(names[0]) if len(names) == 1 else _keys(names)
    indexes = [_INDEX.fullmatch(part) for part in inner.split(",")]
    if all(indexes):
        numbers = [int(m.group(1)) for m in indexes if m]
        return _index(numbers[0]) if len(numbers) == 1 else _indexes(numbers)
    sliced = _SLICE.fullmatch(inner)
    if sliced:
        start, stop = (int(g) if g is not None else None for g in sliced.groups())
        return _slice(start, stop)
    raise JsonPathError(f"{text!r}: unsupported bracket expression [{inner}]")


def _need(node: Any, kind: type, what: str) -> Any:
    if not isinstance(node, kind):
        raise JsonPathError(f"{what} applies to a JSON {kind.__name__}, not {type(node).__name__}")
    return node


def _key(name: str) -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        obj = _need(node, dict, f"key {name!r}")
        if name not in obj:
            raise JsonPathError(f"no key {name!r} in the record")
        return [obj[name]]

    return step, True


def _keys(names: list[str]) -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        obj = _need(node, dict, f"keys {names!r}")
        missing = [name for name in names if name not in obj]
        if missing:
            raise JsonPathError(f"no key {missing[0]!r} in the record")
        return [{name: obj[name] for name in names}]

    return step, True


def _wildcard() -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        if isinstance(node, dict):
            return list(node.values())
        return list(node) if isinstance(node, list) else []

    return step, False


def _element(items: list, index: int) -> Any:
    if not -len(items) <= index < len(items):
        raise JsonPathError(f"index {index} out of range for {len(items)} elements")
    return items[index]


def _index(index: int) -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        return [_element(_need(node, list, f"index [{index}]"), index)]

    return step, True


def _indexes(indexes: list[int]) -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        items = _need(node, list, f"indexes {indexes}")
        return [_element(items, i) for i in indexes]

    return step, False


def _slice(start: int | None, stop: int | None) -> tuple[Step, bool]:
    def step(node: Any) -> list[Any]:
        return _need(node, list, f"slice [{start}:{stop}]")[start:stop]

    return step, False


# ----------------------------------------------------------------------- record formats


class RecordCodec:
    """Parses and writes one record of a JSON or CSV content type."""

    def __init__(self, content_type: str):
        media = content_type.split(";")[0].strip().lower()
        if media in JSON_TYPES:
            self.csv = False
        elif media in CSV_TYPES:
            self.csv = True
        else:
            raise ValueError(
                f"data processing supports only JSON, JSON Lines and CSV, not {content_type!r}"
            )

    def parse(self, data: bytes) -> Any:
        """A record (bytes without its line terminator) as a JSON value or a list of strings."""
        text = data.decode("utf-8")
        if not self.csv:
            return json.loads(text)
        rows = list(csv.reader(io.StringIO(text)))
        if len(rows) != 1:
            raise ValueError(f"a CSV record must be one row, got {len(rows)}")
        return rows[0]

    def dump(self, value: Any) -> bytes:
        """A record's bytes, without a line terminator."""
        if not self.csv:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(value if isinstance(value, list) else [value])
        return out.getvalue().encode("utf-8")


def strip_terminator(line: bytes) -> bytes:
    """A line without its trailing `\\n` or `\\r\\n`."""
    if line.endswith(b"\n"):
        line = line[:-1]
    return line[:-1] if line.endswith(b"\r") else line


@dataclass(frozen=True)
class DataProcessing:
    """The three DataProcessing settings, compiled; `active` when any differs from the default."""

    input_filter: JsonPath
    output_filter: JsonPath
    join_input: bool
    codec: RecordCodec | None

    @classmethod
    def create(
        cls, input_filter: str, output_filter: str, join_source: str, content_type: str
    ) -> DataProcessing:
        if join_source not in JOIN_SOURCES:
            raise ValueError(f"JoinSource must be one of {JOIN_SOURCES}, got {join_source!r}")
        inp, out = compile_path(input_filter), compile_path(output_filter)
        join = join_source == "Input"
        active = join or not inp.is_root or not out.is_root
        return cls(inp, out, join, RecordCodec(content_type) if active else None)

    @property
    def filters_input(self) -> bool:
        return self.codec is not None and not self.input_filter.is_root

    @property
    def processes_output(self) -> bool:
        return self.codec is not None and (self.join_input or not self.output_filter.is_root)

    def request_record(self, record: bytes) -> bytes:
        """The input record as sent: filtered by InputFilter (terminator kept as `\\n`)."""
        if not self.filters_input or self.codec is None:
            return record
        value = self.input_filter.apply(self.codec.parse(strip_terminator(record)))
        return self.codec.dump(value) + b"\n"

    def output_record(self, record: bytes, output: bytes) -> bytes:
        """One output record: the prediction joined with its input record (JoinSource=Input),
        then filtered by OutputFilter; without a line terminator."""
        assert self.codec is not None
        value = self.codec.parse(output)
        if self.join_input:
            value = join(self.codec.parse(strip_terminator(record)), value, self.codec.csv)
        return self.codec.dump(self.output_filter.apply(value))


def join(record: Any, output: Any, csv_rows: bool) -> Any:
    """JoinSource=Input: CSV rows get the output's fields appended; a JSON object gets the
    output under `SageMakerOutput`; any other JSON value is wrapped as
    `{"SageMakerInput": record, "SageMakerOutput": output}`."""
    if csv_rows:
        return [*record, *(output if isinstance(output, list) else [output])]
    if isinstance(record, dict):
        return {**record, OUTPUT_KEY: output}
    return {INPUT_KEY: record, OUTPUT_KEY: output}
