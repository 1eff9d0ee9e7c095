"""Signals other apps listen to (threads_app imports no other app, so it announces instead
of calling): ``thread_deleted`` is sent after a thread is soft-deleted, with ``thread_id``;
the live layer ends what is live on it. ``budget_refused`` is sent when an API request is
refused by a budget (``budgets.BudgetThrottle``), with ``budget`` (its name); the metrics count
it."""

from django.dispatch import Signal

thread_deleted = Signal()
budget_refused = Signal()
