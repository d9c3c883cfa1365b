#!/usr/bin/env bash
# The last step of every image target in docker/Dockerfile, as root: install our wheel into
# /opt/venv, check that the image holds what `serve` needs, and record what it holds.
#
#   finish_image.sh MODEL_SERVER DIST_DIR
#
# MODEL_SERVER is tensorflow_model_server (the real binary, no TensorFlow in Python) or
# tfs-model-server (ours, on the TensorFlow wheel); DIST_DIR holds our wheel.
# The record: /opt/sagemaker-tfs/{debian-packages,python-packages,model-server}.txt, the exact
# versions this build resolved (Debian packages are pinned by upstream version only).
set -euo pipefail

model_server="$1"
dist="$2"
record=/opt/sagemaker-tfs

/opt/venv/bin/pip install --no-cache-dir --no-deps --no-index "${dist}"/*.whl
/opt/venv/bin/python -c '
import sagemaker_serving.serve, sagemaker_serving.python_service
from sagemaker_serving.launcher.nginx_config import NGINX_DIR
assert (NGINX_DIR / "tfs.js").is_file(), NGINX_DIR'
command -v serve tfs-batch-transform >/dev/null
nginx -v
test -e /usr/lib/nginx/modules/ngx_http_js_module.so
test -e /usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so

# serve preloads it into the model server: wildcard binds become loopback ones (and connections
# from other users are closed at accept)
LD_PRELOAD=/opt/venv/lib/loopback_guard.so python3 -c '
import socket
s = socket.socket()
s.bind(("0.0.0.0", 0))
assert s.getsockname()[0] == "127.0.0.1", s.getsockname()'

case "${model_server}" in
  tensorflow_model_server)
    tensorflow_model_server --version
    if /opt/venv/bin/python -c 'import tensorflow' 2>/dev/null; then
      echo "finish_image.sh: tensorflow must not be installed beside the real model server" >&2
      exit 1
    fi
    ;;
  tfs-model-server)
    tfs-model-server --version
    ;;
  *)
    echo "finish_image.sh: unknown model server ${model_server}" >&2
    exit 2
    ;;
esac

mkdir -p "${record}"
dpkg-query -W -f '${Package}=${Version}\n' | sort >"${record}/debian-packages.txt"
/opt/venv/bin/pip freeze --all | sort >"${record}/python-packages.txt"
echo "${model_server}" >"${record}/model-server.txt"
