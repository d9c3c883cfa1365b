"""SageMaker hosting layer: settings, serve supervisor, nginx front door, Python service.

Handlers in code/inference.py may `from sagemaker_serving import HandlerError` to answer with a
4xx status and message of their choosing, and `default_input_handler` /
`default_output_handler` to leave a conversion to the built-in formats.
"""

from sagemaker_serving.user_code.defaults import default_input_handler, default_output_handler
from sagemaker_serving.user_code.handler_api import Context, HandlerError

__all__ = ["Context", "HandlerError", "default_input_handler", "default_output_handler"]
