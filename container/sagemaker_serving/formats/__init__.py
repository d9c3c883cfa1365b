"""The built-in formats: client payloads -> TF Serving REST requests (request.py and one
decoder module per format) or Predict tensors (tensors.py), and TF Serving answers -> the
client's Accept (answers.py)."""
