"""Ask a person through askgate's HTTP API, from any Python program (standard library only).

    import askgate

    gate = askgate.Client("http://127.0.0.1:8080", token, conversation="telegram:42")
    where = gate.ask("Deploy where?", options=["staging", "prod"])
    if gate.confirm(f"Deploy to {where}?", default=False):
        gate.approve(f"deploy {where}")          # "once" or "always"; raises Declined on reject

Each call posts the question (``POST /api/questions``) and waits for its outcome with long
polls (``GET /api/questions/{id}/outcome?wait=…``), so it returns when someone answers on any
surface, however long that takes. ``submit`` posts without waiting and ``outcome`` reads where
a question stands, for callers that keep the id and come back later.

Outcomes other than an answer raise the same exceptions as inside a run: ``UserDeclined``
(rejected or declined, with the person's feedback; a confirm can be declined too; also named
``Declined``), ``AskTimeout`` (no answer before the deadline and no default; also named
``Expired`` and ``Timeout``), ``Cancelled`` (with the reason).
A confirm never raises on expiry: its default applies. ``can_ask()`` says whether askgate answers
and takes this token's questions. A request askgate refuses raises
``ApiError`` with its HTTP status, code and message.
"""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from askgate import Cancelled, Declined, Expired, decision, nudges, wire_options, wire_questions

__all__ = ["Client", "Outcome", "Expired", "ApiError"]

# The longest long poll askgate serves, in seconds.
_MAX_WAIT = 60


