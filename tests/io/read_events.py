#!/usr/bin/env python3
"""Reads a TensorBoard log directory with the tensorboard package and prints what it found.

    python3 tests/io/read_events.py runs/cnn

tests/io/summary.test.cpp runs this to check that TensorBoard itself reads fluxion's event files.
It prints JSON Lines, one flat object per event, sorted by kind, tag and step:

    {"kind": "scalar", "tag": "loss", "step": 3, "value": 0.25}
    {"kind": "histogram", "tag": "w", "step": 1, "num": 6.0, "min": -1.0, "max": 2.0, "sum": 1.5,
     "sum_squares": 7.25, "bucket_limit": [...], "bucket": [...]}
    {"kind": "image", "tag": "img", "step": 2, "width": 4, "height": 3, "pixels": [...]}

"pixels" holds the decoded PNG's bytes, row-major and interleaved, when Pillow is installed (the
tensorboard package installs it); it is left out otherwise. Exit status 2: tensorboard is missing.
"""
import json
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:  # the C++ test checks for the import first; this is for people
    print(f"read_events.py: cannot import tensorboard ({e}); run: python3 -m pip install tensorboard",
          file=sys.stderr)
    sys.exit(2)


def decode_png(encoded):
    try:
        import io
        from PIL import Image
    except ImportError:
        return None
    with Image.open(io.BytesIO(encoded)) as img:
        return list(img.tobytes())


def main():
    if len(sys.argv) != 2:
        print("usage: read_events.py LOG_DIR", file=sys.stderr)
        return 1
    # 0 keeps every event: the defaults sample (reservoir) scalars, histograms and images.
    keep_all = {
        event_accumulator.SCALARS: 0,
        event_accumulator.HISTOGRAMS: 0,
        event_accumulator.IMAGES: 0,
        event_accumulator.COMPRESSED_HISTOGRAMS: 0,
    }
    acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance=keep_all)
    acc.Reload()
    tags = acc.Tags()
    lines = []
    for tag in sorted(tags.get("scalars", [])):
        for e in acc.Scalars(tag):
            lines.append({"kind": "scalar", "tag": tag, "step": e.step, "value": e.value})
    for tag in sorted(tags.get("histograms", [])):
        for e in acc.Histograms(tag):
            h = e.histogram_value
            lines.append({"kind": "histogram", "tag": tag, "step": e.step, "num": h.num, "min": h.min,
                          "max": h.max, "sum": h.sum, "sum_squares": h.sum_squares,
                          "bucket_limit": list(h.bucket_limit), "bucket": list(h.bucket)})
    for tag in sorted(tags.get("images", [])):
        for e in acc.Images(tag):
            line = {"kind": "image", "tag": tag, "step": e.step, "width": e.width, "height": e.height}
            pixels = decode_png(e.encoded_image_string)
            if pixels is not None:
                line["pixels"] = pixels
            lines.append(line)
    for line in lines:
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
