"""Ask a human from a Python script run by askgate.

askgate runs your script as a process function and speaks JSON lines with it on stdin and
stdout. This module hides the protocol: call ``ask``, ``confirm``, ``approve`` and ``say`` as
plain functions, and return your reply from ``main``.

    import askgate

    def main(input, run):
        env = askgate.ask("Deploy where?", options=["staging", "prod"])
        if not askgate.confirm(f"Deploy {input} to {env}?"):
            return "Not deployed."
        askgate.say("deploying...")
        return f"Deployed {input} to {env}."

    askgate.run(main)

In follow-up mode (askgate's default for runs started from a chat) your script is run again
from the start after each answer, and earlier asks return their recorded answers at once. When
a question is new, askgate answers "pending" and this module exits the script cleanly; nothing
you write after that ask runs until the answer comes. Do side effects after the asks they
depend on, or make them idempotent.

Outcomes other than an answer raise the same exceptions here and in ``askgate.Client``:
``UserDeclined`` (with the person's feedback; a ``confirm`` can be declined too, besides yes
and no; ``Declined`` is the same class), ``AskTimeout`` (no answer before the deadline and no
default; ``Expired`` and ``Timeout`` are the same class), ``Cancelled`` (with the reason).
``ask_user(question)`` is the seed's thin alias of ``ask`` whose decline and expiry come back as
``None``. ``askgate.runtime`` holds the seed design's names: ``runtime.ask``, ``confirm``,
``can_ask``, ``form`` and ``ask_user``. As in the seed, ``ask`` takes free text besides its
options unless ``allow_custom=False``.

Only the standard library is used. stdout carries the protocol, so when askgate runs the script (it sets
``ASKGATE_PROTOCOL=1``) importing this module points ``sys.stdout`` at stderr: a stray
``print()`` lands in askgate's log instead of breaking the protocol. Use ``say`` to talk to the
conversation, and ``can_ask()`` to know whether anyone can answer (a run without a conversation
cannot ask: every ask ends as cancelled). Outside a run askgate started, ``can_ask()`` is False
at once (nothing is read from stdin), and ``ask``, ``confirm``, ``approve`` and ``say`` raise
``NotInRun``, which names ``askgate.Client``.

Programs that askgate does not run (agents, scripts, services) ask over HTTP instead, with
``askgate.Client`` (see ``askgate.client``); importing it leaves ``sys.stdout`` alone.
"""

import json
import os
import sys

__all__ = [
    "ask", "ask_user", "confirm", "approve", "form", "say", "run", "can_ask", "in_run", "runtime", "UserDeclined",
    "AskTimeout", "Declined", "Expired", "Timeout", "Cancelled", "NotInRun", "Protocol", "Client", "Outcome",
    "ApiError", "Edited",
]


class UserDeclined(Exception):
    """The person declined (or rejected an approval); ``feedback`` is what they said."""

    def __init__(self, feedback=None):
        super().__init__(feedback or "declined")
        self.feedback = feedback


class AskTimeout(Exception):
    """Nobody answered before the deadline, and the ask had no default."""


# askgate's earlier names for the seed's exceptions: the same classes, so either name catches.
Declined = UserDeclined
Expired = AskTimeout
Timeout = AskTimeout


class NotInRun(RuntimeError):
    """The program was not started by askgate, so there is nobody on the other end of stdin."""

    def __init__(self):
        super().__init__(
            "this program was not started by askgate (no ASKGATE_PROTOCOL=1): ask, confirm, approve and say work "
            "inside a process function; from any other program ask over HTTP with "
            "askgate.Client(url, token, conversation=...)"
        )


class Cancelled(Exception):
    """The question was closed without an answer; ``reason`` says why."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class Edited(str):
    """An editable approval allowed as the approver edited it: the string is the decision,
    ``"edited"`` (so ``decision == "once"`` stays false), and ``action`` what to run instead."""

    def __new__(cls, action):
        decision = super().__new__(cls, "edited")
        decision.action = action
        return decision


def decision(value):
    """An approval's outcome value as a decision: ``"once"``, ``"always"``, or ``Edited``."""
    if isinstance(value, dict) and value.get("decision") == "edited":
        return Edited(value.get("action", ""))
    return value


class Protocol(Exception):
    """askgate sent something this module does not understand."""


