"""One input object's plan: its records, the request body of each mini-batch, and the output
assembled from the responses (SplitType, BatchStrategy, AssembleWith, DataProcessing)."""

from __future__ import annotations

from collections.abc import Sequence

from sagemaker_serving.config.batch_parameters import SINGLE_RECORD

from .data_processing import DataProcessing, strip_terminator
from .framing import split_records
from .packing import Batch, pack

ASSEMBLE_WITH = ("None", "Line")


class AssemblyError(ValueError):
    """The responses cannot be assembled (e.g. not one output line per record for a join)."""


class FilePlan:
    """Split, filter and pack one object; `body(batch)` is a request, `assemble` the output.

    SingleRecord (and SplitType None) bodies are the bare records; MultiRecord bodies the
    records as framed in the object, back to back. With an InputFilter each record is replaced
    by its filtered JSON/CSV text and a `\\n`.
    """

    def __init__(
        self,
        data: bytes,
        split_type: str,
        batch_strategy: str,
        payload_limit: int | None,
        assemble_with: str,
        processing: DataProcessing,
    ):
        if assemble_with not in ASSEMBLE_WITH:
            raise ValueError(f"AssembleWith must be one of {ASSEMBLE_WITH}, got {assemble_with!r}")
        self.assemble_with = assemble_with
        self.processing = processing
        strategy = SINGLE_RECORD if split_type == "None" else batch_strategy
        records = split_records(data, split_type)
        single = strategy == SINGLE_RECORD
        self.inputs = [record.bare for record in records]  # what a join sees
        pieces = [record.bare if single else record.framed for record in records]
        if processing.filters_input:
            pieces = [_filtered(processing, index, piece) for index, piece in enumerate(pieces)]
        self.pieces = pieces
        self.batches = pack([len(piece) for piece in pieces], strategy, payload_limit)

    @property
    def records(self) -> int:
        return len(self.pieces)

    def body(self, batch: Batch) -> bytes:
        if batch.count == 1:
            return self.pieces[batch.start]
        return b"".join(self.pieces[batch.start : batch.stop])

    def assemble(self, responses: Sequence[bytes]) -> bytes:
        """The output object from the responses, one per batch in order."""
        if not self.processing.processes_output:
            if self.assemble_with == "None":
                return b"".join(responses)
            return b"".join(r if r.endswith(b"\n") else r + b"\n" for r in responses)
        outputs = []
        for batch, response in zip(self.batches, responses, strict=True):
            lines = _output_lines(response, batch.count)
            for offset, line in enumerate(lines):
                index = batch.start + offset
                try:
                    outputs.append(self.processing.output_record(self.inputs[index], line))
                except ValueError as err:
                    raise AssemblyError(f"record {index}: output processing: {err}") from None
        separator = b"\n" if self.assemble_with == "Line" else b""
        return b"".join(output + separator for output in outputs)


def _filtered(processing: DataProcessing, index: int, record: bytes) -> bytes:
    try:
        return processing.request_record(record)
    except ValueError as err:
        raise AssemblyError(f"record {index}: input filter: {err}") from None


def _output_lines(response: bytes, count: int) -> list[bytes]:
    """One output per record: the whole response for one record, else one line each."""
    if count == 1:
        return [strip_terminator(response)]
    lines = response.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != count:
        raise AssemblyError(
            f"a response has {len(lines)} lines for {count} records; joining and output "
            "filters need one output line per record (e.g. Accept: application/jsonlines)"
        )
    return [strip_terminator(line) for line in lines]
