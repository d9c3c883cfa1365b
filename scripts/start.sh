#!/usr/bin/env bash
# Run an image locally as SageMaker does (`docker run IMAGE serve`), on a model directory mounted
# read-only at /opt/ml/model, port 8080, in a named container; wait until /ping answers 200.
#
#   scripts/start.sh [MODEL_DIR] [cpu|gpu|arm64]     # default: run/models, cpu
#
# Environment: IMAGE (default <IMAGE_REPO>:<version>-<variant> from scripts/build.sh),
# CONTAINER_NAME (default sagemaker-tfs), PORT (host port, default 8080), WAIT_SECONDS
# (default 300). Every SAGEMAKER_* variable set here is passed into the container.
# Stop with scripts/stop.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER="${DOCKER:-docker}"
MODEL_DIR="${1:-${ROOT}/run/models}"
VARIANT="${2:-cpu}"
CONTAINER_NAME="${CONTAINER_NAME:-sagemaker-tfs}"
PORT="${PORT:-8080}"
WAIT_SECONDS="${WAIT_SECONDS:-300}"

if [ ! -d "${MODEL_DIR}" ]; then
  echo "start.sh: no model directory ${MODEL_DIR} (make one: PYTHONPATH=test/support python -m example_models half_plus_three run/models/half_plus_three)" >&2
  exit 2
fi
MODEL_DIR="$(cd "${MODEL_DIR}" && pwd)"
IMAGE="${IMAGE:-$("${ROOT}/scripts/build.sh" --print-tags "${VARIANT}")}"

args=(run --detach --name "${CONTAINER_NAME}" --publish "${PORT}:8080"
  --volume "${MODEL_DIR}:/opt/ml/model:ro")
if [ "${VARIANT}" = "gpu" ]; then
  args+=(--gpus all)
fi
while IFS= read -r name; do
  args+=(--env "${name}")
done < <(compgen -e | grep '^SAGEMAKER_' || true)

echo "==> ${CONTAINER_NAME}: ${IMAGE} serving ${MODEL_DIR} on localhost:${PORT}" >&2
"${DOCKER}" "${args[@]}" "${IMAGE}" serve >/dev/null

deadline=$((SECONDS + WAIT_SECONDS))
until curl -fsS -o /dev/null "http://localhost:${PORT}/ping" 2>/dev/null; do
  if [ "$("${DOCKER}" inspect -f '{{.State.Running}}' "${CONTAINER_NAME}")" != "true" ]; then
    echo "start.sh: the container exited:" >&2
    "${DOCKER}" logs "${CONTAINER_NAME}" >&2 || true
    exit 1
  fi
  if [ "${SECONDS}" -ge "${deadline}" ]; then
    echo "start.sh: /ping not 200 after ${WAIT_SECONDS}s; logs: docker logs ${CONTAINER_NAME}" >&2
    exit 1
  fi
  sleep 1
done
echo "==> ready: http://localhost:${PORT} (try scripts/curl.sh; stop with scripts/stop.sh)" >&2
