// The client against a running askgate. ASKGATE_URL is its address, ASKGATE_AGENT_TOKEN an
// agent's token (it asks), ASKGATE_OPERATOR_TOKEN the operator's (it reads the event stream).
// A person answers on askgate's console, in the order these tests ask (askgate's own test,
// tests/it/typescript_client.rs, types the answers); the tests run one after another.

import assert from "node:assert/strict";
import { createConnection, createServer } from "node:net";
import { test } from "node:test";

import { ApiError, Client, NetworkError, NotAnsweredError, TimeoutError, unwrap } from "askgate";

const url = process.env.ASKGATE_URL;
const agent = process.env.ASKGATE_AGENT_TOKEN;
const operator = process.env.ASKGATE_OPERATOR_TOKEN;
if (!url || !agent || !operator) throw new Error("set ASKGATE_URL, ASKGATE_AGENT_TOKEN and ASKGATE_OPERATOR_TOKEN");
const conversation = "console:local";
const gate = new Client({ url, token: agent, conversation });

test("canAsk says whether the token may ask", async () => {
  assert.equal(await gate.canAsk(), true);
  assert.equal(await new Client({ url, token: "wrong-token", conversation }).canAsk(), false);
  assert.equal(await new Client({ url: "http://127.0.0.1:9", token: agent, retries: 0 }).canAsk(), false);
});

test("an answered question carries its value and who answered", async () => {
  const outcome = await gate.ask("Which database?", { options: ["postgres", { label: "sqlite", description: "one file" }] });
  assert.equal(outcome.status, "answered");
  assert.equal(outcome.value, "sqlite");
  assert.equal(outcome.answered_by, "console:local");
  assert.equal(outcome.answered_via, "console");
  assert.equal(unwrap(outcome), "sqlite");
});

test("a confirm answers true or false", async () => {
  const outcome = await gate.confirm("Migrate now?");
  assert.deepEqual([outcome.status, unwrap(outcome)], ["answered", true]);
});

test("a rejected approval is declined with the person's words", async () => {
  const outcome = await gate.approve("drop table users", { detail: "irreversible" });
  assert.equal(outcome.status, "declined");
  assert.equal(outcome.feedback, "not on a Friday");
  assert.throws(() => unwrap(outcome), (e) => e instanceof NotAnsweredError && e.outcome.status === "declined");
});

test("an editable approval answers with the edited action", async () => {
  const outcome = await gate.approve("deploy prod", { editable: true });
  assert.equal(outcome.status, "answered");
  assert.deepEqual(outcome.value, { decision: "edited", action: "deploy staging" });
});

test("a multi-select answers a list", async () => {
  const outcome = await gate.ask("Which tests?", { options: ["unit", "e2e", "lint"], multi: true });
  assert.equal(outcome.status, "answered");
  assert.deepEqual(outcome.value, ["unit", "lint"]);
});

test("several questions at once answer one object keyed by header", async () => {
  const outcome = await gate.askMany(
    [
      { header: "Library", prompt: "Which date library?", options: ["dayjs", "luxon"] },
      { header: "Tests", prompt: "Which kinds?", options: ["unit", "e2e"], multi: true },
    ],
    { prompt: "Project setup" },
  );
  assert.equal(outcome.status, "answered");
  assert.deepEqual(outcome.value, { Library: "dayjs", Tests: ["unit", "e2e"] });
});

test("a form answers its fields, checked by askgate", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 } },
    required: ["name"],
  };
  const outcome = await gate.form("Who are you?", schema);
  assert.equal(outcome.status, "answered");
  assert.deepEqual(outcome.value, { name: "Ada", age: 36 });
});

test("an expiry applies the default, or has none", async () => {
  const bare = await gate.ask("Anyone there?", { timeout: 1 });
  assert.deepEqual([bare.status, bare.value], ["expired", null]);
  assert.throws(() => unwrap(bare), (e) => e instanceof NotAnsweredError && e.outcome.status === "expired");
  const confirm = await gate.confirm("Quick check?", { default: true, timeout: 1 });
  assert.deepEqual([confirm.status, confirm.value], ["expired", true]);
  assert.equal(unwrap(confirm), true, "a default that applied is the value");
});

test("a question cancelled on the console is cancelled with the reason", async () => {
  const outcome = await gate.ask("Still there?");
  assert.equal(outcome.status, "cancelled");
  assert.equal(outcome.reason, "cancelled by console:local");
});

test("submit posts without waiting and outcome reads where it stands", async () => {
  const id = await gate.submit("question", "Later?", { options: ["a", "b"] });
  assert.deepEqual(await gate.outcome(id), { id, status: "pending" });
});

test("refusals are ApiErrors with askgate's status and code", async () => {
  const refused = async (promise) => {
    const error = await promise.then(
      () => assert.fail("askgate refused nothing"),
      (e) => e,
    );
    assert.ok(error instanceof ApiError, `${error}`);
    assert.equal(error.kind, "api");
    return [error.status, error.code];
  };
  assert.deepEqual(await refused(gate.outcome("no-such-question")), [404, "not_found"]);
  assert.deepEqual(await refused(gate.ask("Where?", { conversation: "nowhere:1" })), [422, "unknown_conversation"]);
  const wrong = new Client({ url, token: "wrong-token", conversation });
  assert.deepEqual(await refused(wrong.submit("question", "Hi?")), [401, "unauthorized"]);
  assert.deepEqual(await refused(gate.events().next()), [403, "agent_token"]);
});

