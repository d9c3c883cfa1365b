"""Server-side batching as TF Serving does it: BatchingParameters (options), the shared
scheduler's queues and threads (scheduler), and merging and splitting batch tensors (tensors)."""