_out = sys.stdout
_in = sys.stdin
_start = None
if os.environ.get("ASKGATE_PROTOCOL") == "1":
    # The protocol keeps stdout to itself; anything else printed goes to stderr (askgate's log).
    sys.stdout = sys.stderr


def _send(message):
    _out.write(json.dumps(message) + "\n")
    _out.flush()


def _receive():
    line = _in.readline()
    if not line:
        # askgate closed stdin: the run is over for this invocation.
        sys.exit(0)
    try:
        return json.loads(line)
    except ValueError as e:
        raise Protocol(f"not JSON from askgate: {line!r}") from e


def in_run():
    """Whether askgate started this program as a process function (it sets ASKGATE_PROTOCOL=1)."""
    return os.environ.get("ASKGATE_PROTOCOL") == "1"


def start():
    """The start message: run, function, conversation, user, input, can_ask. Raises ``NotInRun``
    outside a run askgate started (stdin is then not askgate's, and is never read)."""
    global _start
    if not in_run():
        raise NotInRun()
    if _start is None:
        _start = _receive()
        if _start.get("type") != "start":
            raise Protocol(f"expected a start message, got {_start!r}")
    return _start


def can_ask():
    """Whether this run has someone to ask (a conversation); without one every ask is cancelled.
    False at once outside a run askgate started: nothing is read from stdin."""
    if not in_run():
        return False
    return bool(start().get("can_ask", True))


def _outcome(message):
    start()
    _send(message)
    reply = _receive()
    if reply.get("type") != "outcome":
        raise Protocol(f"expected an outcome, got {reply!r}")
    status = reply.get("status")
    if status == "pending":
        # The question is out; this invocation ends here and the next answer runs us again.
        sys.exit(0)
    if status == "answered":
        return reply.get("value"), False
    if status == "expired":
        if reply.get("value") is None and message["type"] != "confirm":
            raise AskTimeout("nobody answered before the deadline")
        return reply.get("value"), True
    if status == "declined":
        raise UserDeclined(reply.get("feedback"))
    if status == "cancelled":
        raise Cancelled(reply.get("reason", "cancelled"))
    raise Protocol(f"unknown outcome status {status!r}")


NUDGES = ("remind_before", "remind_every", "escalate_after", "escalate_to", "escalate_answerers")


def nudges(keys):
    """The reminder and escalation keys of an ask (seconds or "5m" for the times); a key that
    is not one of ``NUDGES`` is a mistake, said at once."""
    unknown = sorted(set(keys) - set(NUDGES))
    if unknown:
        raise TypeError(f"unknown keyword {unknown[0]!r}; reminders and escalation take {', '.join(NUDGES)}")
    return {k: v for k, v in keys.items() if v is not None}


def wire_options(options):
    """Options as an ask carries them: each a label (``"dayjs"``), a ``(label, description)``
    pair, or a ``{"label": ..., "description": ...}`` dict; the description is one line shown
    under or beside the label."""
    out = []
    for option in options or []:
        if isinstance(option, tuple) and len(option) == 2:
            out.append({"label": option[0], "description": option[1]})
        elif isinstance(option, (str, dict)):
            out.append(option)
        else:
            raise TypeError(f"option {option!r} is not a label, a (label, description) pair or a dict")
    return out


def wire_questions(questions, allow_custom=True):
    """Several questions as an ask carries them: each a dict with ``header`` (a short name, its
    key in the answer), ``prompt``, and its own ``options`` (labels or ``(label, description)``
    pairs), ``multi`` and ``allow_custom`` (``allow_custom`` when it has options and says
    nothing)."""
    out = []
    for q in questions:
        if not isinstance(q, dict):
            raise TypeError(f"question {q!r} is not a dict with a header and a prompt")
        q = dict(q)
        if q.get("options"):
            q["options"] = wire_options(q["options"])
            q.setdefault("allow_custom", bool(allow_custom))
        out.append(q)
    return out


