#!/usr/bin/env python3
"""Asks which environment to deploy to, confirms, and reports. Run it with `/run deploy v1.2`."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

import askgate  # noqa: E402


def main(version, run):
    version = version.strip() or "main"
    try:
        # Only these two: no words of the person's own (which `ask` takes by default).
        env = askgate.ask(
            "Deploy where?", options=["staging", "production"], allow_custom=False, detail=f"Version {version}"
        )
    except askgate.Declined as declined:
        # A person's "no" is an answer, not a failure of the deploy.
        return f"Not deployed {version}: {declined.feedback or 'declined'}."
    try:
        if env == "production" and not askgate.confirm(f"Deploy {version} to production now?"):
            return f"Did not deploy {version}."
    except askgate.Declined as declined:
        # A confirm can be declined too (Decline on a card, /decline), with the person's words.
        return f"Did not deploy {version}: {declined.feedback or 'declined'}."
    # The deploy itself comes after every ask it depends on: a replay never repeats it.
    askgate.say(f"Deploying {version} to {env}...")
    return f"Deployed {version} to {env}."


askgate.run(main)
