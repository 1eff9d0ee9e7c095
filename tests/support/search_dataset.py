"""A large message set on PostgreSQL, made in the database (``generate_series``), for the
search tests whose finding is about size: the planner's choice and the CPU a search costs
are only real when a user's threads hold tens of thousands of messages.

Every message is a line of words from ``VOCABULARY`` (about ``WORDS_PER_MESSAGE`` of them,
picked by a hash of the step's number, so the same dataset comes out each time); a word the
tests search for (``RARE_WORD``) is in one message in ``RARE_EVERY``.
"""

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection

from threads_app.models import Thread
from threads_app.services import default_box_for

VOCABULARY = (
    *("apple", "banana", "cherry", "delta", "echo", "falcon", "garden", "harbor", "island"),
    *("jungle", "kettle", "lantern", "meadow", "nectar", "orchard", "pepper", "quartz", "river"),
    *("saddle", "timber", "umbrella", "velvet", "willow", "yonder", "zephyr", "anchor", "bridge"),
    *("candle", "dragon", "ember", "forest", "glacier", "hollow", "ivory", "jasper", "kernel"),
)
WORDS_PER_MESSAGE = 150
RARE_WORD = "capybara"
RARE_EVERY = 500


@dataclass(frozen=True)
class MessageSet:
    owner: User
    threads: int
    steps: int


def make_message_set(owner: User, *, threads: int, steps_per_thread: int) -> MessageSet:
    """``threads`` threads of ``owner`` with ``steps_per_thread`` user and assistant messages
    each (alternating), then ANALYZE, so the planner knows the tables' sizes."""
    box = default_box_for(owner)
    made = Thread.objects.bulk_create(
        Thread(id=uuid.uuid4(), owner=owner, box=box, name=f"thread {n}") for n in range(threads)
    )
    thread_ids = [thread.pk for thread in made]
    vocabulary = "{" + ",".join(VOCABULARY) + "}"
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO threads_app_step
                (id, thread_id, seq, type, name, parent_id, output, input, content, metadata,
                 is_error, created_at)
            SELECT gen_random_uuid(), t.id, s.n,
                   CASE WHEN s.n %% 2 = 0 THEN 'user_message' ELSE 'assistant_message' END,
                   '', NULL,
                   (SELECT string_agg(
                               CASE WHEN (s.n + t.ord * %s) %% %s = 0 AND w.k = 1 THEN %s
                                    ELSE (%s::text[])[1 + abs(hashint8(s.n * 7919 + t.ord * 104729 + w.k)) %% %s]
                               END, ' ')
                      FROM generate_series(1, %s) AS w(k)),
                   '', '[]'::jsonb, '{}'::jsonb, false, now()
              FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(id, ord)
             CROSS JOIN generate_series(1, %s) AS s(n)
            """,
            [
                steps_per_thread,
                RARE_EVERY,
                RARE_WORD,
                vocabulary,
                len(VOCABULARY),
                WORDS_PER_MESSAGE,
                thread_ids,
                steps_per_thread,
            ],
        )
        cursor.execute(
            "UPDATE threads_app_thread SET last_seq = %s WHERE id = ANY(%s)", [steps_per_thread, thread_ids]
        )
        cursor.execute("ANALYZE threads_app_step")
        cursor.execute("ANALYZE threads_app_thread")
    return MessageSet(owner, threads, threads * steps_per_thread)
