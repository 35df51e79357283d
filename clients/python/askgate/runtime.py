"""The seed design's ``runtime``: the names its functions ask with, inside a run askgate started.

    from askgate import runtime

    answer = runtime.ask("Which library for date formatting?", options=["dayjs", "date-fns", "luxon"])
    ok = runtime.confirm("Archive all 87 emails?", detail=preview, timeout=600, default=False)
    runtime.can_ask()  # False in a run nobody can answer, and outside askgate

``ask`` returns the option or the person's own words (``allow_custom=True`` by default, as in
the seed), a list when ``multi``; a decline raises ``UserDeclined``, an expiry without a
``default`` ``AskTimeout``. ``confirm`` returns a bool and never raises on timeout. ``form``
asks for several fields at once. ``ask_user(question)`` is ``ask(question)`` whose decline and
expiry come back as ``None``. These are the functions of ``askgate`` itself, under the seed's
names; from a program askgate does not start, ask with ``askgate.Client`` instead.
"""

from askgate import (  # noqa: F401  (re-exported)
    AskTimeout,
    Cancelled,
    UserDeclined,
    approve,
    ask,
    ask_user,
    can_ask,
    confirm,
    form,
    say,
)

__all__ = ["ask", "confirm", "can_ask", "form", "ask_user", "approve", "say", "UserDeclined", "AskTimeout", "Cancelled"]
