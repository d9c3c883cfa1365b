"""TF Serving's REST JSON: reading requests, turning them into tensors or tf.Examples, writing
responses, printing status and metadata protos."""
