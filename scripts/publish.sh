#!/usr/bin/env bash
# Push the built images to Amazon ECR: log in, create the repository when missing, tag, push.
#
#   scripts/publish.sh               # every variant built by scripts/build.sh
#   scripts/publish.sh cpu           # some of them
#
# Environment: AWS_REGION (else AWS_DEFAULT_REGION, else `aws configure get region`),
# AWS_ACCOUNT_ID (else `aws sts get-caller-identity`), ECR_REPOSITORY (default: IMAGE_REPO,
# default sagemaker-tfs), IMAGE_REPO (the local repository scripts/build.sh tagged).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER="${DOCKER:-docker}"
IMAGE_REPO="${IMAGE_REPO:-sagemaker-tfs}"
ECR_REPOSITORY="${ECR_REPOSITORY:-${IMAGE_REPO}}"

# the tags first: an unknown variant stops here, before any AWS call
tags_text="$("${ROOT}/scripts/build.sh" --print-tags "$@")"
mapfile -t tags <<<"${tags_text}"

region="${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}"
if [ -z "${region}" ]; then
  echo "publish.sh: set AWS_REGION (or configure a default region)" >&2
  exit 2
fi
account="${AWS_ACCOUNT_ID:-$(aws sts get-caller-identity --query Account --output text)}"
domain="amazonaws.com"
case "${region}" in
  cn-*) domain="amazonaws.com.cn" ;;
esac
registry="${account}.dkr.ecr.${region}.${domain}"

echo "==> logging in to ${registry}" >&2
aws ecr get-login-password --region "${region}" |
  "${DOCKER}" login --username AWS --password-stdin "${registry}"

if ! aws ecr describe-repositories --region "${region}" \
  --repository-names "${ECR_REPOSITORY}" >/dev/null 2>&1; then
  echo "==> creating ECR repository ${ECR_REPOSITORY}" >&2
  aws ecr create-repository --region "${region}" --repository-name "${ECR_REPOSITORY}" \
    --image-scanning-configuration scanOnPush=true >/dev/null
fi

for tag in "${tags[@]}"; do
  remote="${registry}/${ECR_REPOSITORY}:${tag##*:}"
  echo "==> pushing ${tag} as ${remote}" >&2
  "${DOCKER}" tag "${tag}" "${remote}"
  "${DOCKER}" push "${remote}"
  echo "${remote}"
done
