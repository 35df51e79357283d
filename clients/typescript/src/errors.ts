/**
 * The errors this client throws, one class per thing that went wrong, all `AskgateError`s.
 * Each has a `kind` too, so a `switch` narrows without `instanceof`. A question that ends
 * without an answer is not an error: it is an {@link Outcome}; only {@link unwrap} throws it,
 * as a {@link NotAnsweredError}, for code that wants the value or an exception.
 */

import type { Outcome } from "./outcome.js";

/** What askgate sent back with a refusal besides its code and message (`error.receipt`). */
export interface Receipt {
  /** What the attempt met: `already_resolved_same`, `invalid_choice`, `not_authorized`, … */
  receipt?: string;
  /** For an invalid choice: what would fit. */
  hint?: string | null;
  [key: string]: unknown;
}

/** Every error of this client. */
export abstract class AskgateError extends Error {
  abstract readonly kind: "api" | "network" | "timeout" | "not_answered";
}

/**
 * askgate refused the request: `status` is the HTTP status (401 a wrong token, 404 an unknown
 * id, 409 already resolved, 422 an invalid ask or answer, …), `code` and `message` its words.
 */
export class ApiError extends AskgateError {
  readonly kind = "api";
  override readonly name = "ApiError";

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The whole error body, for keys beyond `code` and `message` (such as `receipt`). */
    readonly body: unknown = undefined,
  ) {
    super(`${status} ${code}: ${message}`);
  }

  /** The receipt askgate sent with a refused answer (409, 422), when it sent one. */
  get receipt(): Receipt | undefined {
    const error = (this.body as { error?: { receipt?: Receipt | null } } | undefined)?.error;
    return error?.receipt ?? undefined;
  }
}

/**
 * askgate could not be reached, or the connection dropped, even after asking again (a read is
 * asked again a few times; a post never is, as it would ask the person twice).
 */
export class NetworkError extends AskgateError {
  readonly kind = "network";
  override readonly name = "NetworkError";

  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(`askgate at ${url} did not answer: ${describe(cause)}`, { cause });
  }
}

/** A request got no answer within the client's `requestTimeoutMs`, also when asked again. */
export class TimeoutError extends AskgateError {
  readonly kind = "timeout";
  override readonly name = "TimeoutError";

  constructor(
    readonly url: string,
    readonly ms: number,
  ) {
    super(`askgate at ${url} sent no answer within ${ms} ms (raise requestTimeoutMs for a slow network)`);
  }
}

/** {@link unwrap} met an outcome without a value: declined, cancelled, or expired without a default. */
export class NotAnsweredError extends AskgateError {
  readonly kind = "not_answered";
  override readonly name = "NotAnsweredError";

  constructor(readonly outcome: Exclude<Outcome<unknown>, { status: "answered" }>) {
    super(notAnswered(outcome));
  }
}

function notAnswered(outcome: NotAnsweredError["outcome"]): string {
  switch (outcome.status) {
    case "declined":
      return outcome.feedback ? `declined: ${outcome.feedback}` : "declined";
    case "expired":
      return `question ${outcome.id} expired without an answer`;
    case "cancelled":
      return `cancelled: ${outcome.reason}`;
  }
}

/** The words of a failed `fetch`: undici hides the reason in `cause` (`ECONNREFUSED`, …). */
function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? error.cause : undefined;
    const code = (cause as { code?: string } | undefined)?.code;
    return cause ? `${cause.message}${code && !cause.message.includes(code) ? ` (${code})` : ""}` : error.message;
  }
  return String(error);
}
