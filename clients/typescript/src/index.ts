/**
 * askgate for TypeScript: ask a person from any program, over askgate's HTTP API.
 *
 * ```ts
 * import { Client } from "askgate";
 *
 * const gate = new Client({ url: "http://127.0.0.1:8080", token, conversation: "telegram:42" });
 * const where = await gate.ask("Deploy where?", { options: ["staging", "prod"] });
 * if (where.status === "answered") console.log(`deploying to ${where.value}`);
 * ```
 */

export { Client } from "./client.js";
export type { AskOptions, Choice, ClientOptions, QuestionOptions, Subquestion } from "./client.js";
export { ApiError, AskgateError, NetworkError, NotAnsweredError, TimeoutError } from "./errors.js";
export type { Receipt } from "./errors.js";
export type { Event, EventsOptions, QuestionEventName, RunEventName } from "./events.js";
export { unwrap } from "./outcome.js";
export type {
  Answered,
  Answers,
  Cancelled,
  Decision,
  Declined,
  Expired,
  Kind,
  Outcome,
  Pending,
  Question,
  Resolver,
  Run,
  Status,
  Surface,
  WireOutcome,
} from "./outcome.js";
