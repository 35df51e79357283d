/**
 * What askgate hands back: a question's outcome as one discriminated union (switch on
 * `status`), and the snapshots of questions and runs its events carry. Field names are the
 * API's own (snake_case), so askgate's API reference describes them word for word.
 */

import { ApiError, NotAnsweredError } from "./errors.js";

/** Where it was resolved: `console`, `telegram`, `web`, `api`, … */
export type Surface = string;

/** Who resolved a question, and where. */
export interface Resolver {
  /** The question's id. */
  id: string;
  /** Who resolved it: a stable id (`telegram:42`, `console:local`); null when askgate did (expiry). */
  answered_by: string | null;
  /** How people know them (`@alice`), when the surface said. */
  answered_name: string | null;
  /** Where it was resolved. */
  answered_via: Surface | null;
}

/** Someone answered: `value` is the answer. */
export interface Answered<V> extends Resolver {
  status: "answered";
  value: V;
}

/** Someone declined (for an approval: rejected), with their words when they gave any. */
export interface Declined extends Resolver {
  status: "declined";
  feedback: string | null;
}

/** Nobody answered in time: `value` is the default that was applied, null when there was none. */
export interface Expired<V> extends Resolver {
  status: "expired";
  value: V | null;
}

/** Closed without an answer: `reason` says why (`cancelled by console:local`, `shutdown`, …). */
export interface Cancelled extends Resolver {
  status: "cancelled";
  reason: string;
}

/** How a question ended: exactly one of these, never nothing. */
export type Outcome<V> = Answered<V> | Declined | Expired<V> | Cancelled;

/** A question nobody has resolved yet. */
export interface Pending {
  id: string;
  status: "pending";
}

/** An approval's answer: allowed once, always (a grant), or as the approver edited the action. */
export type Decision = "once" | "always" | { decision: "edited"; action: string };

/** The answer of several questions asked together, keyed by their headers. */
export type Answers = Record<string, string | string[]>;

/** The kinds of question. */
export type Kind = "question" | "confirm" | "approval" | "form";

/** Where a question stands. */
export type Status = "pending" | Outcome<unknown>["status"];

/** The outcome as askgate's API writes it (`GET …/outcome`, a snapshot's `outcome`). */
export type WireOutcome =
  | { status: "answered"; value: unknown }
  | { status: "declined"; feedback?: string | null }
  | { status: "expired"; value?: unknown }
  | { status: "cancelled"; reason: string };

/** A question as askgate shows it (`question.*` events, `GET /api/questions/{id}`). */
export interface Question {
  id: string;
  conversation: string | null;
  run: string;
  step: number;
  kind: Kind;
  prompt: string;
  detail: string | null;
  options: string[];
  descriptions?: string[];
  multi: boolean;
  allow_custom: boolean;
  default: unknown;
  created_at: number;
  expires_at: number | null;
  status: Status;
  outcome: WireOutcome | null;
  answered_by: string | null;
  answered_name: string | null;
  answered_via: Surface | null;
  asked_by: string;
  [key: string]: unknown;
}

/** A run of a function (`run.*` events). */
export interface Run {
  id: string;
  function: string;
  conversation: string | null;
  initiator: string;
  input: string;
  status: "running" | "waiting" | "finished" | "failed" | "cancelled";
  result: string | null;
  [key: string]: unknown;
}

/** The value of an outcome that has one (an answer, or the default an expiry applied).
 *
 * @throws {NotAnsweredError} when it was declined, cancelled, or expired without a default;
 *   its `outcome` says which.
 */
export function unwrap<V>(outcome: Outcome<V>): V {
  if (outcome.status === "answered") return outcome.value;
  if (outcome.status === "expired" && outcome.value !== null) return outcome.value;
  throw new NotAnsweredError(outcome);
}

/** An `OutcomeView` body as the union: the outcome flattened beside who resolved it. */
export function fromWire<V>(body: {
  id: string;
  status: Status;
  outcome: WireOutcome | null;
  answered_by?: string | null;
  answered_name?: string | null;
  answered_via?: Surface | null;
}): Outcome<V> | Pending {
  const resolver: Resolver = {
    id: body.id,
    answered_by: body.answered_by ?? null,
    answered_name: body.answered_name ?? null,
    answered_via: body.answered_via ?? null,
  };
  const outcome = body.outcome;
  if (body.status === "pending" || outcome === null) return { id: body.id, status: "pending" };
  switch (outcome.status) {
    case "answered":
      return { ...resolver, status: "answered", value: outcome.value as V };
    case "declined":
      return { ...resolver, status: "declined", feedback: outcome.feedback ?? null };
    case "expired":
      return { ...resolver, status: "expired", value: (outcome.value ?? null) as V | null };
    case "cancelled":
      return { ...resolver, status: "cancelled", reason: outcome.reason };
    default:
      // A status a later askgate may add: said, not guessed at.
      throw new ApiError(200, "unknown_status", `unknown outcome status ${JSON.stringify(outcome)}`, body);
  }
}
