// The official A2A JavaScript SDK (@a2a-js/sdk) as a client of a running askgate, driven by a
// test: each line on stdin is a command `{"n": <tag>, "op": …}`, each line on stdout an answer
// tagged with its command's `n` (a stream answers once per event, then `{"end": true}`).
// Arguments: the node_modules folder that holds the SDK, askgate's base URL, an agent token.
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, base, token] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(join(modules, "@a2a-js/sdk/dist", file)).href);
const { TaskState, Role } = await load("index.js");
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = await load("client/index.js");

// The bearer token on every call: askgate's card names the scheme, the client brings the token.
const authed = (url, init = {}) =>
  fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${token}` } });
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
  }),
);
const client = await factory.createFromUrl(base);

const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const texts = (parts) => (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
const data = (parts) => (parts ?? []).filter((p) => p.content?.$case === "data").map((p) => p.content.value);
const task = (t) => ({
  id: t.id,
  contextId: t.contextId,
  state: TaskState[t.status?.state],
  said: texts(t.status?.message?.parts).join(" "),
  saidData: data(t.status?.message?.parts),
  artifacts: (t.artifacts ?? []).map((a) => ({ name: a.name, text: texts(a.parts).join(" "), data: data(a.parts) })),
});
const event = (e) => {
  const { $case: kind, value } = e.payload ?? e;
  if (kind === "task") return { kind, task: task(value) };
  if (kind === "statusUpdate") return { kind, state: TaskState[value.status?.state], said: texts(value.status?.message?.parts).join(" ") };
  if (kind === "artifactUpdate") return { kind, text: texts(value.artifact?.parts).join(" "), data: data(value.artifact?.parts) };
  return { kind };
};
const message = (c) => ({
  messageId: `m-${c.n}`,
  role: Role.ROLE_USER,
  parts: [
    { content: { $case: "text", value: c.text } },
    ...(c.data ? [{ content: { $case: "data", value: c.data } }] : []),
  ],
  ...(c.contextId ? { contextId: c.contextId } : {}),
});
const push = (c) => ({ taskId: c.taskId, id: c.id ?? "", url: c.url, token: c.token ?? "" });

async function run(c) {
  switch (c.op) {
    case "card": {
      const card = await client.getAgentCard();
      return say({ n: c.n, name: card.name, skills: card.skills.map((s) => s.id), url: card.supportedInterfaces[0].url,
        streaming: card.capabilities?.streaming, push: card.capabilities?.pushNotifications,
        schemes: Object.keys(card.securitySchemes ?? {}) });
    }
    case "send": {
      const configuration = c.push ? { taskPushNotificationConfig: push(c.push) } : undefined;
      const result = await client.sendMessage({ message: message(c), configuration });
      return say({ n: c.n, task: task(result) });
    }
    case "stream":
    case "subscribe": {
      const events = c.op === "stream"
        ? client.sendMessageStream({ message: message(c) })
        : client.resubscribeTask({ id: c.id });
      for await (const e of events) say({ n: c.n, event: event(e) });
      return say({ n: c.n, end: true });
    }
    case "get":
      return say({ n: c.n, task: task(await client.getTask({ id: c.id })) });
    case "cancel":
      return say({ n: c.n, task: task(await client.cancelTask({ id: c.id })) });
    case "push_set":
      return say({ n: c.n, push: await client.createTaskPushNotificationConfig(push(c)) });
    case "push_get":
      return say({ n: c.n, push: await client.getTaskPushNotificationConfig({ taskId: c.taskId, id: c.id }) });
    case "push_list":
      return say({ n: c.n, pushes: (await client.listTaskPushNotificationConfig({ taskId: c.taskId })).configs });
    case "push_delete":
      await client.deleteTaskPushNotificationConfig({ taskId: c.taskId, id: c.id });
      return say({ n: c.n, deleted: true });
    default:
      return say({ n: c.n, error: { message: `unknown op ${c.op}` } });
  }
}

say({ n: 0, ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const c = JSON.parse(line);
  run(c).catch((e) => say({ n: c.n, error: { name: e.name, message: e.message, code: e.envelopeCode ?? e.code } }));
}
