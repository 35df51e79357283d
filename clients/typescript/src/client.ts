/**
 * Asks a person through askgate's HTTP API, from any TypeScript or JavaScript program.
 *
 * Each ask posts the question (`POST /api/questions`) and waits for its outcome with long polls
 * (`GET /api/questions/{id}/outcome?wait=60`), asked again when a connection drops, so it
 * resolves when someone answers on any surface, however long that takes. The result is an
 * {@link Outcome}: answered, declined (with feedback), expired (with the default applied) or
 * cancelled. Failures to talk to askgate are thrown as {@link ApiError}, {@link NetworkError}
 * or {@link TimeoutError}.
 */

import { type Event, type EventsOptions, events } from "./events.js";
import { Transport } from "./http.js";
import { type Answers, type Decision, type Kind, type Outcome, type Pending, type Status, type WireOutcome, fromWire } from "./outcome.js";

/** The longest long poll askgate serves, in seconds. */
const MAX_WAIT = 60;

/** How to reach askgate. */
export interface ClientOptions {
  /** askgate's address (default `http://127.0.0.1:8080`). */
  url?: string;
  /** An API token (default: the environment's `ASKGATE_API_TOKEN`). An agent's token asks; a person's answers. */
  token?: string;
  /** Where questions go unless an ask names another (`telegram:42`, `console:local`). */
  conversation?: string;
  /** Who may answer, unless an ask names others (default: the channel's `allowed_users`). */
  answerers?: string[];
  /** Longest wait for one response, in ms (default 75 000: a long poll holds 60 s). */
  requestTimeoutMs?: number;
  /** How many times a read is asked again after a dropped connection (default 5, over about 8 s). */
  retries?: number;
}

/** What every ask takes besides its prompt. */
export interface AskOptions {
  /** More context, shown under the prompt. */
  detail?: string;
  /** Seconds until it expires, or `"never"` (default: askgate's `default_timeout`). */
  timeout?: number | "never";
  /** Where to ask, instead of the client's conversation. */
  conversation?: string;
  /** Who may answer, instead of the client's answerers. */
  answerers?: string[];
  /** A reminder this long before it expires: seconds, or `"5m"`. */
  remind_before?: number | string;
  /** A reminder every this long while it waits: seconds, or `"10m"`. */
  remind_every?: number | string;
  /** After this long, also shown in `escalate_to`: seconds, or `"10m"`. */
  escalate_after?: number | string;
  /** The conversation to escalate to. */
  escalate_to?: string;
  /** Who may answer there (default: anyone in it). */
  escalate_answerers?: string[];
  /** Stops waiting (the question stays asked: {@link Client.wait} takes it up again). */
  signal?: AbortSignal;
}

/** An option: its label, or its label with one line about it. */
export type Choice = string | { label: string; description?: string };

/** What {@link Client.ask} takes. */
export interface QuestionOptions<V> extends AskOptions {
  /** The options to pick from; none: free text. */
  options?: Choice[];
  /** Pick several: the answer is a list. */
  multi?: boolean;
  /** The person's own words besides the options (default true, as in the Python package). */
  allow_custom?: boolean;
  /** Applied on expiry: an option, or a list of them for `multi`. */
  default?: V;
}

/** One of several questions asked together ({@link Client.askMany}). */
export interface Subquestion {
  /** A short name: its key in the answer. */
  header: string;
  prompt: string;
  options?: Choice[];
  multi?: boolean;
  /** Own words besides the options (default true when it has options). */
  allow_custom?: boolean;
}

/** The ask's keys as askgate's API takes them. */
type Wire = Record<string, unknown>;

/** askgate's HTTP API at one address, with one token. */
export class Client {
  readonly url: string;
  readonly conversation: string | undefined;
  readonly answerers: string[] | undefined;
  private readonly transport: Transport;

