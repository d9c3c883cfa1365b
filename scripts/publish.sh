#!/usr/bin/env bash
# Push built images to a registry: Amazon ECR by default (log in, create the repository when
# missing), or the one REGISTRY names. Each pushed image is printed by digest
# (REGISTRY/REPOSITORY@sha256:...), the last one as the last line: the reference to give
# CreateModel as `Image`, which no later push can change.
#
#   scripts/publish.sh                     # the cpu image, to ECR
#   scripts/publish.sh cpu gpu             # those variants
#   REGISTRY=localhost:5000 REGISTRY_TLS_VERIFY=false scripts/publish.sh cpu
#
# Environment: REGISTRY (host[:port][/path]; unset: <AWS_ACCOUNT_ID>.dkr.ecr.<AWS_REGION>...,
# with AWS_REGION else AWS_DEFAULT_REGION else `aws configure get region`, and AWS_ACCOUNT_ID
# else `aws sts get-caller-identity`); REGISTRY_TLS_VERIFY (false for a plain-HTTP registry on
# localhost); REPOSITORY (default ECR_REPOSITORY, else IMAGE_REPO, else sagemaker-tfs);
# IMAGE_REPO (the local repository scripts/build.sh tagged); IMAGE (push this local image
# instead of the variants' tags); DOCKER (a docker-compatible CLI, with no engine setup).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE_REPO="${IMAGE_REPO:-sagemaker-tfs}"
REPOSITORY="${REPOSITORY:-${ECR_REPOSITORY:-${IMAGE_REPO}}}"
TLS_VERIFY="${REGISTRY_TLS_VERIFY:-true}"

say() { echo "publish.sh: $*" >&2; }

# the local images first: an unknown variant stops here, before any AWS call
if [ -n "${IMAGE:-}" ]; then
  locals=("${IMAGE}")
else
  variants=("$@")
  [ "${#variants[@]}" -gt 0 ] || variants=(cpu)
  mapfile -t locals < <("${ROOT}/scripts/build.sh" --print-tags "${variants[@]}")
fi

if [ -n "${DOCKER:-}" ]; then
  ENGINE_CLI="${DOCKER}"
else
  eval "$("${ROOT}/scripts/engine.sh" env)"
  ENGINE_CLI="${ENGINE}"
fi

ecr_login() {  # ecr_login: set `registry`, log the engine in, create the repository if missing
  local region account domain
  region="${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}"
  if [ -z "${region}" ]; then
    say "set REGISTRY, or AWS_REGION for ECR (or configure a default region)"
    exit 2
  fi
  account="${AWS_ACCOUNT_ID:-$(aws sts get-caller-identity --query Account --output text)}"
  domain="amazonaws.com"
  case "${region}" in
    cn-*) domain="amazonaws.com.cn" ;;
  esac
  registry="${account}.dkr.ecr.${region}.${domain}"
  say "logging in to ${registry}"
  aws ecr get-login-password --region "${region}" |
    "${ENGINE_CLI}" login --username AWS --password-stdin "${registry}"
  if ! aws ecr describe-repositories --region "${region}" \
    --repository-names "${REPOSITORY}" >/dev/null 2>&1; then
    say "creating ECR repository ${REPOSITORY}"
    aws ecr create-repository --region "${region}" --repository-name "${REPOSITORY}" \
      --image-scanning-configuration scanOnPush=true >/dev/null
  fi
}

push() {  # push REMOTE: push it; print its digest
  local remote="$1"
  if [ "${ENGINE_CLI}" = podman ]; then
    local digest_file
    digest_file="$(mktemp)"
    podman push --quiet --tls-verify="${TLS_VERIFY}" --digestfile "${digest_file}" "${remote}" >&2
    cat "${digest_file}"
    rm -f "${digest_file}"
  else
    # Docker trusts plain HTTP on localhost by itself; other insecure registries are set in
    # its daemon.json
    "${ENGINE_CLI}" push "${remote}" >&2
    "${ENGINE_CLI}" image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' \
      "${remote}" | sed -n "s|^${remote%:*}@||p" | head -n 1
  fi
}

if [ -n "${REGISTRY:-}" ]; then
  registry="${REGISTRY%/}"
else
  ecr_login
fi

for local in "${locals[@]}"; do
  tag="${local##*:}"
  remote="${registry}/${REPOSITORY}:${tag}"
  say "pushing ${local} as ${remote}"
  "${ENGINE_CLI}" tag "${local}" "${remote}"
  digest="$(push "${remote}")"
  if [ -z "${digest}" ]; then
    say "the push of ${remote} gave no digest"
    exit 1
  fi
  echo "${registry}/${REPOSITORY}@${digest}"
done
