// A remote A2A agent on the official JS SDK's server side (@a2a-js/sdk 1.3.0, JSON-RPC over
// express): it cleans a folder, and asks first. Its first turn leaves the task in
// input-required ("May I run rm -rf build?"); the next message on the same task answers: "yes"
// deletes <workdir>/build and completes with an artifact, anything else rejects the task with
// the person's words. Each message it gets is printed as a JSON line (its text, the taskId and
// contextId it came on), after a first line with the port it listens on.
//
// node agent.mjs <workdir> <token>
import fs from 'node:fs';
import path from 'node:path';
import express from 'express';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const [workdir, token] = process.argv.slice(2);
const said = (message) =>
  message.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');
const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const agentMessage = (taskId, contextId, value) => ({
  role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), parts: [text(value)], taskId, contextId,
  extensions: [], metadata: {}, referenceTaskIds: [],
});
const status = (taskId, contextId, state, value) => AgentEvent.statusUpdate({
  taskId, contextId, metadata: {},
  status: { state, timestamp: new Date().toISOString(), message: value ? agentMessage(taskId, contextId, value) : undefined },
});

class Cleaner {
  cancelTask = async (taskId, bus) => {
    console.log(JSON.stringify({ cancelled: taskId }));
    bus.publish(status(taskId, undefined, TaskState.TASK_STATE_CANCELED));
  };

  async execute(context, bus) {
    const { userMessage, task, taskId, contextId } = context;
    console.log(JSON.stringify({
      text: said(userMessage), taskId: userMessage.taskId || null, contextId: userMessage.contextId || null, task: taskId,
    }));
    const snapshot = task ?? {
      id: taskId, contextId, artifacts: [], history: [userMessage], metadata: undefined,
      status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined },
    };
    bus.publish(AgentEvent.task(snapshot));
    if (!task) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'May I run rm -rf build? Answer yes or no.'));
      return;
    }
    const answer = said(userMessage).trim();
    if (/^yes\b/i.test(answer)) {
      fs.rmSync(path.join(workdir, 'build'), { recursive: true, force: true });
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, lastChunk: true, append: false, metadata: undefined,
        artifact: { artifactId: 'result', name: 'Result', description: '', parts: [text('Deleted build/.')], metadata: undefined, extensions: [] },
      }));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    } else {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_REJECTED, `Left build/ alone: ${answer}`));
    }
  }
}

const card = {
  name: 'Cleaner', description: 'Cleans the build folder, after asking.', version: '1.0.0',
  supportedInterfaces: [{ url: '', protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text'], defaultOutputModes: ['text'],
  skills: [{ id: 'clean', name: 'Clean', description: 'Deletes build/', tags: ['files'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  documentationUrl: '', signatures: [],
};
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Cleaner());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use((req, res, next) => {
  if (req.headers.authorization !== `Bearer ${token}`) {
    console.log(JSON.stringify({ refused: req.headers.authorization ?? null }));
    return res.status(401).json({ error: 'a bearer token is needed' });
  }
  next();
});
app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  card.supportedInterfaces[0].url = `http://127.0.0.1:${port}/`;
  console.log(JSON.stringify({ port }));
});
