# The classic SageMaker TensorFlow Serving pre/post-processing script for JPEG images, as the
# AWS documentation shows it: the request body is one image (Content-Type application/x-image);
# input_handler wraps its bytes as {"b64": ...}, the TF Serving REST encoding of binary strings,
# for a model whose serving signature takes the encoded image and decodes it in the graph.
import base64
import io  # noqa: F401 - unused, kept as in the documented script
import json

import requests  # noqa: F401 - unused, kept as in the documented script


def input_handler(data, context):
    """Pre-process request input before it is sent to TensorFlow Serving REST API

    Args:
        data (obj): the request data stream
        context (Context): an object containing request and configuration details

    Returns:
        (dict): a JSON-serializable dict that contains request body and headers
    """
    if context.request_content_type == "application/x-image":
        payload = data.read()
        encoded_image = base64.b64encode(payload).decode("utf-8")
        instance = [{"b64": encoded_image}]
        return json.dumps({"instances": instance})
    raise ValueError(
        '{{"error": "unsupported content type {}"}}'.format(
            context.request_content_type or "unknown"
        )
    )


def output_handler(response, context):
    """Post-process TensorFlow Serving output before it is returned to the client.

    Args:
        response (obj): the TensorFlow serving response
        context (Context): an object containing request and configuration details

    Returns:
        (bytes, string): data to return to client, response content type
    """
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    response_content_type = context.accept_header
    prediction = response.content
    return prediction, response_content_type
