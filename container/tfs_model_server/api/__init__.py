"""The model server's front ends: TF Serving's REST API (ASGI), its two gRPC services, and
the Prometheus metrics both record."""
