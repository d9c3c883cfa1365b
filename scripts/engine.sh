#!/usr/bin/env bash
# The container engine that builds and runs the image: Docker where a Docker engine answers,
# else podman (installed from Debian's packages when missing) with this project's settings
# (docker/engine/containers.conf, never /etc), serving the Docker API on a unix socket so that
# the docker CLI and the Docker SDK for Python work through DOCKER_HOST.
#
#   eval "$(scripts/engine.sh env)"   # make sure an engine runs; export ENGINE, DOCKER_HOST, ...
#   scripts/engine.sh exec CMD ARGS   # the same, then run CMD with those variables set
#   scripts/engine.sh running         # exit 0 when its podman API service answers
#   scripts/engine.sh stop            # stop the podman API service this script started
#
# Environment: ENGINE (docker or podman; default: docker when DOCKER_HOST or
# /var/run/docker.sock answers as a Docker engine, else podman), DOCKER_HOST (kept when it
# answers), ENGINE_SOCKET_DIR (where podman's API socket goes; default /run/sagemaker-tfs-engine
# for root, else $XDG_RUNTIME_DIR/sagemaker-tfs-engine).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PODMAN_CONF="${ROOT}/docker/engine/containers.conf"
START_TIMEOUT_SECONDS=60

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

say() { echo "engine.sh: $*" >&2; }

apt_install() {  # apt_install PACKAGE...: install the Debian packages that are missing
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("${package}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} (Debian packages)"
    ${SUDO} env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    ${SUDO} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >&2
  fi
}

api_get() {  # api_get DOCKER_HOST PATH: the engine's answer to GET PATH (non-zero: none)
  local host="$1" path="$2"
  case "${host}" in
    unix://*) curl -fsS --max-time 5 --unix-socket "${host#unix://}" "http://engine${path}" ;;
    tcp://*) curl -fsS --max-time 5 "http://${host#tcp://}${path}" ;;
    *) return 1 ;;
  esac
}

answers() { api_get "$1" /_ping >/dev/null 2>&1; }

is_podman() { api_get "$1" /version 2>/dev/null | grep -q '"Podman Engine"'; }

socket_path() {
  local dir="${ENGINE_SOCKET_DIR:-}"
  if [ -z "${dir}" ]; then
    if [ "$(id -u)" -eq 0 ]; then
      dir=/run/sagemaker-tfs-engine
    else
      dir="${XDG_RUNTIME_DIR:-/tmp}/sagemaker-tfs-engine"
    fi
  fi
  # one service per settings file content: a clone with other settings gets its own
  echo "${dir}/podman-$(sha256sum "${PODMAN_CONF}" | cut -c1-12).sock"
}

start_podman_service() {  # start_podman_service SOCKET: `podman system service` on it
  local sock="$1"
  mkdir -p "$(dirname "${sock}")"
  rm -f "${sock}"
  say "starting podman's Docker API service on ${sock} (log ${sock%.sock}.log)"
  # run from the socket's directory: podman's stats API leaves a file named `oom` in its cwd
  (cd "$(dirname "${sock}")" &&
    CONTAINERS_CONF="${PODMAN_CONF}" exec setsid podman system service --time=0 "unix://${sock}" \
      </dev/null >"${sock%.sock}.log" 2>&1) &
  echo "$!" >"${sock%.sock}.pid"
  local deadline=$((SECONDS + START_TIMEOUT_SECONDS))
  until answers "unix://${sock}"; do
    if ! kill -0 "$(cat "${sock%.sock}.pid")" 2>/dev/null || [ "${SECONDS}" -ge "${deadline}" ]; then
      say "podman system service did not answer on ${sock}:"
      tail -n 20 "${sock%.sock}.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

ensure_podman() {
  apt_install podman runc curl
  export CONTAINERS_CONF="${PODMAN_CONF}"
  if [ -n "${DOCKER_HOST:-}" ] && answers "${DOCKER_HOST}" && is_podman "${DOCKER_HOST}"; then
    return 0  # a podman service the caller chose
  fi
  local sock
  sock="$(socket_path)"
  if ! answers "unix://${sock}"; then
    start_podman_service "${sock}"
  fi
  export DOCKER_HOST="unix://${sock}"
}

ensure_docker() {
  command -v docker >/dev/null || { say "ENGINE=docker but there is no docker CLI"; return 1; }
  local host="${DOCKER_HOST:-unix:///var/run/docker.sock}"
  answers "${host}" || { say "no Docker engine answers on ${host}"; return 1; }
  export DOCKER_HOST="${host}"
}

choose_engine() {
  if [ -n "${ENGINE:-}" ]; then
    echo "${ENGINE}"
    return
  fi
  command -v curl >/dev/null || apt_install curl
  local host
  for host in ${DOCKER_HOST:-} unix:///var/run/docker.sock; do
    if answers "${host}"; then
      if is_podman "${host}"; then echo podman; else echo docker; fi
      return
    fi
  done
  echo podman
}

ensure() {
  ENGINE="$(choose_engine)"
  export ENGINE
  case "${ENGINE}" in
    podman) ensure_podman ;;
    docker) ensure_docker ;;
    *)
      say "ENGINE must be docker or podman, not ${ENGINE}"
      return 2
      ;;
  esac
}

stop_service() {
  local sock pid
  sock="$(socket_path)"
  [ -f "${sock%.sock}.pid" ] || return 0
  pid="$(cat "${sock%.sock}.pid")"
  if tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q "system service"; then
    kill "${pid}"
    say "stopped podman system service (pid ${pid})"
  fi
  rm -f "${sock%.sock}.pid" "${sock}"
}

case "${1:-}" in
  env)
    ensure
    printf 'export ENGINE=%q DOCKER_HOST=%q\n' "${ENGINE}" "${DOCKER_HOST}"
    if [ "${ENGINE}" = podman ]; then
      printf 'export CONTAINERS_CONF=%q\n' "${CONTAINERS_CONF}"
    fi
    ;;
  exec)
    shift
    [ "$#" -gt 0 ] || { say "exec needs a command"; exit 2; }
    ensure
    exec "$@"
    ;;
  running) answers "unix://$(socket_path)" ;;
  stop) stop_service ;;
  *)
    sed -n '2,16p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
