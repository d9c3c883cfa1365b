#!/usr/bin/env bash
# Example requests of every built-in format against a running container (scripts/start.sh) or
# `make serve`. The defaults suit the half_plus_three example model (y = 0.5 x + 3).
#
#   scripts/curl.sh [URL]                      # default http://localhost:8080
#
# Environment: MODEL (model name for the custom-attribute examples, default half_plus_three),
# VERSION (a version of it, default 124), IMAGE_FILE and IMAGE_MODEL (a JPEG/PNG file and a
# model with one string input, e.g. the string_input example model: sends application/x-image).
set -euo pipefail

URL="${1:-http://localhost:8080}"
MODEL="${MODEL:-half_plus_three}"
VERSION="${VERSION:-124}"

show() {
  local title="$1"
  shift
  printf '\n### %s\n' "${title}"
  curl -sS -i "$@"
  echo
}

show "GET /ping (200 and an empty body once every model is AVAILABLE)" "${URL}/ping"

show "GET /execution-parameters (Batch Transform)" "${URL}/execution-parameters"

show "JSON: a TF Serving request body, passed through" \
  -X POST "${URL}/invocations" -H 'Content-Type: application/json' \
  --data '{"instances": [1.0, 2.0, 5.0]}'

show "JSON: a bare value is one instance" \
  -X POST "${URL}/invocations" -H 'Content-Type: application/json' --data '2.0'

show "CSV in, CSV out: one row per instance" \
  -X POST "${URL}/invocations" -H 'Content-Type: text/csv' -H 'Accept: text/csv' \
  --data-binary $'1.0\n2.0\n5.0\n'

show "JSON Lines in, JSON Lines out: one line per instance" \
  -X POST "${URL}/invocations" -H 'Content-Type: application/jsonlines' \
  -H 'Accept: application/jsonlines' --data-binary $'1.0\n2.0\n'

if command -v python3 >/dev/null 2>&1; then
  # a float32 .npy of [1, 2, 5] written with the standard library (no numpy needed)
  npy="$(mktemp)"
  trap 'rm -f "${npy}"' EXIT
  python3 - "${npy}" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<3f", 1.0, 2.0, 5.0))
PY
  show "application/x-npy: a NumPy array, one instance per row" \
    -X POST "${URL}/invocations" -H 'Content-Type: application/x-npy' --data-binary "@${npy}"
fi

show "Custom attributes: model name and version" \
  -X POST "${URL}/invocations" \
  -H "X-Amzn-SageMaker-Custom-Attributes: tfs-model-name=${MODEL}, tfs-model-version=${VERSION}" \
  --data '{"instances": [1.0]}'

show "Custom attributes: a bad version is 400 with a JSON error" \
  -X POST "${URL}/invocations" \
  -H 'X-Amzn-SageMaker-Custom-Attributes: tfs-model-version=latest' --data '1.0'

if [ -n "${IMAGE_FILE:-}" ] && [ -n "${IMAGE_MODEL:-}" ]; then
  show "application/x-image: the body becomes the b64 value of the model's string input" \
    -X POST "${URL}/invocations" -H 'Content-Type: application/x-image' \
    -H "X-Amzn-SageMaker-Custom-Attributes: tfs-model-name=${IMAGE_MODEL}" \
    --data-binary "@${IMAGE_FILE}"
else
  printf '\n### application/x-image: set IMAGE_FILE and IMAGE_MODEL to send an image\n'
fi