  /** @throws {TypeError} when no token is given and `ASKGATE_API_TOKEN` is not set. */
  constructor(options: ClientOptions = {}) {
    this.url = (options.url ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    const token = options.token ?? environment("ASKGATE_API_TOKEN");
    if (!token) throw new TypeError("an API token is needed: pass { token } or set ASKGATE_API_TOKEN");
    this.conversation = options.conversation;
    this.answerers = options.answerers;
    this.transport = new Transport({
      url: this.url,
      token,
      requestTimeoutMs: options.requestTimeoutMs ?? (MAX_WAIT + 15) * 1000,
      retries: options.retries ?? 5,
    });
  }

  /**
   * Whether a person can be asked through this client: askgate answers, the token is accepted
   * and may ask. Never throws; false when askgate cannot be reached.
   */
  async canAsk(): Promise<boolean> {
    try {
      // Asked once: the answer is wanted now, not after the retries' pauses.
      const { body } = await this.transport.json("GET", "/api/me", { retries: 0 });
      return (body as { may?: { ask?: boolean } }).may?.ask === true;
    } catch {
      return false;
    }
  }

  /** Asks a question: an option, the person's own words, or a list of options with `multi`. */
  ask(prompt: string, options: QuestionOptions<string[]> & { multi: true }): Promise<Outcome<string[]>>;
  ask(prompt: string, options?: QuestionOptions<string> & { multi?: false }): Promise<Outcome<string>>;
  ask(prompt: string, options: QuestionOptions<string | string[]>): Promise<Outcome<string | string[]>>;
  ask(prompt: string, options: QuestionOptions<string | string[]> = {}): Promise<Outcome<string | string[]>> {
    const { options: choices, multi = false, allow_custom = true, ...rest } = options;
    return this.settle("question", prompt, { options: (choices ?? []).map(choice), multi, allow_custom }, rest);
  }

  /** Asks 1 to 4 questions together; the answer is keyed by their headers. */
  askMany(
    questions: Subquestion[],
    options: AskOptions & { prompt?: string; default?: Answers } = {},
  ): Promise<Outcome<Answers>> {
    const { prompt, ...rest } = options;
    const wire = questions.map(({ options: choices, ...q }) =>
      choices?.length ? { allow_custom: true, ...q, options: choices.map(choice) } : q,
    );
    return this.settle("question", prompt, { questions: wire }, rest);
  }

  /** Asks yes or no. On expiry the outcome carries `default` (false unless given). */
  confirm(prompt: string, options: AskOptions & { default?: boolean } = {}): Promise<Outcome<boolean>> {
    const { default: fallback = false, ...rest } = options;
    return this.settle("confirm", prompt, {}, { ...rest, default: fallback });
  }

  /**
   * Asks approval for `action`: `"once"` or `"always"`, or with `editable` the action as the
   * approver edited it; with `quorum` it is allowed when that many people approved. A
   * rejection is `declined` with the person's words.
   */
  approve(action: string, options: AskOptions & { editable?: boolean; quorum?: number } = {}): Promise<Outcome<Decision>> {
    const { editable, quorum, ...rest } = options;
    return this.settle("approval", action, { editable, quorum }, rest);
  }

  /**
   * Asks for a form: `schema` is MCP elicitation's flat JSON Schema (strings, numbers,
   * integers, booleans and enums, with `required`); askgate checks every field before the
   * answer arrives.
   */
  form<T extends Record<string, unknown> = Record<string, unknown>>(
    prompt: string,
    schema: Record<string, unknown>,
    options: AskOptions & { default?: T } = {},
  ): Promise<Outcome<T>> {
    return this.settle("form", prompt, { schema }, options);
  }

  /**
   * Posts a question without waiting; its id, for {@link outcome} and {@link wait}. `ask`
   * holds the API's keys of an ask (`options`, `multi`, `schema`, `questions`, …).
   */
  async submit(kind: Kind, prompt: string | undefined, ask: Wire = {}, options: AskOptions & { default?: unknown } = {}): Promise<string> {
    const { signal: _signal, conversation = this.conversation, answerers = this.answerers, ...keys } = options;
    if (!conversation) throw new TypeError("a conversation is needed: pass { conversation } to the ask or to the Client");
    const body = defined({ kind, conversation, answerers, prompt, ...ask, ...keys });
    const { body: asked } = await this.transport.json("POST", "/api/questions", { body });
    return (asked as { id: string }).id;
  }

  /**
   * Where question `id` stands, waiting up to `wait` seconds (at most 60) while nobody has
   * resolved it.
   */
  async outcome<V = unknown>(id: string, options: { wait?: number; signal?: AbortSignal } = {}): Promise<Outcome<V> | Pending> {
    const wait = Math.max(0, Math.min(Math.floor(options.wait ?? 0), MAX_WAIT));
    const path = `/api/questions/${encodeURIComponent(id)}/outcome?wait=${wait}`;
    const { body } = await this.transport.json("GET", path, { signal: options.signal });
    return fromWire<V>(body as { id: string; status: Status; outcome: WireOutcome | null });
  }

  /** Waits for question `id` to be resolved, however long that takes: its outcome. */
  async wait<V = unknown>(id: string, options: { signal?: AbortSignal } = {}): Promise<Outcome<V>> {
    for (;;) {
      const outcome = await this.outcome<V>(id, { wait: MAX_WAIT, signal: options.signal });
      if (outcome.status !== "pending") return outcome;
    }
  }

  /**
   * askgate's live events, replayed pending questions first. Needs a token that may list
   * (the operator's or a person's; an agent's is refused with `403 agent_token`).
   */
  events(options: EventsOptions = {}): AsyncGenerator<Event, void, void> {
    return events(this.transport, options);
  }

  private async settle<V>(kind: Kind, prompt: string | undefined, ask: Wire, options: AskOptions & { default?: unknown }): Promise<Outcome<V>> {
    const id = await this.submit(kind, prompt, ask, options);
    return this.wait<V>(id, { signal: options.signal });
  }
}

function choice(option: Choice): Choice {
  if (typeof option === "string" || (typeof option === "object" && option !== null && typeof option.label === "string")) {
    return option;
  }
  throw new TypeError(`option ${JSON.stringify(option)} is not a label or a { label, description }`);
}

/** The object without its undefined keys: askgate refuses none, but a null is not "left out". */
function defined(object: Wire): Wire {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined));
}

/** An environment variable, where the runtime has an environment (`process.env`). */
function environment(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}
