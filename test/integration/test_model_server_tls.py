"""--ssl_config_file: gRPC over TLS (and client certificates) as TF Serving serves it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest
import requests
import trustme
from google.protobuf import text_format
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from conftest import VENV_BIN, model_server
from tfs_model_server.api.grpc_tls import ALTS_AND_SSL, NO_ALTS
from tfs_model_server.core.config_protos import SSLConfig

TIMEOUT = 10


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def ssl_config(path: Path, ca: trustme.CA, client_verify: bool = False) -> Path:
    """A text-format SSLConfig for a server certificate of 127.0.0.1 issued by `ca`."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    config = SSLConfig(
        server_key=cert.private_key_pem.bytes().decode(),
        server_cert=b"".join(blob.bytes() for blob in cert.cert_chain_pems).decode(),
        custom_ca=ca.cert_pem.bytes().decode() if client_verify else "",
        client_verify=client_verify,
    )
    path.write_text(text_format.MessageToString(config))
    return path


def model_status(channel: grpc.Channel) -> str:
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "hp2"
    reply = stub.GetModelStatus(request, timeout=TIMEOUT)
    return get_model_status_pb2.ModelVersionStatus.State.Name(reply.model_version_status[0].state)


def tls_channel(target: str, ca: trustme.CA, client: trustme.LeafCert | None = None):
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.cert_pem.bytes(),
        private_key=client.private_key_pem.bytes() if client else None,
        certificate_chain=client.cert_chain_pems[0].bytes() if client else None,
    )
    return grpc.secure_channel(target, credentials)


def refused(channel: grpc.Channel) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        model_status(channel)
    return info.value.code()


def test_grpc_is_served_over_tls_and_rest_stays_plaintext(model_root, tmp_path, ca):
    config = ssl_config(tmp_path / "ssl.config", ca)
    args = [f"--model_base_path={model_root}/half_plus_two", "--model_name=hp2"]
    with model_server([*args, f"--ssl_config_file={config}"], tmp_path / "log", "hp2") as server:
        with tls_channel(server.grpc_target, ca) as channel:
            assert model_status(channel) == "AVAILABLE"
        with grpc.insecure_channel(server.grpc_target) as channel:
            assert refused(channel) == grpc.StatusCode.UNAVAILABLE
        reply = requests.post(
            f"{server.rest}/v1/models/hp2:predict", json={"instances": [1.0]}, timeout=TIMEOUT
        )
        assert reply.json() == {"predictions": [2.5]}
        assert "(TLS)" in server.log()


def test_client_verify_requires_a_certificate_from_the_custom_ca(model_root, tmp_path, ca):
    config = ssl_config(tmp_path / "ssl.config", ca, client_verify=True)
    args = [f"--model_base_path={model_root}/half_plus_two", "--model_name=hp2"]
    with model_server([*args, f"--ssl_config_file={config}"], tmp_path / "log", "hp2") as server:
        with tls_channel(server.grpc_target, ca, ca.issue_cert("client")) as channel:
            assert model_status(channel) == "AVAILABLE"
        with tls_channel(server.grpc_target, ca) as channel:
            assert refused(channel) == grpc.StatusCode.UNAVAILABLE
        stranger = trustme.CA().issue_cert("client")
        with tls_channel(server.grpc_target, ca, stranger) as channel:
            assert refused(channel) == grpc.StatusCode.UNAVAILABLE


def run_cli(*args: str) -> subprocess.CompletedProcess:
    command = [str(VENV_BIN / "tfs-model-server"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--use_alts_credentials"], NO_ALTS),
        (["--use_alts_credentials", "--ssl_config_file={config}"], ALTS_AND_SSL),
        (["--ssl_config_file={empty}"], "needs both server_key and server_cert"),
        (["--ssl_config_file={garbled}"], "INVALID_ARGUMENT: Invalid protobuf file: '"),
        (["--ssl_config_file={missing}"], "NOT_FOUND: "),
    ],
)
def test_bad_tls_settings_stop_the_start(tmp_path, ca, flags, message):
    paths = {
        "config": ssl_config(tmp_path / "ssl.config", ca),
        "empty": tmp_path / "empty.config",
        "garbled": tmp_path / "garbled.config",
        "missing": tmp_path / "missing.config",
    }
    paths["empty"].write_text("client_verify: false\n")
    paths["garbled"].write_text("server_key: 12\nno_such_field: 1\n")
    args = [f.format(**paths) for f in flags]
    result = run_cli(f"--model_base_path={tmp_path}", *args)
    assert result.returncode == 255, result
    output = (result.stdout + result.stderr).splitlines()
    [line] = [line for line in output if line.startswith("Failed to start")]
    assert line.startswith("Failed to start server. Error: ") and message in line


def test_a_key_and_certificate_that_are_not_pem_stop_the_start(model_root, tmp_path):
    config = tmp_path / "ssl.config"
    config.write_text(text_format.MessageToString(SSLConfig(server_key="k", server_cert="c")))
    result = run_cli(
        f"--model_base_path={model_root}/half_plus_two",
        f"--ssl_config_file={config}",
        "--port=0",
        f"--grpc_socket_path={tmp_path}/grpc.sock",
    )
    assert result.returncode == 255
    assert "Traceback" not in result.stderr
    assert (
        "Failed to start server. Error: INVALID_ARGUMENT: Failed to BuildAndStart gRPC server: "
        "cannot listen on "
        f"unix:{tmp_path}/grpc.sock (with TLS: are server_key and server_cert a matching PEM key"
        " and certificate?)"
    ) in result.stdout.splitlines()
