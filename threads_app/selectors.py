"""Read-only queries over threads and their transcripts, always scoped to an owner."""

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import connections
from django.db.models import (
    BooleanField,
    DateTimeField,
    Exists,
    Expression,
    F,
    FilteredRelation,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.db.models.expressions import Col
from django.db.models.functions import Cast, Coalesce

from threads_app import attachments, content_filters
from threads_app.asks import thread_ask_events
from threads_app.models import DEFAULT_BOX_NAME, AcceptedMessage, Box, Feedback, Step, StepType, Thread
from threads_app.read_budget import read_budget
from threads_app.read_cuts import MIN_STEP_WIRE_BYTES, cut_seq
from threads_app.transcript_budgets import (
    CHUNK_ROWS,
    FIRST_CHUNK_ROWS,
    STEP_OVERHEAD_BYTES,
    context_bytes,
    take_pages_within,
    take_within,
    wire_bytes,
)
from threads_app.wire import (
    STEP_FIELDS,
    feedback_to_dict,
    iso,
    step_to_dict,
    step_values_to_dict,
    thread_to_dict,
)
from threads_app.wire_columns import IsoTime, UuidText


def thread_owner_id(thread_id: uuid.UUID) -> int | None:
    """The owner's pk of a thread (deleted ones included), or None when it does not exist."""
    return Thread.objects.filter(pk=thread_id).values_list("owner_id", flat=True).first()


def thread_owner_and_profile(thread_id: uuid.UUID) -> tuple[int, str] | None:
    """A thread's owner pk and chat profile (deleted ones included), or None when it does not
    exist: a chat reopening the thread takes its profile, which never changes."""
    row = Thread.objects.filter(pk=thread_id).values_list("owner_id", "chat_profile").first()
    return None if row is None else (row[0], row[1])


def get_owned_thread(user: User, thread_id: uuid.UUID) -> Thread | None:
    """The live (not deleted) thread if ``user`` owns it; None for missing or foreign ids."""
    return (
        Thread.objects.select_related("owner")
        .filter(pk=thread_id, owner=user, deleted_at__isnull=True)
        .first()
    )


def chat_engine(user: User, thread: Thread | None) -> str:
    """The engine that answers this chat: its thread's box's, else that of the box the user's
    new chats go to (the box's default engine while it does not exist yet)."""
    boxes = (
        Box.objects.filter(pk=thread.box_id)
        if thread
        else Box.objects.filter(owner=user, name=DEFAULT_BOX_NAME)
    )
    return boxes.values_list("engine", flat=True).first() or Box.Engine.ECHO


# --- transcript rows ----------------------------------------------------------------------
# Every transcript read selects its rows through ``_step_rows`` and turns them into
# StepDicts with ``_step_dict``: with a content filter registered (``content_filters``; media_app
# registers one), ``content`` is fetched as the filter's expression (photos already stripped
# by the database) and shown as the filter says, never parsed whole here. A read for a viewer
# (``viewer_id``) joins that user's feedback on each step in the same statement, so a step
# carries its ``feedback`` at no extra query per step.
#
# A read of thousands of steps spends its time per row, so the database hands over what the
# wire shows, as text where it can (``wire_columns``: ids, times), and the metadata as JSON
# text parsed here (an empty object without a parse): on PostgreSQL no row needs a converter
# of Django's. Each row's tuple becomes its StepDict directly (``wire.step_values_to_dict``),
# with no dict of the row made and taken apart first.

FEEDBACK_COLUMNS = {
    "feedback_pk": F("viewer_feedback__id"),
    "feedback_value": F("viewer_feedback__value"),
    "feedback_comment": F("viewer_feedback__comment"),
}
EMPTY_OBJECT = "{}"


def _step_columns(viewer_id: int | None) -> dict[str, Any]:
    """What a transcript read selects: the ``wire.STEP_FIELDS`` in that order (the order
    ``step_values_to_dict`` reads), then the viewer's feedback."""
    content_filter = content_filters.active()
    columns: dict[str, Any] = {
        "id": UuidText("id"),
        "thread_id": UuidText("thread_id"),
        "seq": F("seq"),
        "type": F("type"),
        "name": F("name"),
        "parent_id": UuidText("parent_id"),
        "input": F("input"),
        "output": F("output"),
        "content": F("content") if content_filter is None else content_filter.column("content"),
        "metadata": Cast("metadata", TextField()),
        "is_error": F("is_error"),
        "created_at": IsoTime("created_at"),
        "start": IsoTime("start"),
        "end": IsoTime("end"),
    }
    assert tuple(columns) == STEP_FIELDS
    if viewer_id is not None:
        columns.update(FEEDBACK_COLUMNS)
    return columns


def _step_rows(steps: QuerySet[Step], viewer_id: int | None = None) -> QuerySet[Step, Any]:
    """``steps`` as rows of ``_step_columns`` (tuples)."""
    if viewer_id is not None:
        steps = steps.annotate(
            viewer_feedback=FilteredRelation("feedbacks", condition=Q(feedbacks__user_id=viewer_id))
        )
    return steps.values_list(*_step_columns(viewer_id).values())


def _metadata(text: str | None) -> Any:
    if text is None or text == EMPTY_OBJECT:
        return {}
    return json.loads(text)


# Where a row's content, metadata and (with a viewer) feedback are (``_step_columns``).
_CONTENT, _METADATA, _FEEDBACK = STEP_FIELDS.index("content"), STEP_FIELDS.index("metadata"), len(STEP_FIELDS)


def _step_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    content_filter = content_filters.active()
    content = row[_CONTENT]
    if content_filter is not None:
        content = content_filter.from_text(row[1], row[0], content)
    step = step_values_to_dict(row, content=content, metadata=_metadata(row[_METADATA]))
    if len(row) > _FEEDBACK and row[_FEEDBACK] is not None:
        step["feedback"] = feedback_to_dict(row[_FEEDBACK], row[0], row[_FEEDBACK + 1], row[_FEEDBACK + 2])
    return step


def _step_dicts(steps: QuerySet[Step], viewer_id: int | None) -> tuple[list[dict[str, Any]], Any]:
    """The StepDicts of ``steps`` (sliced and ordered already), and the last row's seq."""
    dicts = list(map(_step_dict, _step_rows(steps, viewer_id)))
    return dicts, (dicts[-1]["seq"] if dicts else None)


def step_dicts(
    thread_id: uuid.UUID, *, messages_only: bool = False, viewer_id: int | None = None
) -> list[dict[str, Any]]:
    """The transcript of a thread as StepDicts in ``seq`` order (with ``viewer_id``'s
    feedback on the steps that have one)."""
    steps = Step.objects.filter(thread_id=thread_id)
    if messages_only:
        steps = steps.filter(type__contains="message")
    return _step_dicts(steps.order_by("seq"), viewer_id)[0]


def owned_thread_dict(user: User, thread_id: uuid.UUID) -> dict[str, Any] | None:
    """The ThreadDict with its whole transcript, or None when the user may not read it
    (for tests and tools: a client's read is ``resume_thread_dict``, within a budget)."""
    thread = get_owned_thread(user, thread_id)
    if thread is None:
        return None
    return thread_to_dict(thread, step_dicts(thread.pk, viewer_id=user.pk))


# --- reads within a byte budget (``transcript_budgets``) -----------------------------------
# A client's read of a transcript carries the newest steps that fit its budget (and, when it
# asked, at most ``limit`` of them); ``omittedBeforeSeq`` says where it stopped: null when it
# carries the whole transcript, else the seq of its first step, before which the client reads
# older steps with ``history?before_seq=`` as the user scrolls up.

OMITTED_KEY = "omittedBeforeSeq"


# A lower bound of what a step weighs by each measure besides its text (``read_cuts``).
PER_STEP_LOWER_BOUND: dict[Callable[[dict[str, Any]], int], int] = {
    wire_bytes: MIN_STEP_WIRE_BYTES,
    context_bytes: 0,
}


def newest_steps(
    thread_id: uuid.UUID,
    *,
    max_bytes: int,
    limit: int | None = None,
    before_seq: int | None = None,
    viewer_id: int | None = None,
    measure: Callable[[dict[str, Any]], int] = wire_bytes,
) -> tuple[list[dict[str, Any]], int | None]:
    """The newest StepDicts (before ``before_seq`` when given) within ``max_bytes`` and
    ``limit``, in ``seq`` order, and the seq before which older steps were left out (None
    when none were). A read for a viewer is also within the viewer's read budget
    (``read_budget``). One statement, however long the thread (``read_cuts``)."""
    steps = Step.objects.filter(thread_id=thread_id)
    if before_seq is not None:
        steps = steps.filter(seq__lt=before_seq)
    per_step = PER_STEP_LOWER_BOUND.get(measure)

    def read(granted: int) -> tuple[list[dict[str, Any]], bool, int]:
        first = steps
        if per_step is not None:
            cut = cut_seq(steps, max_bytes=granted, per_step=per_step, limit=limit)
            first = steps.filter(seq__gte=Coalesce(cut, Value(0)))
        return take_pages_within(
            _walk(
                steps,
                viewer_id,
                newest_first=True,
                max_bytes=granted,
                first_page=(first, per_step) if per_step is not None else None,
                limit=limit,
            ),
            max_bytes=granted,
            limit=limit,
            measure=measure,
        )

    taken, more = _within_read_budget(viewer_id, max_bytes, read)
    taken.reverse()
    return taken, (taken[0]["seq"] if more and taken else None)


def _walk(
    steps: QuerySet[Step],
    viewer_id: int | None,
    *,
    newest_first: bool,
    max_bytes: int,
    limit: int | None = None,
    first_page: tuple[QuerySet[Step], int] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """``steps`` as pages of StepDicts in ``seq`` order (or newest first), keyset pages on
    ``seq``: the first of ``FIRST_CHUNK_ROWS`` (or the ``limit`` asked for, and one more),
    each next one as many rows as the steps seen so far say fit in what is left of
    ``max_bytes`` (at most ``CHUNK_ROWS``). A read its budget stops after a few big steps
    fetched few rows; a long read of small steps makes few trips; a page holds about what the
    read may still carry.

    ``first_page``: the steps cut by the database where their lower bound passes the budget,
    and that bound's bytes a step (``read_cuts``), fetched as the first page, whole or up to
    the ``limit``. A read stops within that page unless a step was shown cut to fit; when
    the page's own lower bound shows it was cut, the pages after it go on from there."""
    size = min(CHUNK_ROWS, FIRST_CHUNK_ROWS if limit is None else limit + 1)
    bound, seen_rows, seen_bytes = None, 0, 0
    if first_page is not None:
        cut_steps, per_step = first_page
        page = cut_steps.order_by("-seq")
        if limit is not None:
            page = page[: limit + 1]
        steps_of_page, bound = _step_dicts(page, viewer_id)
        yield steps_of_page
        seen_rows = len(steps_of_page)
        text = sum(map(context_bytes, steps_of_page))
        limited = limit is not None and seen_rows > limit
        if not limited and text + per_step * seen_rows <= max_bytes:
            return  # neither the limit nor the cut left any step out
        seen_bytes = text + STEP_OVERHEAD_BYTES * seen_rows
        if not steps_of_page:
            return
        size = max(
            FIRST_CHUNK_ROWS,
            min(CHUNK_ROWS, max(0, max_bytes - seen_bytes) * seen_rows // max(seen_bytes, 1) + 1),
        )
    while True:
        page = steps
        if bound is not None:
            page = steps.filter(seq__lt=bound) if newest_first else steps.filter(seq__gt=bound)
        steps_of_page, bound = _step_dicts(page.order_by("-seq" if newest_first else "seq")[:size], viewer_id)
        yield steps_of_page
        if len(steps_of_page) < size:
            return
        seen_rows += len(steps_of_page)
        seen_bytes += sum(map(context_bytes, steps_of_page)) + STEP_OVERHEAD_BYTES * len(steps_of_page)
        left = max(0, max_bytes - seen_bytes)
        size = max(FIRST_CHUNK_ROWS, min(CHUNK_ROWS, left * seen_rows // max(seen_bytes, 1) + 1))


def _within_read_budget(
    viewer_id: int | None, wanted: int, read: Callable[[int], tuple[list[dict[str, Any]], bool, int]]
) -> tuple[list[dict[str, Any]], bool]:
    """``read(max_bytes)`` within what the viewer's read budget grants of ``wanted`` (a read
    without a viewer, the server's own, takes ``wanted``); what it did not use goes back."""
    if viewer_id is None:
        taken, more, _used = read(wanted)
        return taken, more
    granted = read_budget.grant(viewer_id, wanted)
    taken, more, used = read(granted)
    read_budget.refund(viewer_id, granted - used)
    return taken, more


def context_step_dicts(thread_id: uuid.UUID) -> list[dict[str, Any]]:
    """What a chat context is rebuilt from: the newest ``CHAT_CONTEXT_MAX_BYTES`` of the
    transcript's text, in ``seq`` order (an app sends its context to a model, whose own window
    is smaller than any thread a user can make)."""
    steps, _omitted = newest_steps(
        thread_id, max_bytes=settings.CHAT_CONTEXT_MAX_BYTES, measure=context_bytes
    )
    return steps


def newest_within_context(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest of ``steps`` (in ``seq`` order) within ``CHAT_CONTEXT_MAX_BYTES`` of text."""
    kept, _more, _used = take_within(
        reversed(steps), max_bytes=settings.CHAT_CONTEXT_MAX_BYTES, measure=context_bytes
    )
    kept.reverse()
    return kept


def resume_thread_dict(
    user: User, thread_id: uuid.UUID, *, limit: int | None = None
) -> dict[str, Any] | None:
    """The ThreadDict ``resume_thread`` carries, or None when the user may not read it: the
    newest steps within ``RESUME_MAX_BYTES`` (less what the thread's own keys take), at most
    ``limit`` when the client asked for a page, with ``omittedBeforeSeq``. Its ``elements``
    are the thread's, or those of the steps carried when older ones were left out."""
    thread = get_owned_thread(user, thread_id)
    if thread is None:
        return None
    # The room the steps have: the budget less the ThreadDict's own keys and metadata.
    envelope = {**thread_to_dict(thread, [], only_their_elements=True), OMITTED_KEY: 0}
    room = settings.RESUME_MAX_BYTES - len(json.dumps(envelope, separators=(",", ":"), default=str))
    steps, omitted = newest_steps(thread.pk, max_bytes=max(room, 0), limit=limit, viewer_id=user.pk)
    thread_dict = thread_to_dict(thread, steps, only_their_elements=omitted is not None)
    thread_dict[OMITTED_KEY] = omitted
    return thread_dict


def box_of_thread(thread_id: uuid.UUID) -> Box | None:
    """The box a thread belongs to, or None for an unknown thread."""
    thread = Thread.objects.select_related("box").filter(pk=thread_id).first()
    return thread.box if thread is not None else None


# --- API reads ------------------------------------------------------------------------


def owned_threads(user: User) -> QuerySet[Thread]:
    """The user's live threads; every API lookup starts here, so a foreign, deleted or
    missing id is simply not found."""
    return Thread.objects.select_related("owner").filter(owner=user, deleted_at__isnull=True)


def owned_threads_after(user: User, threads: QuerySet[Thread], cursor: uuid.UUID) -> QuerySet[Thread]:
    """``threads`` (the user's, newest first by ``updated_at`` then id, as the thread list
    orders them) after the user's thread ``cursor``: a keyset page that starts where the last
    one ended. A cursor thread deleted meanwhile still marks its place; another user's or a
    missing one leaves nothing after it."""
    anchor = Thread.objects.filter(pk=cursor, owner=user).values_list("updated_at", flat=True).first()
    if anchor is None:
        return threads.none()
    return threads.filter(Q(updated_at__lt=anchor) | Q(updated_at=anchor, pk__lt=cursor))


def threads_with_feedback(user: User, threads: QuerySet[Thread], value: int) -> QuerySet[Thread]:
    """``threads`` in which the user gave feedback ``value`` (0 or 1) to a message."""
    given = Feedback.objects.filter(thread_id=OuterRef("pk"), user=user, value=value)
    return threads.filter(Exists(given))


# --- thread search ------------------------------------------------------------------------
# A thread matches a search when its name contains every whitespace-separated term
# (case-insensitive, as before messages were searched), or when one of its user or assistant
# messages matches: on PostgreSQL by full-text search (``websearch_to_tsquery``: stemmed
# words, "quoted phrases", -excluded words, ``or``), on SQLite by containing every term.
#
# On PostgreSQL a message's document is stored (``search_document``, migration 0008: a GIN
# index with statistics, read rather than recomputed), and the messages are one uncorrelated
# ``thread_id IN (...)`` over the steps that match the query *and* belong to the caller's live
# threads, whose ids are read first and written into the statement: the planner then knows
# from the statistics both how rare the words are and how many messages those threads hold,
# and answers from the GIN index ``step_message_search`` ANDed with the steps' ``thread_id``
# index, so only the caller's matching messages are read. Before, a correlated EXISTS per
# thread over a partial expression index (no statistics the planner uses, and each thread
# guessed to be average) let it walk the caller's threads and compute ``to_tsvector`` over
# every message of each. SQLite keeps the EXISTS. Either way a thread is listed once however
# many of its messages match, and the list's ordering and cursor are untouched. Past
# ``SEARCH_LITERAL_THREADS`` threads the ids are a subquery instead (computed once, as an
# array), so the statement does not grow with the caller's thread count; the planner then
# guesses their size from the average thread.

# The longest ``?search=`` accepted (characters); the API answers 400 past it.
SEARCH_MAX_CHARS = 200
# The full-text configuration the stored documents are made with (migration 0008).
SEARCH_CONFIG = "english"
SEARCHED_STEP_TYPES = (StepType.USER_MESSAGE.value, StepType.ASSISTANT_MESSAGE.value)
SEARCH_DOCUMENT_COLUMN = "search_document"
# The most thread ids written into a search's statement (see above).
SEARCH_LITERAL_THREADS = 1000


class SearchDocument(Expression):
    """A step's stored document (PostgreSQL only: the column is not a model field, since
    SQLite has none); NULL for steps other than user and assistant messages."""

    output_field = SearchVectorField()

    def resolve_expression(  # type: ignore[override]  # a column, not this expression
        self,
        query: Any = None,
        allow_joins: bool = True,
        reuse: set[str] | None = None,
        summarize: bool = False,
        for_save: bool = False,
    ) -> Col:
        field = SearchVectorField()
        field.set_attributes_from_name(SEARCH_DOCUMENT_COLUMN)
        field.model = Step
        return Col(query.get_initial_alias(), field, output_field=SearchVectorField())


class EqualsAny(Func):
    """``value = ANY(array)``: with an ``ArraySubquery`` the array is an InitPlan, computed
    once (an ``IN (SELECT ...)`` the planner would turn into a join instead)."""

    arg_joiner = " = ANY("
    template = "(%(expressions)s))"
    output_field = BooleanField()


def matching_messages(text: str, *, full_text: bool) -> QuerySet[Step]:
    """The user and assistant message steps (of any thread) that match ``text``: by the
    stored document when ``full_text`` (PostgreSQL), else by containing every term."""
    if full_text:
        query = SearchQuery(text, config=SEARCH_CONFIG, search_type="websearch")
        return Step.objects.annotate(document=SearchDocument()).filter(document=query)
    messages = Step.objects.filter(type__in=SEARCHED_STEP_TYPES)
    return messages.filter(*[Q(output__icontains=term) for term in text.split()])


def search_threads(threads: QuerySet[Thread], text: str) -> QuerySet[Thread]:
    """``threads`` whose name or user and assistant messages match ``text`` (see above)."""
    terms = text.split()
    if not terms:
        return threads
    named = Q(*[Q(name__icontains=term) for term in terms])
    if connections[threads.db].vendor != "postgresql":
        messages = matching_messages(text, full_text=False).filter(thread_id=OuterRef("pk"))
        return threads.filter(named | Exists(messages))
    ids = threads.order_by().values_list("pk", flat=True)
    listed = list(ids[: SEARCH_LITERAL_THREADS + 1])
    searched = EqualsAny(F("thread_id"), ArraySubquery(ids)) if len(listed) > SEARCH_LITERAL_THREADS else None
    messages = matching_messages(text, full_text=True)
    messages = messages.filter(searched) if searched is not None else messages.filter(thread_id__in=listed)
    return threads.filter(named | Q(pk__in=messages.values("thread_id")))


def history_page(
    thread_id: uuid.UUID, *, after_seq: int, limit: int, viewer_id: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """Up to ``limit`` StepDicts with ``seq > after_seq`` in ``seq`` order, within
    ``READ_PAGE_MAX_BYTES``, and whether more follow."""
    steps = Step.objects.filter(thread_id=thread_id, seq__gt=after_seq)

    def read(granted: int) -> tuple[list[dict[str, Any]], bool, int]:
        return take_pages_within(
            _walk(steps, viewer_id, newest_first=False, max_bytes=granted, limit=limit),
            max_bytes=granted,
            limit=limit,
        )

    return _within_read_budget(viewer_id, settings.READ_PAGE_MAX_BYTES, read)


def history_page_before(
    thread_id: uuid.UUID, *, before_seq: int, limit: int, viewer_id: int | None = None
) -> tuple[list[dict[str, Any]], int | None]:
    """The page of older steps a client scrolling up reads: up to ``limit`` StepDicts with
    ``seq < before_seq``, the newest of them, in ``seq`` order and within
    ``READ_PAGE_MAX_BYTES``; and the seq before which still older ones are (None: none)."""
    return newest_steps(
        thread_id,
        max_bytes=settings.READ_PAGE_MAX_BYTES,
        limit=limit,
        before_seq=before_seq,
        viewer_id=viewer_id,
    )


# The failed sends a bootstrap lists: the latest this many (a thread stopped many times does
# not grow every page load without bound).
FAILED_LIMIT = 50
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def open_sends(thread_id: uuid.UUID) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The thread's sends not transcribed: ``(pending, failed)``, each oldest first.

    Entries name a send by its client's id. ``pending`` entries carry their ``images``
    through the content filter like a step's content (a photo's reference names the send's
    key, which is also the id of the user step that will transcribe it); ``failed`` entries (the latest ``FAILED_LIMIT``) carry only an
    ``imageCount`` and the ``reason`` the send failed (``AcceptedMessage.Failure``; empty when
    it was not recorded). Both come from one statement, so a send that moves between the two
    states while it runs (a stop drops it, a retry revives it) is in exactly one of them.
    """
    sends = AcceptedMessage.objects.filter(thread_id=thread_id)
    failed_only = sends.filter(state=AcceptedMessage.State.FAILED)
    # The acceptance time of the FAILED_LIMIT-th newest failed send, or the epoch when there
    # are fewer: older failed sends are not read at all.
    cutoff = Coalesce(
        Subquery(
            failed_only.order_by("-accepted_at", "-id").values("accepted_at")[FAILED_LIMIT - 1 : FAILED_LIMIT]
        ),
        Value(EPOCH, output_field=DateTimeField()),
    )
    rows = sends.filter(
        Q(state=AcceptedMessage.State.PENDING)
        | Q(state=AcceptedMessage.State.FAILED, accepted_at__gte=cutoff)
    ).order_by("accepted_at", "id")
    content_filter = content_filters.active()
    values: QuerySet[AcceptedMessage, Any]
    if content_filter is None:
        values = rows.values("id", "client_id", "text", "accepted_at", "state", "failure", "images")
    else:
        values = rows.values(
            "id",
            "client_id",
            "text",
            "accepted_at",
            "state",
            "failure",
            images_text=content_filter.column("images"),
        )
    pending: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    # Two shapes of row: "images" without a content filter, "images_text" with one.
    for row in cast("QuerySet[AcceptedMessage, dict[str, Any]]", values):
        images = (
            content_filter.from_text(thread_id, row["id"], row["images_text"])
            if content_filter
            else row["images"]
        )
        if row["state"] == AcceptedMessage.State.PENDING:
            pending.append(
                {
                    "id": str(row["client_id"]),
                    "text": row["text"],
                    "acceptedAt": iso(row["accepted_at"]),
                    "images": images,
                }
            )
        else:
            failed.append(
                {
                    "messageId": str(row["client_id"]),
                    "text": row["text"],
                    "reason": row["failure"],
                    "acceptedAt": iso(row["accepted_at"]),
                    "imageCount": len(images) if isinstance(images, list) else 0,
                }
            )
    # Failed sends accepted in the same instant as the cutoff may be more than the limit.
    return pending, failed[-FAILED_LIMIT:]


def thread_summary(thread: Thread) -> dict[str, Any]:
    """The ThreadDict of a thread without its transcript (``steps`` is empty)."""
    return thread_to_dict(thread)


def bootstrap(thread: Thread, *, limit: int | None = None) -> dict[str, Any]:
    """What a client needs to show a thread: ``{thread, entries, omittedBeforeSeq, pending,
    failed, asks, elements}``.

    ``entries`` is the newest of the transcript within ``READ_PAGE_MAX_BYTES`` (and the last
    ``limit`` steps when given; ``omittedBeforeSeq`` says where it stopped), ``pending`` the sends
    accepted but not yet transcribed, ``failed`` the latest sends that never will be (dropped
    by a stop, refused) unless the user sends them again. None of them is compared with
    another here: the client retires a pending entry when a transcript user step carries its
    id. ``pending`` and ``failed`` are read *before* the transcript, so a message transcribed
    between the reads shows up twice (the client drops the duplicate) rather than nowhere.
    """
    pending, failed = open_sends(thread.pk)
    viewer = thread.owner_id  # only the owner reads a thread (``owned_threads``)
    entries, omitted = newest_steps(
        thread.pk, max_bytes=settings.READ_PAGE_MAX_BYTES, limit=limit, viewer_id=viewer
    )
    elements = attachments.elements_of(
        thread.pk, None if limit is None and omitted is None else [e["id"] for e in entries]
    )
    return {
        "thread": thread_summary(thread),
        "entries": entries,
        OMITTED_KEY: omitted,
        "pending": pending,
        "failed": failed,
        # Questions the app still waits for: a reloaded page shows them again.
        "asks": thread_ask_events(thread.owner_id, thread.pk),
        "elements": elements,
    }


# --- accepted sends, for the runtime ------------------------------------------------------------

OPEN_SEND = Q(state=AcceptedMessage.State.PENDING) | Q(state=AcceptedMessage.State.TRANSCRIBED, outcome="")


def pending_sends(thread_id: uuid.UUID) -> list[AcceptedMessage]:
    """The thread's chat sends no user step has transcribed yet, oldest first (integration and
    hooks sends belong to other runners)."""
    return list(
        AcceptedMessage.objects.filter(
            thread_id=thread_id, state=AcceptedMessage.State.PENDING, source=AcceptedMessage.Source.CHAT
        ).order_by("accepted_at")
    )


def unsettled_turns(thread_id: uuid.UUID) -> list[list[uuid.UUID]]:
    """The thread's chat turns that began (their sends transcribed) but never ended. One list
    of accepted ids per turn (the sends one user step carries)."""
    rows = AcceptedMessage.objects.filter(
        thread_id=thread_id,
        state=AcceptedMessage.State.TRANSCRIBED,
        outcome="",
        source=AcceptedMessage.Source.CHAT,
    ).order_by("accepted_at")
    turns: dict[uuid.UUID | None, list[uuid.UUID]] = {}
    for accepted_id, step_id in rows.values_list("id", "step_id"):
        turns.setdefault(step_id, []).append(accepted_id)
    return list(turns.values())


def chat_threads_to_recover(
    me: str, *, live_owners: Any, unreachable_owners: Any, settled_before: datetime
) -> list[tuple[Any, ...]]:
    """``(box, thread, author username)`` of open chat sends in threads run by ``me`` or by a
    process not among ``live_owners`` nor ``unreachable_owners``: pending since before
    ``settled_before``, or transcribed with no outcome. Also threads no process has claimed
    with a send pending since before ``settled_before``: a send is handed over (and its thread
    claimed) right after it is accepted, so such a send's process died in between."""
    open_sends = Q(state=AcceptedMessage.State.PENDING, accepted_at__lt=settled_before) | Q(
        state=AcceptedMessage.State.TRANSCRIBED, outcome=""
    )
    unclaimed = Q(
        thread__runtime_owner="", state=AcceptedMessage.State.PENDING, accepted_at__lt=settled_before
    )
    rows = (
        AcceptedMessage.objects.filter(
            open_sends, source=AcceptedMessage.Source.CHAT, thread__deleted_at=None
        )
        .filter(
            Q(thread__runtime_owner=me)
            | unclaimed
            | (
                ~Q(thread__runtime_owner="")
                & ~Q(thread__runtime_owner__in=live_owners)
                & ~Q(thread__runtime_owner__in=unreachable_owners)
            )
        )
        .values_list("box_id", "thread_id", "author__username")
        .order_by()
        .distinct()[:200]
    )
    return list(rows)


def integration_sends_to_recover(
    me: str, *, live_owners: Any, unreachable_owners: Any, settled_before: datetime
) -> list[AcceptedMessage]:
    """Open integration sends of boxes run by ``me``, by nobody, or by a process not among
    ``live_owners`` nor ``unreachable_owners``: pending since before ``settled_before`` (never
    transcribed), or transcribed with no outcome (the turn began and never ended). Oldest
    first, with their authors."""
    open_sends = Q(state=AcceptedMessage.State.PENDING, accepted_at__lt=settled_before) | Q(
        state=AcceptedMessage.State.TRANSCRIBED, outcome=""
    )
    owner_gone = (
        Q(box__runtime_owner=me)
        | Q(box__runtime_owner="")
        | (~Q(box__runtime_owner__in=live_owners) & ~Q(box__runtime_owner__in=unreachable_owners))
    )
    return list(
        AcceptedMessage.objects.filter(
            open_sends, owner_gone, source=AcceptedMessage.Source.INTEGRATION, thread__deleted_at=None
        )
        .select_related("author")
        .order_by("accepted_at")[:200]
    )


def orphaned_hook_sends(session_ids: list[uuid.UUID], *, live_holders: Any) -> list[AcceptedMessage]:
    """Open hooks-API sends of these sessions whose holder is not among ``live_holders``."""
    return list(
        AcceptedMessage.objects.filter(
            OPEN_SEND, source=AcceptedMessage.Source.HOOK, session_id__in=session_ids
        )
        .exclude(holder__in=live_holders)
        .order_by("accepted_at")
    )


def engine_session_id_of(thread_id: uuid.UUID) -> str:
    return Thread.objects.filter(pk=thread_id).values_list("engine_session_id", flat=True).first() or ""


def engine_conversation(engine_session_id: str) -> list[dict[str, Any]]:
    """The user and assistant messages (``type``, ``output``, ``content``) of the thread that
    carries ``engine_session_id``, in order, without Tether's own error notes: what an engine
    that keeps no history of its own replays to resume the conversation. The newest of them
    within ``CHAT_CONTEXT_MAX_BYTES`` of text, as a chat context."""
    thread = Thread.objects.filter(engine_session_id=engine_session_id).order_by("-updated_at").first()
    if thread is None:
        return []
    steps = thread.steps.filter(type__in=["user_message", "assistant_message"], is_error=False).order_by(
        "-seq"
    )
    rows = steps.values("type", "output", "content").iterator(chunk_size=FIRST_CHUNK_ROWS)
    kept, _more, _used = take_within(
        (dict(row) for row in rows), max_bytes=settings.CHAT_CONTEXT_MAX_BYTES, measure=context_bytes
    )
    kept.reverse()
    return kept


def accepted_exists(thread_id: uuid.UUID, message_id: uuid.UUID) -> bool:
    """Whether the thread has the send its client calls ``message_id``."""
    return AcceptedMessage.objects.filter(pk=AcceptedMessage.key(thread_id, message_id)).exists()


def box_by_id(box_id: uuid.UUID) -> Box | None:
    return Box.objects.filter(pk=box_id).first()


def recent_failed_sends(since: datetime, limit: int) -> list[AcceptedMessage]:
    """Sends accepted after ``since`` that failed, or whose turn ended in an error, newest
    first: the admin dashboard's list (operators only; not owner-scoped)."""
    failed = Q(state=AcceptedMessage.State.FAILED) | Q(outcome=AcceptedMessage.Outcome.ERROR)
    return list(
        AcceptedMessage.objects.filter(failed, accepted_at__gte=since)
        .only("id", "thread_id", "text", "state", "outcome", "failure", "accepted_at", "source")
        .order_by("-accepted_at")[:limit]
    )


def user_step_of(thread_id: uuid.UUID, client_id: uuid.UUID) -> dict[str, Any] | None:
    """The thread's user step a client names by the id it chose for the send, or by the
    step's own id (as transcript reads show it); None when the thread has no such message."""
    step = (
        Step.objects.filter(
            thread_id=thread_id,
            type=StepType.USER_MESSAGE,
            pk__in=[client_id, AcceptedMessage.key(thread_id, client_id)],
        )
        .order_by("seq")
        .first()
    )
    return step_to_dict(step) if step is not None else None
