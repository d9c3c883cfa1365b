"""code/inference.py whose handler streams (service/streaming.py), for the native and the image
tests of streamed answers."""

STREAMER = """
import json
import time


def handler(data, context):
    kind = context.request_content_type
    if kind == "application/x-chunks":  # body: how many, and the seconds between them
        count, pause = json.loads(data.read())

        def chunks():
            for i in range(count):
                yield f"chunk {i}\\n"
                time.sleep(pause)

        return chunks(), "text/plain"
    if kind == "application/x-fail-midway":
        def failing():
            yield "first\\n"
            raise ValueError("broke after the first chunk")

        return failing(), "text/plain"
    if kind == "application/x-endless":
        def endless():
            sent = 0
            try:
                while True:
                    yield b"x" * 1024 + b"\\n"
                    sent += 1
                    time.sleep(0.05)
            finally:
                print(f"endless generator closed after {sent} chunks", flush=True)

        return endless(), "application/octet-stream"
    if kind == "application/x-bare":  # a bare generator: the type Accept asks for
        return (f"{n}\\n" for n in range(3))
    return data.read(), "application/json"
"""
