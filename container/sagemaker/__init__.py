"""SageMaker hosting layer: settings, serve supervisor, nginx front door, Python service.

Handlers in code/inference.py may `from sagemaker_serving import HandlerError` to answer with a
4xx status and message of their choosing.
"""

from .handler_context import Context, HandlerError

__all__ = ["Context", "HandlerError"]
