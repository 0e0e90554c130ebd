// Drives the chat API with OpenAI's official SDK as its users do, and
// prints what the SDK gave back as one JSON object for TestOpenAISDK to
// check. FLOWBOX_URL is the engine, FLOWBOX_KEY a personal API key,
// FLOWBOX_APP the app to chat with.
import OpenAI from "openai";

const baseURL = process.env.FLOWBOX_URL + "/api/v1";
const app = process.env.FLOWBOX_APP;
const client = new OpenAI({ baseURL, apiKey: process.env.FLOWBOX_KEY, maxRetries: 0 });
const out = {};

const failure = (err) => ({ status: err.status, message: err.message, type: err.type, code: err.code,
  retryAfter: err.headers?.get?.("retry-after") ?? null });

const models = await client.models.list();
out.models = models.data.map((m) => ({ id: m.id, object: m.object, owned_by: m.owned_by }));

const plain = await client.chat.completions.create({ model: app, messages: [{ role: "user", content: "hello there" }] });
out.plain = { model: plain.model, usage: plain.usage, text: plain.choices[0].message.content };

const stream = await client.chat.completions.create({ model: app, stream: true, stream_options: { include_usage: true },
  messages: [{ role: "user", content: "hello there" }] });
out.stream = { text: "", chunks: 0 };
for await (const chunk of stream) {
  out.stream.chunks++;
  out.stream.model = chunk.model;
  if (chunk.usage) out.stream.usage = chunk.usage, out.stream.usageChoices = chunk.choices.length;
  out.stream.text += chunk.choices[0]?.delta?.content ?? "";
}

const first = [{ role: "user", content: "$ echo remembered" }];
const one = await client.chat.completions.create({ model: app, messages: first });
const history = [...first, { role: "assistant", content: one.choices[0].message.content }, { role: "user", content: "hello there" }];
const two = await client.chat.completions.create({ model: app, messages: history });
// A command in a conversation without chatId: its sandbox goes when
// the run ends.
const three = await client.chat.completions.create({ model: app, messages: [...history, { role: "assistant", content: two.choices[0].message.content }, { role: "user", content: "$ echo again" }] });
out.history = { first: one.choices[0].message.content, third: three.choices[0].message.content, secondUsage: two.usage, ids: [two.id, three.id] };

try {
  await new OpenAI({ baseURL, apiKey: "fbk_wrong", maxRetries: 0 }).chat.completions.create({ model: app, messages: [{ role: "user", content: "hi" }] });
  out.badKey = { status: 200 };
} catch (err) {
  out.badKey = failure(err);
}

try {
  await client.chat.completions.create({ model: app, messages: [] });
  out.invalid = { status: 200 };
} catch (err) {
  out.invalid = failure(err);
}

// The user's runs are capped at one: a run while a command sleeps is
// refused.
const slow = client.chat.completions.create({ model: app, messages: [{ role: "user", content: "$ sleep 3" }] });
await new Promise((r) => setTimeout(r, 800));
for (const streamed of [false, true]) {
  try {
    const r = await client.chat.completions.create({ model: app, stream: streamed, messages: [{ role: "user", content: "hi" }] });
    if (streamed) for await (const _ of r);
    out[streamed ? "cappedStream" : "capped"] = { status: 200 };
  } catch (err) {
    out[streamed ? "cappedStream" : "capped"] = failure(err);
  }
}
await slow;

console.log(JSON.stringify(out));