class ApiError(Exception):
    """askgate refused a request: ``status`` (HTTP), ``code`` and ``message`` as it said them."""

    def __init__(self, status, code, message, body=None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class Outcome:
    """Where a question stands: ``status`` is ``pending``, ``answered``, ``declined``,
    ``expired`` or ``cancelled``; ``value`` the answer (or the default an expiry applied),
    ``feedback`` a rejection's words, ``reason`` a cancellation's, ``answered_by`` and
    ``answered_name`` who resolved it."""

    def __init__(self, body):
        outcome = body.get("outcome") or {}
        self.id = body.get("id")
        self.status = body.get("status")
        self.value = outcome.get("value")
        self.feedback = outcome.get("feedback")
        self.reason = outcome.get("reason")
        self.answered_by = body.get("answered_by")
        self.answered_name = body.get("answered_name")

    @property
    def pending(self):
        return self.status == "pending"

    def __repr__(self):
        return f"Outcome(id={self.id!r}, status={self.status!r}, value={self.value!r})"


class Client:
    """askgate's HTTP API at ``url`` with the API token ``token`` (default: the environment's
    ``ASKGATE_API_TOKEN``). ``conversation`` is where questions go unless a call names another
    (``telegram:42``, ``discord:…``, ``console:local``, ``webhook:<name>:…``)."""

    def __init__(self, url="http://127.0.0.1:8080", token=None, conversation=None, answerers=None):
        self.url = url.rstrip("/")
        self.token = token or os.environ.get("ASKGATE_API_TOKEN")
        if not self.token:
            raise ValueError("an API token is needed: pass token= or set ASKGATE_API_TOKEN")
        self.conversation = conversation
        self.answerers = answerers

    def can_ask(self):
        """Whether a person can be asked through this client: askgate answers at ``url``, the token
        is accepted and may ask. Never raises; False when askgate cannot be reached."""
        try:
            _, me = self._request("GET", "/api/me")
            return bool((me.get("may") or {}).get("ask"))
        except Exception:  # noqa: BLE001 - a timeout, a reset, a body that is not askgate's
            return False

    def ask(self, prompt, options=None, multi=False, allow_custom=True, detail=None, default=None,
            timeout=None, conversation=None, answerers=None, questions=None, **nudge):
        """Asks a question and returns the answer: an option, free text, or a list when
        ``multi``. Each option is a label or a ``(label, description)`` pair, as in
        ``askgate.ask``; people may write their own answer unless ``allow_custom=False`` (as in
        ``askgate.ask``; the API's default is False, so this sends it every time). ``questions``
        asks 1 to 4 together and returns a dict keyed by their headers. On expiry returns
        ``default`` when there is one, else raises ``AskTimeout``.
        ``remind_before``, ``remind_every``, ``escalate_after``, ``escalate_to`` and
        ``escalate_answerers`` nudge people while it waits (also for ``confirm`` and ``approve``)."""
        ask = {"prompt": prompt, **nudges(nudge)}
        if questions is not None:
            if options or multi:
                raise TypeError("options and multi belong to each of the questions")
            ask["questions"] = wire_questions(questions, allow_custom)
        else:
            ask.update({"options": wire_options(options), "multi": multi, "allow_custom": allow_custom})
        return self._settle(self._ask("question", ask, detail, default, timeout, conversation, answerers))

    def form(self, prompt, schema, detail=None, default=None, timeout=None, conversation=None, answerers=None,
             **nudge):
        """Asks for a form (``schema``: MCP elicitation's flat JSON Schema, as in
        ``askgate.form``) and returns the answer, a dict whose fields askgate checked."""
        ask = {"prompt": prompt, "schema": schema, **nudges(nudge)}
        return self._settle(self._ask("form", ask, detail, default, timeout, conversation, answerers))

    def confirm(self, prompt, detail=None, default=False, timeout=None, conversation=None, answerers=None, **nudge):
        """Asks yes or no and returns a bool; on expiry ``default`` (it never raises ``Expired``)."""
        ask = {"prompt": prompt, **nudges(nudge)}
        outcome = self._ask("confirm", ask, detail, bool(default), timeout, conversation, answerers)
        return bool(self._settle(outcome))

    def approve(
        self, action, detail=None, timeout=None, conversation=None, answerers=None, editable=False, quorum=None,
        **nudge
    ):
        """Asks approval for ``action``: returns ``"once"`` or ``"always"``, or with ``editable``
        an ``Edited`` whose ``action`` the approver wrote instead; with ``quorum=N`` it returns
        ``"once"`` when N distinct answerers approved. Raises ``Declined`` on reject (with the
        person's feedback) and ``Expired`` when nobody answered."""
        ask = {"prompt": action, "editable": True if editable else None, "quorum": quorum, **nudges(nudge)}
        return decision(self._settle(self._ask("approval", ask, detail, None, timeout, conversation, answerers)))

    def submit(self, prompt, kind="question", conversation=None, answerers=None, **ask):
        """Posts a question without waiting; returns its id (see ``outcome``). ``ask`` takes the
        keys of an ask: ``options``, ``multi``, ``allow_custom``, ``detail``, ``default``,
        ``timeout``."""
        body = {"kind": kind, "prompt": prompt, "conversation": conversation or self.conversation}
        body.update({k: v for k, v in ask.items() if v is not None})
        answerers = answerers if answerers is not None else self.answerers
        if answerers is not None:
            body["answerers"] = list(answerers)
        if body["conversation"] is None:
            raise ValueError("a conversation is needed: pass conversation= here or to Client")
        return self._request("POST", "/api/questions", body)[1]["id"]

    def outcome(self, id, wait=0):
        """Where question ``id`` stands, waiting up to ``wait`` seconds (at most 60) for it to be
        resolved: an ``Outcome`` whose ``status`` is ``pending`` while nobody answered."""
        wait = max(0, min(int(wait), _MAX_WAIT))
        _, body = self._request("GET", f"/api/questions/{urllib.parse.quote(id)}/outcome?wait={wait}")
        return Outcome(body)

    def wait(self, id):
        """Waits for question ``id`` to be resolved, however long that takes; its ``Outcome``."""
        while True:
            outcome = self.outcome(id, wait=_MAX_WAIT)
            if not outcome.pending:
                return outcome

    def _ask(self, kind, ask, detail, default, timeout, conversation, answerers):
        ask.update({"detail": detail, "default": default, "timeout": timeout})
        prompt = ask.pop("prompt")
        return self.wait(self.submit(prompt, kind=kind, conversation=conversation, answerers=answerers, **ask))

    @staticmethod
    def _settle(outcome):
        if outcome.status == "answered":
            return outcome.value
        if outcome.status == "expired":
            if outcome.value is None:
                raise Expired(f"question {outcome.id} expired without an answer")
            return outcome.value
        if outcome.status == "declined":
            raise Declined(outcome.feedback)
        if outcome.status == "cancelled":
            raise Cancelled(outcome.reason or "cancelled")
        raise ApiError(200, "unknown_status", f"unknown outcome status {outcome.status!r}")

    def _request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for attempt in range(3):
            try:
                with urllib.request.urlopen(request, timeout=_MAX_WAIT + 15) as response:
                    return response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    said = json.loads(raw)
                except ValueError:
                    said = {}
                error = said.get("error") or {}
                raise ApiError(e.code, error.get("code", "http_error"), error.get("message", raw.decode(errors="replace")), said) from None
            except urllib.error.URLError as e:
                # askgate restarting, or a connection dropped: reads are safe to repeat.
                if method != "GET" or attempt == 2:
                    raise ApiError(0, "unreachable", f"askgate at {self.url} did not answer: {e.reason}") from None
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")
