#!/usr/bin/env python3
"""The original design's example, as it was written there, run by askgate: `/run seed`.

The body of `seed_example` is the design's snippet, unchanged (a test keeps it so). It asks
which library to use (an option, or the person's own words), then confirms an archive.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

import askgate  # noqa: E402
from askgate import runtime  # noqa: E402

preview = "87 emails older than 30 days, from 12 senders."


def seed_example():
    # Inside any @agentic_function / @function body
    answer = runtime.ask(
        "Which library for date formatting?",
        options=["dayjs", "date-fns", "luxon"],  # optional; None = free text
        multi=False,                # True -> returns list[str]
        allow_custom=True,          # free text allowed besides options
        timeout=1800,               # seconds, default 30 min
        default=None,               # returned on timeout; no default -> AskTimeout
    )
    # -> str (or list[str]); user pressing Decline raises UserDeclined

    ok = runtime.confirm("Archive all 87 emails?", detail=preview,
                         timeout=600, default=False)  # -> bool, never raises on timeout

    runtime.can_ask()  # -> bool; False in headless runs so authors can branch
    return answer, ok


def main(_input, run):
    try:
        answer, ok = seed_example()
    except runtime.UserDeclined as declined:
        return f"Declined: {declined.feedback or 'no reason given'}."
    return f"Using {answer} for dates; " + ("archived 87 emails." if ok else "archived nothing.")


askgate.run(main)
