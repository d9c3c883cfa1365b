#!/usr/bin/env bash
# The Debian image the Dockerfile builds on. debian:bookworm-slim when the engine has it or can
# pull it; otherwise one made from Debian's packages with mmdebstrap, as the official slim image
# is made (minbase, merged /usr, no manuals, docs or translations, apt keeps no caches), from the
# Debian mirrors apt already uses (suites bookworm, bookworm-updates and bookworm-security),
# imported into the engine as BASE_IMAGE and reused while younger than BASE_MAX_AGE_DAYS.
#
#   scripts/debian_base.sh             # the reference of the base to use, as the last line
#   scripts/debian_base.sh --rebuild   # make the mmdebstrap base anew
#
# Environment: ENGINE (docker or podman, from scripts/engine.sh), DEBIAN_IMAGE (use this
# reference and do nothing else), BASE_IMAGE (default localhost/sagemaker-tfs-base:bookworm),
# BASE_MAX_AGE_DAYS (default 7: security updates reach the base at least weekly).
set -euo pipefail

ENGINE="${ENGINE:-docker}"
OFFICIAL="docker.io/library/debian:bookworm-slim"
BASE_IMAGE="${BASE_IMAGE:-localhost/sagemaker-tfs-base:bookworm}"
BASE_MAX_AGE_DAYS="${BASE_MAX_AGE_DAYS:-7}"
SUITE=bookworm
PULL_TIMEOUT_SECONDS=300

say() { echo "debian_base.sh: $*" >&2; }

have_image() { "${ENGINE}" image inspect "$1" >/dev/null 2>&1; }

young_enough() {  # young_enough IMAGE: created within BASE_MAX_AGE_DAYS
  local created
  created="$("${ENGINE}" image inspect --format '{{.Created}}' "$1" 2>/dev/null)" || return 1
  created="$(date -d "${created% UTC}" +%s 2>/dev/null)" || return 1  # podman adds " UTC"
  [ $(($(date +%s) - created)) -lt $((BASE_MAX_AGE_DAYS * 86400)) ]
}

# `deb URI SUITE COMPONENTS` lines for every Debian repository apt uses for $SUITE, or the
# Debian defaults when apt uses none (another distribution, or no `apt-get update` yet).
debian_sources() {
  local lines=""
  if command -v apt-get >/dev/null; then
    # shellcheck disable=SC2016 # apt's own $(FIELD) format, not the shell's
    lines="$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT) $(ORIGIN)' \
      'Identifier: Packages' 2>/dev/null |
      awk -v suite="${SUITE}" '$4 == "Debian" && ($2 == suite || index($2, suite "-") == 1) {
        print "deb " $1 " " $2 " " $3 }' | sort -u)"
  fi
  if [ -z "${lines}" ]; then
    lines="deb http://deb.debian.org/debian ${SUITE} main
deb http://deb.debian.org/debian ${SUITE}-updates main
deb http://deb.debian.org/debian-security ${SUITE}-security main"
  fi
  echo "${lines}"
}

build_base() {
  if ! command -v mmdebstrap >/dev/null; then
    say "installing mmdebstrap (Debian package)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    ${sudo} env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    ${sudo} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      mmdebstrap >&2
  fi
  local sources=()
  mapfile -t sources < <(debian_sources)
  say "building ${BASE_IMAGE} with mmdebstrap from: ${sources[*]}"
  local started="${SECONDS}" log
  log="$(mktemp)"
  if ! mmdebstrap --variant=minbase --quiet \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='Acquire::Languages "none"' \
    --aptopt='Dir::Cache::pkgcache ""' \
    --aptopt='Dir::Cache::srcpkgcache ""' \
    --aptopt='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; }' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    "${SUITE}" - "${sources[@]}" 2>>"${log}" |
    "${ENGINE}" import \
      --change 'CMD ["bash"]' \
      --change "LABEL org.opencontainers.image.title=\"Debian ${SUITE} (mmdebstrap minbase)\"" \
      - "${BASE_IMAGE}" >>"${log}" 2>&1; then
    tail -n 40 "${log}" >&2
    rm -f "${log}"
    say "mmdebstrap | ${ENGINE} import failed"
    return 1
  fi
  rm -f "${log}"
  say "built ${BASE_IMAGE} in $((SECONDS - started)) s"
}

main() {
  if [ -n "${DEBIAN_IMAGE:-}" ]; then
    echo "${DEBIAN_IMAGE}"
    return
  fi
  if [ "${1:-}" != "--rebuild" ]; then
    if have_image "${OFFICIAL}" ||
      timeout "${PULL_TIMEOUT_SECONDS}" "${ENGINE}" pull --quiet "${OFFICIAL}" >/dev/null 2>&1; then
      echo "${OFFICIAL}"
      return
    fi
    if have_image "${BASE_IMAGE}" && young_enough "${BASE_IMAGE}"; then
      say "using ${BASE_IMAGE} (${OFFICIAL} cannot be pulled)"
      echo "${BASE_IMAGE}"
      return
    fi
    say "${OFFICIAL} cannot be pulled: making the base from Debian's packages"
  fi
  build_base
  echo "${BASE_IMAGE}"
}

main "$@"
