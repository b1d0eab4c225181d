"""Reads scalars back from TensorBoard event files (the TFRecord framing, then the protobuf),
with tensorboardX's own generated protobuf classes, so the tests need no TensorFlow.

As TensorBoard does, a session start at step s (a writer's ``purge_step``) drops the events
read before it from step s on."""

import struct
from collections import defaultdict
from pathlib import Path

from tensorboardX.proto.event_pb2 import Event, SessionLog


def read_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    scalars = defaultdict(list)
    for path in sorted(Path(directory).glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            record = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            event = Event.FromString(record)
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                for tag, points in scalars.items():
                    scalars[tag] = [(step, v) for step, v in points if step < event.step]
            for value in event.summary.value:
                scalars[value.tag].append((event.step, value.simple_value))
    return dict(scalars)
