#!/usr/bin/env bash
# Build the images from docker/Dockerfile, tagged <repo>:<version>-<variant> (version from
# setup.py); the reference of the last image built is the last line printed.
#
#   scripts/build.sh                 # the cpu image (make image)
#   scripts/build.sh cpu gpu arm64   # those variants
#   scripts/build.sh --print-tags    # print the tags, build nothing
#
# cpu is the real tensorflow_model_server where tensorflow/serving:<TF version> can be pulled,
# else tfs-model-server (target tfs-model-server) in its place; gpu needs the GPU TF Serving
# image; arm64 is tfs-model-server for linux/arm64. The Debian base is debian:bookworm-slim, or
# the same made from Debian's packages (scripts/debian_base.sh). The engine is Docker (with
# BuildKit) or podman, set up by scripts/engine.sh. pip's configuration and CA bundle reach the
# build as secrets, never as a layer.
#
# Environment: IMAGE_REPO (default sagemaker-tfs); MODEL_SERVER (auto, tensorflow_model_server
# or tfs-model-server: what the cpu image runs; default auto); TFS_VERSION (default: the
# tensorflow-serving-api pin in setup.py); DEBIAN_IMAGE (a base to use as it is); CA_BUNDLE
# (the CA file pip trusts; default: pip's `cert` setting, else PIP_CERT, REQUESTS_CA_BUNDLE,
# SSL_CERT_FILE, /etc/ssl/certs/ca-certificates.crt); PIP_CONF (a pip.conf to use instead of
# the one made from this machine's pip index settings); BUILD_ARGS (extra words for the
# engine's build command, e.g. "--no-cache"); DOCKER (a docker-compatible CLI to use as it is,
# with no engine setup).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKERFILE="${ROOT}/docker/Dockerfile"
ALL_VARIANTS=(cpu gpu arm64)
IMAGE_REPO="${IMAGE_REPO:-sagemaker-tfs}"
MODEL_SERVER="${MODEL_SERVER:-auto}"
PULL_TIMEOUT_SECONDS=600

say() { echo "build.sh: $*" >&2; }

version() {
  sed -n 's/^[[:space:]]*version="\([^"]*\)".*/\1/p' "${ROOT}/setup.py" | head -n 1
}

tfs_version() {
  python3 "${ROOT}/scripts/image_requirements.py" "${ROOT}/setup.py" \
    --only tensorflow-serving-api | sed -n 's/^[^=]*==//p'
}

# pip's settings for the build: this machine's index settings (http(s) ones only: local paths
# do not exist in the build) and the CA bundle, which the build mounts at /run/secrets/ca.crt.
pip_setting() {  # pip_setting NAME: global.NAME from `pip config`, else PIP_<NAME>
  local name="$1" env_name value
  env_name="PIP_$(tr 'a-z-' 'A-Z_' <<<"${name}")"
  value="${!env_name:-}"
  if [ -z "${value}" ] && command -v python3 >/dev/null; then
    value="$(python3 -m pip config get "global.${name}" 2>/dev/null || true)"
  fi
  echo "${value}"
}

ca_bundle() {
  local candidate
  for candidate in "${CA_BUNDLE:-}" "$(pip_setting cert)" "${REQUESTS_CA_BUNDLE:-}" \
    "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [ -n "${candidate}" ] && [ -f "${candidate}" ]; then
      echo "${candidate}"
      return
    fi
  done
}

write_pip_conf() {  # write_pip_conf FILE CA_PRESENT
  if [ -n "${PIP_CONF:-}" ]; then
    cp "${PIP_CONF}" "$1"
    return
  fi
  {
    echo "[global]"
    if [ "$2" = yes ]; then
      echo "cert = /run/secrets/ca.crt"
    fi
    local name value urls
    for name in index-url extra-index-url trusted-host; do
      value="$(pip_setting "${name}")"
      if [ "${name}" != trusted-host ]; then
        urls="$(tr ' ' '\n' <<<"${value}" | grep -E '^https?://' | tr '\n' ' ' || true)"
        value="${urls% }"
      fi
      if [ -n "${value}" ]; then
        echo "${name} = ${value}"
      fi
    done
  } >"$1"
}

