"""The gRPC server's credentials, built from --ssl_config_file as TF Serving builds them.

TF Serving (server.cc, BuildServerCredentials) serves gRPC in plaintext without the file;
with it, TLS on the port and on the unix socket alike, from a text-format SSLConfig: the
server's PEM key and certificate, and with `client_verify` a client certificate is required
and checked against `custom_ca` (gRPC's bundled roots when that is empty). REST stays
plaintext, as in TF Serving. ALTS (--use_alts_credentials) exists only on Google Cloud: it is
refused here rather than served in plaintext.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from tfs_model_server.core.config_protos import read_ssl_config
from tfs_model_server.errors import invalid_argument
from tfs_model_server.options import ServerOptions

ALTS_AND_SSL = "Either use_alts_credentials must be false or ssl_config_file must be empty."
NO_ALTS = (
    "--use_alts_credentials is not supported by tfs-model-server (ALTS exists only on Google"
    " Cloud); use --ssl_config_file for TLS"
)


def grpc_roots() -> bytes:
    """The root certificates gRPC's C core uses when none are given (bundled with grpcio)."""
    return (Path(grpc.__file__).parent / "_cython" / "_credentials" / "roots.pem").read_bytes()


def server_credentials(options: ServerOptions) -> grpc.ServerCredentials | None:
    """TLS credentials for the gRPC server, or None to serve plaintext."""
    if options.use_alts_credentials:
        raise invalid_argument(ALTS_AND_SSL if options.ssl_config_file else NO_ALTS)
    if not options.ssl_config_file:
        return None
    config = read_ssl_config(options.ssl_config_file)
    if not config.server_key or not config.server_cert:
        raise invalid_argument(
            f"SSL config file '{options.ssl_config_file}' needs both server_key and server_cert"
        )
    roots = config.custom_ca.encode() if config.custom_ca else None
    if config.client_verify and roots is None:
        roots = grpc_roots()
    return grpc.ssl_server_credentials(
        [(config.server_key.encode(), config.server_cert.encode())],
        root_certificates=roots,
        require_client_auth=config.client_verify,
    )
