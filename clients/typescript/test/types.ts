// Compiled, never run (`tsc -p test`): what a TypeScript caller sees. Each `@ts-expect-error`
// must meet an error, so a type that grew loose (`any`) fails the build.

import { ApiError, type AskgateError, Client, type Event, type Outcome, unwrap } from "askgate";

declare const gate: Client;

export async function narrowing(): Promise<string> {
  const outcome: Outcome<string> = await gate.ask("Which?", { options: ["a", { label: "b", description: "the other" }] });
  switch (outcome.status) {
    case "answered":
      return outcome.value;
    case "declined":
      // @ts-expect-error -- a declined outcome has no value, only feedback.
      return outcome.value ?? outcome.feedback ?? "";
    case "expired":
      return outcome.value ?? "no default";
    case "cancelled":
      return outcome.reason;
  }
}

export async function values(): Promise<void> {
  const many: string[] = unwrap(await gate.ask("Which?", { options: ["a", "b"], multi: true }));
  // @ts-expect-error -- a single choice is a string, not a list.
  const one: string[] = unwrap(await gate.ask("Which?", { options: ["a", "b"] }));
  const yes: boolean = unwrap(await gate.confirm("Sure?", { default: true }));
  const decision = unwrap(await gate.approve("rm -rf build", { editable: true }));
  const action: string = typeof decision === "string" ? decision : decision.action;
  const form = unwrap(await gate.form<{ name: string }>("Who?", { type: "object" }));
  const name: string = form.name;
  const setup = unwrap(await gate.askMany([{ header: "Tests", prompt: "Which?", options: ["unit"], multi: true }]));
  void [many, one, yes, action, name, setup.Tests];
  // @ts-expect-error -- a misspelt option is no ask's.
  await gate.ask("Which?", { option: ["a"] });
}

export async function events(): Promise<void> {
  for await (const event of gate.events()) {
    const data = event.data;
    if (event.event === "question.replied") {
      const prompt: string = event.data.prompt;
      void prompt;
    } else if (event.event === "run.finished") {
      const result: string | null = event.data.result;
      void result;
    }
    void data;
  }
}

export function errors(error: AskgateError): string {
  switch (error.kind) {
    case "api":
      return error instanceof ApiError ? `${error.status} ${error.code}` : error.message;
    default:
      return error.message;
  }
}

export type Events = Event["event"];