image_available() {  # image_available REF: present, or pulled now
  "${ENGINE_CLI}" image inspect "$1" >/dev/null 2>&1 ||
    timeout "${PULL_TIMEOUT_SECONDS}" "${ENGINE_CLI}" pull --quiet "$1" >/dev/null 2>&1
}

target_of() {  # target_of VARIANT: the Dockerfile target
  case "$1" in
    gpu) echo gpu ;;
    arm64) echo tfs-model-server ;;
    cpu)
      case "${MODEL_SERVER}" in
        tensorflow_model_server) echo cpu ;;
        tfs-model-server) echo tfs-model-server ;;
        auto)
          if image_available "${TFS_IMAGE}"; then
            echo cpu
          else
            say "${TFS_IMAGE} cannot be pulled: tfs-model-server takes tensorflow_model_server's place"
            echo tfs-model-server
          fi
          ;;
        *)
          say "MODEL_SERVER must be auto, tensorflow_model_server or tfs-model-server"
          return 2
          ;;
      esac
      ;;
  esac
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
        sed -n '2,25p' "${BASH_SOURCE[0]}"
        return 0
        ;;
      *)
        say "unknown variant or option: ${arg}"
        return 2
        ;;
    esac
  done
  if [ "${#variants[@]}" -eq 0 ]; then
    if [ "${print_only}" -eq 1 ]; then variants=("${ALL_VARIANTS[@]}"); else variants=(cpu); fi
  fi

  local ver
  ver="$(version)"
  if [ -z "${ver}" ]; then
    say "no version=\"...\" in setup.py"
    return 1
  fi
  if [ "${print_only}" -eq 1 ]; then
    for variant in "${variants[@]}"; do echo "${IMAGE_REPO}:${ver}-${variant}"; done
    return 0
  fi

  if [ -n "${DOCKER:-}" ]; then
    ENGINE_CLI="${DOCKER}"
  else
    eval "$("${ROOT}/scripts/engine.sh" env)"
    ENGINE_CLI="${ENGINE}"
  fi
  local tfs="${TFS_VERSION:-$(tfs_version)}"
  TFS_IMAGE="docker.io/tensorflow/serving:${tfs}"
  local base
  base="$(ENGINE="${ENGINE_CLI}" "${ROOT}/scripts/debian_base.sh" | tail -n 1)"

  local secrets ca
  secrets="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now: the trap runs after main's locals are gone
  trap "rm -rf '${secrets}'" EXIT
  ca="$(ca_bundle)"
  if [ -n "${ca}" ]; then
    cp "${ca}" "${secrets}/ca.crt"
    write_pip_conf "${secrets}/pip.conf" yes
  else
    : >"${secrets}/ca.crt"
    write_pip_conf "${secrets}/pip.conf" no
  fi

  local extra=()
  if [ -n "${BUILD_ARGS:-}" ]; then
    read -r -a extra <<<"${BUILD_ARGS}"
  fi
  if [ "${ENGINE_CLI}" = podman ]; then
    extra+=(--format docker)  # the OCI format drops SHELL (pipefail)
  fi

  local tag="" target
  for variant in "${variants[@]}"; do
    tag="${IMAGE_REPO}:${ver}-${variant}"
    target="$(target_of "${variant}")"
    say "building ${tag}: target ${target} of docker/Dockerfile on ${base} (${ENGINE_CLI})"
    DOCKER_BUILDKIT=1 "${ENGINE_CLI}" build \
      --platform "$(platform "${variant}")" \
      --target "${target}" \
      --build-arg "TFS_VERSION=${tfs}" \
      --build-arg "TFS_IMAGE=${TFS_IMAGE}" \
      --build-arg "TFS_GPU_IMAGE=${TFS_IMAGE}-gpu" \
      --build-arg "DEBIAN_IMAGE=${base}" \
      --secret "id=pip.conf,src=${secrets}/pip.conf" \
      --secret "id=ca.crt,src=${secrets}/ca.crt" \
      --file "${DOCKERFILE}" \
      --tag "${tag}" \
      "${extra[@]}" \
      "${ROOT}" >&2
  done
  echo "${tag}"
}

main "$@"
