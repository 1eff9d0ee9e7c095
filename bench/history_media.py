"""A history read of a thread full of photos: Tether's stripped read against a naive one.

    .venv/bin/python bench/history_media.py [--steps 200] [--photos 50] [--photo-bytes 1000000] [--runs 9]

It prepares a PostgreSQL database (``DATABASE_URL``, default ``tether_bench_media`` on the
local server; created and migrated when missing) and writes one thread of ``--steps`` steps,
``--photos`` of them user steps carrying a photo of about ``--photo-bytes`` (random bytes
behind real JPEG / PNG magic, stored the way a send stores it: inline, as a base64 image
block in the step's content). Then, in this process, against the same rows:

- **stripped**: ``threads_app.selectors.history_page``, the selector behind
  ``GET /api/threads/<id>/history/`` (with media_app's content filter, as in the server): the
  database replaces each payload by a marker, only the small skeleton is parsed, and each
  photo comes back as ``{"type": "image", "imageRef": ...}``;
- **naive**: the same rows with ``content`` selected as is
  (``Step.objects.filter(...).values(*STEP_FIELDS)``), Django parsing every row's JSON,
  payloads included.

Reported: the median wall time of each read over ``--runs`` alternating runs (after a warm-up
of each), the peak of Python allocations during one read of each (``tracemalloc``), and the
growth of the process's peak RSS during one read of each, in a forked child per read (RSS also
counts libpq's buffer of the raw result, which tracemalloc does not see). The bar: the
stripped read at least 5x faster and with at least 10x less peak memory, and no payload in
its response. Exits 1 when a payload leaks or the bar is missed.
"""

import argparse
import base64
import gc
import json
import multiprocessing
import os
import re
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_media"
USER = "bench-media"
MAGIC = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
TYPES = ("image/jpeg", "image/png")
LONG_BASE64 = re.compile(r"[A-Za-z0-9+/=]{200,}")
SPEED_BAR = 5.0
MEMORY_BAR = 10.0


# --- the thread ---------------------------------------------------------------------------------


def build_thread(steps: int, photos: int, photo_bytes: int) -> tuple[uuid.UUID, dict[str, bytes], int]:
    """A fresh thread of ``steps`` steps, ``photos`` of them user steps with one photo each.
    Returns its id, the photos by step id, and the bytes of stored content."""
    from django.db import connection
    from django.utils import timezone

    from threads_app.models import Step, Thread
    from threads_app.services import default_box_for

    user, _token = common.bench_user(USER)
    Thread.objects.filter(owner=user).delete()
    box = default_box_for(user)
    thread = Thread.objects.create(owner=user, box=box, name="a thread full of photos", last_seq=steps)
    every = max(1, steps // photos) if photos else steps + 1
    by_step: dict[str, bytes] = {}
    batch: list[Step] = []
    now = timezone.now()
    for seq in range(1, steps + 1):
        step_id = uuid.uuid4()
        if photos and (seq - 1) % every == 0 and len(by_step) < photos:
            kind = len(by_step) % 2
            data = MAGIC[kind] + os.urandom(photo_bytes - len(MAGIC[kind]))
            by_step[str(step_id)] = data
            text = f"photo {len(by_step)}: what do you see?"
            content: list[dict[str, Any]] = [
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": TYPES[kind],
                        "data": base64.b64encode(data).decode(),
                    },
                },
                {"type": "text", "text": text},
            ]
            step = Step(id=step_id, thread=thread, seq=seq, type="user_message", name=USER, output=text)
            step.content = content
        else:
            text = f"step {seq}: " + "a plain answer without photos. " * 4
            step = Step(
                id=step_id, thread=thread, seq=seq, type="assistant_message", name="assistant", output=text
            )
            step.content = [{"type": "text", "text": text}]
        step.created_at = now
        batch.append(step)
        if len(batch) == 10:
            Step.objects.bulk_create(batch)
            batch = []
    Step.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(pg_column_size(content)) FROM threads_app_step WHERE thread_id = %s", [thread.pk]
        )
        stored = int(cursor.fetchone()[0] or 0)
        cursor.execute("ANALYZE threads_app_step")
    return thread.pk, by_step, stored


# --- the two reads --------------------------------------------------------------------------------


def stripped_read(thread_id: uuid.UUID) -> list[dict[str, Any]]:
    from threads_app.selectors import history_page

    steps, more = history_page(thread_id, after_seq=0, limit=500)
    assert not more
    return steps


def naive_read(thread_id: uuid.UUID) -> list[dict[str, Any]]:
    from threads_app.models import Step
    from threads_app.wire import STEP_FIELDS, step_row_to_dict

    rows = Step.objects.filter(thread_id=thread_id).order_by("seq").values(*STEP_FIELDS)[:501]
    return [step_row_to_dict(row) for row in rows]