test("an unreachable askgate is a NetworkError, a silent one a TimeoutError", async () => {
  const nowhere = new Client({ url: "http://127.0.0.1:9", token: agent, conversation, retries: 1 });
  await assert.rejects(nowhere.outcome("x"), (e) => e instanceof NetworkError && e.kind === "network");
  const id = await gate.submit("question", "Slow?");
  const impatient = new Client({ url, token: agent, requestTimeoutMs: 300, retries: 0 });
  await assert.rejects(impatient.outcome(id, { wait: 5 }), (e) => e instanceof TimeoutError && e.ms === 300);
});

test("the event stream replays what waits, then says what happens", async () => {
  const stop = new AbortController();
  const watcher = new Client({ url, token: operator });
  const stream = watcher.events({ conversation, signal: stop.signal });
  const seen = [];
  let next = await stream.next();
  while (!next.done && next.value.event !== "replay.done") {
    seen.push(next.value.data.prompt);
    next = await stream.next();
  }
  assert.ok(seen.includes("Later?"), `the pending question is replayed: ${seen}`);
  const asked = gate.ask("Which host?");
  const events = [];
  for await (const event of stream) {
    if (event.event.startsWith("question.") && event.data.prompt === "Which host?") events.push(event);
    if (event.event === "question.replied") break;
  }
  stop.abort();
  assert.deepEqual(
    events.map((e) => e.event),
    ["question.asked", "question.replied"],
  );
  const [first, last] = events;
  assert.ok(first.id && last.id, "live events carry ids");
  assert.equal(last.data.id, first.data.id);
  assert.deepEqual(last.data.outcome, { status: "answered", value: "localhost" });
  assert.deepEqual((await asked).value, "localhost");
});

/**
 * A proxy in front of askgate that drops every connection on demand, as a load balancer
 * closing idle connections does; `sent(text)` resolves once a request holding `text` went by.
 */
async function flakyProxy() {
  const sockets = new Set();
  const waiting = [];
  const target = new URL(url);
  const proxy = createServer((inbound) => {
    const outbound = createConnection(Number(target.port), target.hostname);
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => sockets.delete(socket));
    }
    inbound.on("data", (chunk) => {
      for (const wait of waiting) if (chunk.toString().includes(wait.text)) wait.resolve();
    });
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${proxy.address().port}`,
    sent: (text) => new Promise((resolve) => waiting.push({ text, resolve })),
    drop: () => sockets.forEach((socket) => socket.destroy()),
    close: () => {
      proxy.close();
      sockets.forEach((socket) => socket.destroy());
    },
  };
}

test("the wait for an outcome survives a dropped connection", async () => {
  const proxy = await flakyProxy();
  try {
    const through = new Client({ url: proxy.url, token: agent, conversation });
    const polled = proxy.sent("/outcome?wait=60");
    const asked = through.ask("Survive a drop?", { options: ["yes", "no"] });
    await polled;
    proxy.drop();
    // Answered after the drop, by the operator over the API: only a client that asks again sees it.
    const list = await fetch(`${url}/api/questions?conversation=${conversation}`, {
      headers: { authorization: `Bearer ${operator}` },
    }).then((r) => r.json());
    const question = list.questions.find((q) => q.prompt === "Survive a drop?");
    const reply = await fetch(`${url}/api/questions/${question.id}/reply`, {
      method: "POST",
      headers: { authorization: `Bearer ${operator}`, "content-type": "application/json" },
      body: JSON.stringify({ value: "yes" }),
    });
    assert.equal(reply.status, 200, await reply.text());
    const outcome = await asked;
    assert.deepEqual([outcome.status, outcome.value, outcome.answered_via], ["answered", "yes", "api"]);
  } finally {
    proxy.close();
  }
});

test("a dropped event stream resumes after the last event it got", async () => {
  // Waiting all along: a stream opened afresh would replay it first.
  await gate.submit("question", "Left waiting?");
  const proxy = await flakyProxy();
  const stop = new AbortController();
  try {
    const stream = new Client({ url: proxy.url, token: operator }).events({ conversation, signal: stop.signal });
    let next = await stream.next();
    while (!next.done && next.value.event !== "replay.done") next = await stream.next();
    assert.ok(next.value?.id, "replay.done carries an id to resume from");
    const resumed = proxy.sent("GET /api/events");
    proxy.drop();
    // Reading on meets the drop and opens the stream again, with Last-Event-ID.
    const after = stream.next();
    await resumed;
    const id = await gate.submit("question", "While away?");
    // What happened since (its run started, then it was asked), not the pending questions replayed.
    next = await after;
    while (!next.done && !next.value.event.startsWith("question.")) next = await stream.next();
    stop.abort();
    assert.deepEqual([next.value?.event, next.value?.data.id], ["question.asked", id]);
    assert.ok(next.value?.id, "a live event, not a replayed one");
  } finally {
    proxy.close();
  }
});
