#!/usr/bin/env bash
# Stop and remove the container scripts/start.sh started: SIGTERM, then SIGKILL after 30 s,
# as SageMaker does.
#
#   scripts/stop.sh            # CONTAINER_NAME (default sagemaker-tfs)
set -euo pipefail

DOCKER="${DOCKER:-docker}"
CONTAINER_NAME="${CONTAINER_NAME:-sagemaker-tfs}"

if ! "${DOCKER}" inspect "${CONTAINER_NAME}" >/dev/null 2>&1; then
  echo "stop.sh: no container named ${CONTAINER_NAME}" >&2
  exit 0
fi
"${DOCKER}" stop --time 30 "${CONTAINER_NAME}" >/dev/null
echo "==> exit code $("${DOCKER}" inspect -f '{{.State.ExitCode}}' "${CONTAINER_NAME}"); last log lines:" >&2
"${DOCKER}" logs --tail 20 "${CONTAINER_NAME}" >&2 || true
"${DOCKER}" rm "${CONTAINER_NAME}" >/dev/null