def timed(read: Callable[[uuid.UUID], Any], thread_id: uuid.UUID) -> float:
    gc.collect()
    start = time.perf_counter()
    result = read(thread_id)
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def python_peak(read: Callable[[uuid.UUID], Any], thread_id: uuid.UUID) -> int:
    """Peak bytes of Python allocations during one read (what the read allocates on top)."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    result = read(thread_id)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak - base


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _rss_child(name: str, thread_id: uuid.UUID, out: Any) -> None:
    read = {"stripped": stripped_read, "naive": naive_read}[name]
    try:
        read(thread_id)  # connect and warm up, so the peak measures the read alone
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM (the peak) to the current RSS
        before = _status_kib("VmRSS")
        read(thread_id)
        out.send((_status_kib("VmHWM") - before) * 1024)
    except Exception as exc:
        out.send(f"{type(exc).__name__}: {exc}")


def rss_peak(name: str, thread_id: uuid.UUID) -> int | str:
    """Growth of the peak RSS during one read, in a forked child with its own connection."""
    from django.db import connections

    connections.close_all()
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_rss_child, args=(name, thread_id, sender))
    child.start()
    result: int | str = receiver.recv()
    child.join()
    return result


# --- checks ---------------------------------------------------------------------------------------


def check_stripped(steps: list[dict[str, Any]], thread_id: uuid.UUID, photos: dict[str, bytes]) -> int:
    """No payload in the response, a ref for every photo, and the refs resolve to the bytes.
    Returns the response size in bytes."""
    from django.contrib.auth import get_user_model

    from media_app.blocks import parse_ref
    from media_app.services import read_image

    body = json.dumps(steps)
    leak = LONG_BASE64.search(body)
    if leak:
        raise SystemExit(f"FAIL: a base64 payload leaked into the stripped read: {leak.group(0)[:40]}...")
    refs = [b["imageRef"] for s in steps for b in s["content"] if b.get("type") == "image"]
    expected = [f"{thread_id}/{step_id}/0" for step_id in photos]
    if refs != expected:
        raise SystemExit(f"FAIL: {len(refs)} refs, expected {len(expected)}")
    user = get_user_model().objects.get(username=USER)
    for ref in refs[:3] + refs[-2:]:
        photo = read_image(user, parse_ref(ref))
        if photo.data != photos[ref.split("/")[1]]:
            raise SystemExit(f"FAIL: {ref} does not resolve to its photo")
    return len(body.encode())


def size(value: float) -> str:
    return f"{value / 1_048_576:.1f} MiB" if value >= 1_048_576 else f"{value / 1024:.0f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--photos", type=int, default=50)
    parser.add_argument("--photo-bytes", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()

    env = common.bench_env("sessions_app.default_app", default_database_url=DEFAULT_DATABASE_URL)
    common.prepare_database(env)
    common.setup_django(env)
    from django.db import connection

    started = time.perf_counter()
    thread_id, photos, stored = build_thread(args.steps, args.photos, args.photo_bytes)
    built = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    print(
        f"history read of one thread: {args.steps} steps, {len(photos)} photos of "
        f"{size(args.photo_bytes)} (base64 inline in the user steps), {size(stored)} of stored content; "
        f"PostgreSQL {version} ({common.database_name(env)}), built in {built:.1f} s"
    )

    stripped = stripped_read(thread_id)
    response_bytes = check_stripped(stripped, thread_id, photos)
    naive = naive_read(thread_id)
    naive_bytes = len(json.dumps(naive).encode())
    del stripped, naive

    times: dict[str, list[float]] = {"naive": [], "stripped": []}
    for _ in range(args.runs):
        times["naive"].append(timed(naive_read, thread_id))
        times["stripped"].append(timed(stripped_read, thread_id))
    median = {name: statistics.median(values) for name, values in times.items()}
    peaks = {"naive": python_peak(naive_read, thread_id), "stripped": python_peak(stripped_read, thread_id)}
    rss = {"naive": rss_peak("naive", thread_id), "stripped": rss_peak("stripped", thread_id)}

    print()
    print(f"| read | median ({args.runs} runs) | peak Python memory | peak RSS growth | response (JSON) |")
    print("|---|---|---|---|---|")
    for name, label, body in (
        ("naive", "naive: parse every row's JSON", naive_bytes),
        ("stripped", "Tether: stripped in the database", response_bytes),
    ):
        peak = rss[name]
        rss_text = size(peak) if isinstance(peak, int) else f"n/a ({peak})"
        print(f"| {label} | {median[name] * 1000:.1f} ms | {size(peaks[name])} | {rss_text} | {size(body)} |")
    speed = median["naive"] / median["stripped"]
    memory = peaks["naive"] / max(1, peaks["stripped"])
    print()
    print(
        f"faster: {speed:.1f}x (bar {SPEED_BAR:.0f}x)   less peak Python memory: {memory:.1f}x (bar {MEMORY_BAR:.0f}x)"
    )
    if isinstance(rss["naive"], int) and isinstance(rss["stripped"], int):
        # RSS moves in pages and reuses freed memory: a read that needs little may not grow it.
        growth = f"{rss['naive'] / rss['stripped']:.0f}x" if rss["stripped"] > 0 else "no growth at all"
        print(f"peak RSS growth: naive {size(rss['naive'])}, stripped {size(rss['stripped'])} ({growth})")
    print(
        f"no payload in the stripped response: yes ({len(photos)} imageRefs, sampled refs resolve byte for byte)"
    )
    met = speed >= SPEED_BAR and memory >= MEMORY_BAR
    print(f"bar met: {'yes' if met else 'NO'}   (total {time.perf_counter() - started:.0f} s)")
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