def ask(prompt, options=None, multi=False, allow_custom=True, timeout=None, default=None, detail=None,
        questions=None, **nudge):
    """Asks a question. Returns the chosen option's label or the text (a list when ``multi``).

    Each option is a label, or a ``(label, description)`` pair whose description people see
    beside it: ``ask("Which?", options=[("dayjs", "2 kB"), "luxon"])``. As in the seed, people
    may also write their own answer unless ``allow_custom=False`` (the wire's default is False:
    this sends it every time).

    ``questions`` asks 1 to 4 questions together (instead of ``options``); the answer is a dict
    keyed by their headers: ``ask("Setup", questions=[{"header": "Library", "prompt": "Which?",
    "options": ["dayjs", "luxon"]}, {"header": "Tests", "prompt": "Which tests?", "options":
    ["unit", "e2e"], "multi": True}])``.

    ``timeout`` is in seconds (or "never"); on timeout ``default`` is returned, or ``AskTimeout``
    is raised when there is none; a decline raises ``UserDeclined``. ``remind_before``,
    ``remind_every``, ``escalate_after``, ``escalate_to`` and ``escalate_answerers`` nudge
    people while it waits (also for ``confirm`` and ``approve``).
    """
    message = {"type": "ask", "prompt": prompt, "timeout": timeout, "default": default, **nudges(nudge)}
    if questions is not None:
        if options or multi:
            raise TypeError("options and multi belong to each of the questions")
        message["questions"] = wire_questions(questions, allow_custom)
    else:
        message.update({"options": wire_options(options), "multi": multi, "allow_custom": allow_custom})
    if detail is not None:
        message["detail"] = detail
    value, _timed_out = _outcome(message)
    return value


def form(prompt, schema, detail=None, timeout=None, default=None, **nudge):
    """Asks for a form and returns the answer, a dict. ``schema`` is MCP elicitation's flat JSON
    Schema: ``{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type":
    "integer", "minimum": 0}}, "required": ["name"]}`` (strings with ``minLength``,
    ``maxLength`` and ``format`` email, uri, date or date-time; numbers and integers with
    ``minimum`` and ``maximum``; booleans; enums, single or as a list; ``default``). askgate
    checks each field before the answer reaches you. On timeout ``default`` (a dict) is
    returned, or ``AskTimeout`` is raised when there is none; a decline raises ``UserDeclined``."""
    message = {"type": "form", "prompt": prompt, "schema": schema, "timeout": timeout, "default": default,
               **nudges(nudge)}
    if detail is not None:
        message["detail"] = detail
    value, _timed_out = _outcome(message)
    return value


def ask_user(question, **ask_options):
    """The seed's ``ask_user``: ``ask(question)``, whose decline and expiry come back as ``None``
    (a cancellation still raises ``Cancelled``). The seed's older semantics: ``None`` means no
    answer."""
    try:
        return ask(question, **ask_options)
    except (UserDeclined, AskTimeout):
        return None


def confirm(prompt, detail=None, default=False, timeout=None, **nudge):
    """Asks yes or no. A timeout returns ``default``; it never raises ``AskTimeout``. The person
    may also decline it (besides yes and no): that raises ``UserDeclined`` with their feedback."""
    message = {"type": "confirm", "prompt": prompt, "default": default, "timeout": timeout, **nudges(nudge)}
    if detail is not None:
        message["detail"] = detail
    value, _timed_out = _outcome(message)
    return bool(value)


def approve(action, detail=None, timeout=None, editable=False, quorum=None, **nudge):
    """Asks approval for ``action``. Returns "once" or "always", or with ``editable`` an
    ``Edited`` whose ``action`` the approver wrote instead; with ``quorum=N`` "once" when N
    distinct answerers approved. Raises ``UserDeclined`` on reject."""
    message = {"type": "approve", "action": action, "timeout": timeout, **nudges(nudge)}
    if detail is not None:
        message["detail"] = detail
    if editable:
        message["editable"] = True
    if quorum is not None:
        message["quorum"] = int(quorum)
    value, _timed_out = _outcome(message)
    return decision(value)


def say(text):
    """Sends a message to the conversation (not repeated when askgate replays the run)."""
    start()
    _send({"type": "say", "text": str(text)})


def run(main):
    """Calls ``main(input, start_message)`` and sends its return value as the reply.

    An exception becomes an error that fails the run with its message.
    """
    message = start()
    try:
        reply = main(message.get("input", ""), message)
    except SystemExit:
        raise
    except (UserDeclined, AskTimeout, Cancelled) as e:
        _send({"type": "error", "message": f"{type(e).__name__}: {e}"})
        return
    except Exception as e:  # noqa: BLE001 - every failure is reported to askgate
        _send({"type": "error", "message": f"{type(e).__name__}: {e}"})
        raise
    _send({"type": "done", "reply": "" if reply is None else str(reply)})


from askgate.client import ApiError, Client, Outcome  # noqa: E402  (needs the exceptions above)
from askgate import runtime  # noqa: E402  (the seed's names for the functions above)
