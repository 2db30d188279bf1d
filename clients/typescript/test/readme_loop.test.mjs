// The README's AI SDK-style loop (append the user turn, build the context, call the model,
// append the answer), with a stand-in for `generateText` that records what it was given.
import assert from "node:assert/strict";
import { test } from "node:test";

import { client, collect } from "./helpers.mjs";

test("the README loop keeps the whole conversation in Loom", async () => {
  const loom = client();
  const seen = [];
  // what `generateText({ model, messages })` of the `ai` package takes and answers
  const generateText = async ({ model, messages }) => {
    seen.push(messages);
    return { text: `(${model}) turn ${messages.filter((m) => m.role === "user").length}` };
  };

  const session = await loom.createSession({ user_id: "cust-4711", rom: { system_prompt: "You are a support agent." } });
  async function turn(userText) {
    await loom.appendMessages(session.id, [{ role: "user", content: userText }]);
    const { messages } = await loom.context(session.id, "openai");
    const { text } = await generateText({ model: "m", messages });
    await loom.appendMessages(session.id, [{ role: "assistant", content: text }]);
    return text;
  }

  assert.equal(await turn("My order 55 is late."), "(m) turn 1");
  assert.equal(await turn("Any news?"), "(m) turn 2");
  assert.deepEqual(seen[1], [
    { role: "system", content: "You are a support agent." },
    { role: "user", content: "My order 55 is late." },
    { role: "assistant", content: "(m) turn 1" },
    { role: "user", content: "Any news?" },
  ]);
  const stored = await collect(loom.iterMessages(session.id));
  assert.deepEqual(
    stored.map((m) => m.role),
    ["user", "assistant", "user", "assistant"],
  );
});
