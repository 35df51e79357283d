/**
 * One HTTP exchange with askgate: the token on every request, askgate's refusals as
 * {@link ApiError}s, and reads asked again when a connection drops (askgate restarting, a proxy
 * closing an idle long poll). A post is never asked again: it would ask the person twice.
 */

import { ApiError, NetworkError, TimeoutError } from "./errors.js";

/** How the transport talks to askgate. */
export interface TransportOptions {
  url: string;
  token: string;
  /** Longest wait for one response, in ms (a long poll holds up to 60 s). */
  requestTimeoutMs: number;
  /** How many times a read is asked again after a dropped connection or a timeout. */
  retries: number;
}

/** A response askgate accepted: its status and its JSON body. */
export interface Answer {
  status: number;
  body: unknown;
}

export class Transport {
  constructor(readonly options: TransportOptions) {}

  /**
   * Sends one request and reads its JSON answer.
   *
   * @throws {ApiError} when askgate refuses (4xx, 5xx) or answers with something that is not JSON.
   * @throws {NetworkError} when askgate cannot be reached, also after asking again.
   * @throws {TimeoutError} when no answer came within `requestTimeoutMs`, also after asking again.
   */
  async json(
    method: "GET" | "POST",
    path: string,
    how: { body?: unknown; signal?: AbortSignal; retries?: number } = {},
  ): Promise<Answer> {
    const { signal } = how;
    const response = await this.send(method, path, { ...how, accept: "application/json" });
    const text = await this.read(response, path, signal);
    let parsed: unknown;
    try {
      parsed = text === "" ? {} : JSON.parse(text);
    } catch {
      throw new ApiError(response.status, "bad_response", `not JSON from ${this.url(path)}: ${text.slice(0, 200)}`);
    }
    return { status: response.status, body: parsed };
  }

  /**
   * Opens a response to read as it arrives (the event stream), with `headers` besides the
   * token. Refusals are thrown as for {@link json}; the body is the caller's to read.
   */
  async open(path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Response> {
    return this.send("GET", path, { accept: "text/event-stream", headers, signal, stream: true });
  }

  /** The full address of `path`. */
  url(path: string): string {
    return this.options.url + path;
  }

  private async send(
    method: "GET" | "POST",
    path: string,
    how: {
      body?: unknown;
      signal?: AbortSignal;
      accept: string;
      headers?: Record<string, string>;
      stream?: boolean;
      retries?: number;
    },
  ): Promise<Response> {
    const headers: Record<string, string> = {
      ...how.headers,
      authorization: `Bearer ${this.options.token}`,
      accept: how.accept,
    };
    if (how.body !== undefined) headers["content-type"] = "application/json";
    const attempts = method === "GET" ? (how.retries ?? this.options.retries) + 1 : 1;
    const ms = this.options.requestTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      // A stream's deadline covers its headers only (an event stream stays open for hours),
      // so it is a timer cleared once they came; a response's covers its body too.
      const headed = how.stream ? new AbortController() : undefined;
      const timer = headed && setTimeout(() => headed.abort(), ms);
      const timeout = headed ? headed.signal : AbortSignal.timeout(ms);
      const signal = how.signal ? AbortSignal.any([how.signal, timeout]) : timeout;
      let failure: NetworkError | TimeoutError;
      try {
        const response = await fetch(this.url(path), {
          method,
          headers,
          body: how.body === undefined ? undefined : JSON.stringify(how.body),
          signal,
        });
        if (!response.ok) throw await refusal(response);
        return response;
      } catch (error) {
        if (error instanceof ApiError) throw error;
        if (how.signal?.aborted) throw how.signal.reason;
        failure = timeout.aborted ? new TimeoutError(this.url(path), ms) : new NetworkError(this.url(path), error);
      } finally {
        clearTimeout(timer);
      }
      if (attempt >= attempts) throw failure;
      await pause(Math.min(250 * 2 ** (attempt - 1), 4000), how.signal);
    }
  }

  /** The whole body of `response`, as text; a connection that drops while it arrives is a `NetworkError`. */
  private async read(response: Response, path: string, signal?: AbortSignal): Promise<string> {
    try {
      return await response.text();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw new NetworkError(this.url(path), error);
    }
  }
}

/** askgate's `{"error":{"code","message"}}` as an ApiError; another server's body as its text. */
async function refusal(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (typeof error?.code === "string" && typeof error.message === "string") {
    return new ApiError(response.status, error.code, error.message, body);
  }
  return new ApiError(response.status, "http_error", text.slice(0, 500) || response.statusText, body ?? text);
}

/** Waits `ms`, or less when `signal` aborts (then throws its reason). */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}
