/**
 * askgate's live events (`GET /api/events`), server-sent events read as an async iterator of
 * typed values. On connect askgate first sends `question.asked` for every pending question,
 * then `replay.done`, then what happens. A dropped stream is opened again with `Last-Event-ID`,
 * as a browser's `EventSource` does, so nothing askgate still keeps is missed.
 */

import type { Question, Run } from "./outcome.js";
import type { Transport } from "./http.js";
import { ApiError, NetworkError } from "./errors.js";

/** The events about questions; `data` is the question after the change. */
export type QuestionEventName =
  | "question.asked"
  | "question.counted"
  | "question.replied"
  | "question.rejected"
  | "question.expired"
  | "question.cancelled";

/** The events about runs; `data` is the run after the change. */
export type RunEventName = "run.started" | "run.resumed" | "run.waiting" | "run.finished" | "run.failed" | "run.cancelled";

/** One event: switch on `event` and `data` has its type. `id` (for `lastEventId`) is null on replayed questions. */
export type Event =
  | { event: QuestionEventName; id: string | null; data: Question }
  | { event: RunEventName; id: string | null; data: Run }
  | { event: "replay.done"; id: string | null; data: Record<string, never> };

/** What {@link Client.events} takes. */
export interface EventsOptions {
  /** Only this conversation's events (`telegram:-100123`). */
  conversation?: string;
  /** Resume after this event (the `id` of the last one received). */
  lastEventId?: string;
  /** Ends the stream: the iterator then finishes (or throws the signal's reason while it waits). */
  signal?: AbortSignal;
  /** Open the stream again when it drops (default true). */
  reconnect?: boolean;
}

const NAMES = new Set<string>([
  "question.asked",
  "question.counted",
  "question.replied",
  "question.rejected",
  "question.expired",
  "question.cancelled",
  "run.started",
  "run.resumed",
  "run.waiting",
  "run.finished",
  "run.failed",
  "run.cancelled",
  "replay.done",
]);

/**
 * The events of one stream, opened again after a drop. Refusals (a wrong token, an agent's
 * token, too many streams) and an event that is not JSON end it with an `ApiError`; a stream
 * that cannot be opened again ends it with a `NetworkError`.
 */
export async function* events(transport: Transport, options: EventsOptions = {}): AsyncGenerator<Event, void, void> {
  const { conversation, signal, reconnect = true } = options;
  let lastId = options.lastEventId;
  const path = "/api/events" + (conversation ? `?conversation=${encodeURIComponent(conversation)}` : "");
  for (;;) {
    const response = await transport.open(path, lastId ? { "last-event-id": lastId } : {}, signal);
    try {
      for await (const message of messages(response.body)) {
        if (message.id !== null) lastId = message.id;
        const event = parse(message, transport.url(path));
        if (event) yield event;
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (error instanceof ApiError) throw error;
      if (!reconnect) throw new NetworkError(transport.url(path), error);
    }
    if (signal?.aborted || !reconnect) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

interface Message {
  event: string;
  data: string;
  id: string | null;
}

/** Turns a known message into an event; a name a later askgate adds is skipped. */
function parse(message: Message, url: string): Event | undefined {
  if (!NAMES.has(message.event)) return undefined;
  try {
    return { event: message.event, id: message.id, data: JSON.parse(message.data) } as Event;
  } catch {
    throw new ApiError(200, "bad_response", `event ${message.event} from ${url} carries no JSON: ${message.data.slice(0, 200)}`);
  }
}

/** The messages of a `text/event-stream` body, as the HTML standard parses them. */
async function* messages(body: ReadableStream<Uint8Array> | null): AsyncGenerator<Message> {
  if (!body) return;
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | null = null;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      // A lone "\r" at the end may be the first half of "\r\n": read on first.
      while ((end = buffer.search(/\r\n|\r(?!$)|\n/)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          event = "";
          data = [];
          id = null;
          continue;
        }
        if (line.startsWith(":")) continue; // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
        else if (field === "id" && !text.includes("\0")) id = text;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
