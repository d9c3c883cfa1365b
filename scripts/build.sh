#!/usr/bin/env bash
# Build the Docker images, tagged <repo>:<version>-<processor> (version from setup.py).
#
#   scripts/build.sh                 # every variant: cpu gpu arm64
#   scripts/build.sh cpu gpu         # some of them
#   scripts/build.sh --print-tags    # print the tags, build nothing
#
# Environment: IMAGE_REPO (default sagemaker-tfs), TFS_VERSION (default: the
# tensorflow-serving-api pin in setup.py), DOCKER (default docker), DOCKER_BUILD_ARGS (extra
# arguments for `docker build`, word-split, e.g. "--pull --no-cache").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_VARIANTS=(cpu gpu arm64)
IMAGE_REPO="${IMAGE_REPO:-sagemaker-tfs}"
DOCKER="${DOCKER:-docker}"

version() {
  sed -n 's/^[[:space:]]*version="\([^"]*\)".*/\1/p' "${ROOT}/setup.py" | head -n 1
}

tfs_version() {
  python3 "${ROOT}/scripts/image_requirements.py" "${ROOT}/setup.py" \
    --only tensorflow-serving-api | sed -n 's/^[^=]*==//p'
}

platform() {
  case "$1" in
    arm64) echo "linux/arm64" ;;
    *) echo "linux/amd64" ;;
  esac
}

main() {
  local print_only=0
  local variants=()
  for arg in "$@"; do
    case "${arg}" in
      --print-tags) print_only=1 ;;
      cpu | gpu | arm64) variants+=("${arg}") ;;
      -h | --help)
        sed -n '2,12p' "${BASH_SOURCE[0]}"
        return 0
        ;;
      *)
        echo "build.sh: unknown variant or option: ${arg}" >&2
        return 2
        ;;
    esac
  done
  if [ "${#variants[@]}" -eq 0 ]; then
    variants=("${ALL_VARIANTS[@]}")
  fi

  local ver
  ver="$(version)"
  if [ -z "${ver}" ]; then
    echo "build.sh: no version=\"...\" in setup.py" >&2
    return 1
  fi
  local tfs="${TFS_VERSION:-$(tfs_version)}"

  local extra=()
  if [ -n "${DOCKER_BUILD_ARGS:-}" ]; then
    read -r -a extra <<<"${DOCKER_BUILD_ARGS}"
  fi

  for variant in "${variants[@]}"; do
    local tag="${IMAGE_REPO}:${ver}-${variant}"
    if [ "${print_only}" -eq 1 ]; then
      echo "${tag}"
      continue
    fi
    echo "==> building ${tag} (docker/Dockerfile.${variant}, TF Serving ${tfs})" >&2
    "${DOCKER}" build \
      --platform "$(platform "${variant}")" \
      --build-arg "TFS_VERSION=${tfs}" \
      --file "${ROOT}/docker/Dockerfile.${variant}" \
      --tag "${tag}" \
      "${extra[@]}" \
      "${ROOT}"
    echo "${tag}"
  done
}

main "$@"
