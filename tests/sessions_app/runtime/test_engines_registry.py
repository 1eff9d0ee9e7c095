"""The engines a box can name and the engines the runtime knows are the same list."""

from sessions_app.runtime.engines import ENGINES, engine_class
from threads_app.models import Box


def test_every_engine_a_box_can_name_has_a_class_and_nothing_else():
    assert set(ENGINES) == set(Box.Engine.values)
    for name in ENGINES:
        assert engine_class(name).OPTIONS is not None
