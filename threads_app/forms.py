"""The admin's box form: the engine is a choice, its options are checked against the engine."""

from typing import Any

from django import forms

from sessions_app.runtime.engines import option_errors
from sessions_app.runtime.engines.options import WHOLE
from threads_app.models import Box


class BoxForm(forms.ModelForm):
    """``engine_options`` must be valid for the chosen engine: a typo in a key or a bad value
    is an error naming the key here, not a failed turn later."""

    # Explicit only to choose the scheme a bare host gets (Django 6's default, https).
    webhook_url = forms.URLField(required=False, max_length=200, assume_scheme="https")

    class Meta:
        model = Box
        # The webhook secret is never rendered: it is rotated with an admin action.
        fields = ("owner", "name", "engine", "engine_options", "webhook_url")
        help_texts = {
            "engine_options": "A JSON object; the keys each engine takes are declared with it "
            "(sessions_app/runtime/engines). Changes apply from the box's next turn.",
        }

    def clean_engine_options(self) -> Any:
        # An empty field means no options (the JSON form field gives None).
        options = self.cleaned_data.get("engine_options")
        return {} if options in (None, "") else options

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        engine, options = cleaned.get("engine"), cleaned.get("engine_options")
        if engine and "engine_options" in cleaned:
            for key, message in sorted(option_errors(engine, options).items()):
                self.add_error("engine_options", f"{key}: {message}" if key != WHOLE else message)
        return cleaned
