#!/usr/bin/env python3
"""Asks approval before archiving email, and honours a rejection's feedback."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

import askgate  # noqa: E402


def main(_input, run):
    try:
        decision = askgate.approve("archive 87 emails older than 30 days", detail="Moves them to the Archive folder.")
    except askgate.Declined as rejected:
        return f"Left the inbox alone ({rejected.feedback or 'no reason given'})."
    scope = " (and will from now on without asking)" if decision == "always" else ""
    return f"Archived 87 emails{scope}."


askgate.run(main)
