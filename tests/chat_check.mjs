// roles.http_chat: POST /v1/chat/completions of `rlctl serve`, called with the official OpenAI
// Node client (the npm package `openai`, fetched by tests/reference/fetch_openai.sh). Starts
// `rlctl serve --model cookbook/models/arith-base --chat-template chatml`, then checks: the
// chat.completion object; greedy content and token ids equal /v1/completions of the same
// prompt rendered with chatml (the prompt's token ids too); logprobs and top_logprobs equal the
// completions endpoint's; streaming gives the same content in chat.completion.chunk events, a
// finish reason and the usage chunk; with n 2, a seed and a stop string each choice's deltas (one
// per token or so) add up to its message; a client that leaves at the first delta of a long
// generation (ignore_eos) stops it (the server's log says so) and the next request is served;
// ignore_eos runs to max_tokens; n with a seed gives repeatable choices; tools are taken
// with tool_choice auto and a text without a call has no tool_calls; refusals through the
// client (an unknown field, tool_choice required, top_logprobs without logprobs, a bad
// chat_template_kwargs) are 400 errors naming the field. Exits 1 on any failure.
import { spawn } from "node:child_process";
import path from "node:path";
import { createRequire } from "node:module";

const [rlctl, src] = process.argv.slice(2);
const require = createRequire(path.join(src, "tests/fixtures/third_party/node_modules/"));
let OpenAI;
try {
  OpenAI = require("openai").default ?? require("openai");
} catch (e) {
  console.error("FAIL: the openai package is missing: run tests/reference/fetch_openai.sh", e);
  process.exit(1);
}

let failed = 0, checks = 0;
function check(cond, what) {
  checks++;
  if (!cond) {
    failed++;
    console.log("FAIL:", what);
  }
}

const server = spawn(rlctl, ["serve", "--model", path.join(src, "cookbook/models/arith-base"),
  "--http", "127.0.0.1:0", "--chat-template", "chatml", "--threads", "1"]);
let serverLog = "";
server.stderr.on("data", (d) => { serverLog += d; });
const port = await new Promise((resolve, reject) => {
  let out = "";
  server.stdout.on("data", (d) => {
    out += d;
    const m = out.match(/http on http:\/\/127\.0\.0\.1:(\d+)\/v1/);
    if (m) resolve(Number(m[1]));
  });
  server.on("exit", (c) => reject(new Error("rlctl serve exited " + c)));
  setTimeout(() => reject(new Error("rlctl serve did not start: " + out)), 20000);
});
const base = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL: base, apiKey: "none", maxRetries: 0 });
const post = async (p, body) => (await fetch(base + p, { method: "POST", body: JSON.stringify(body) })).json();

try {
  const messages = [{ role: "user", content: "12+30=" }];
  const chatml = "<|im_start|>user\n12+30=<|im_end|>\n<|im_start|>assistant\n";
  const r = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 10,
    temperature: 0, logprobs: true, top_logprobs: 2, return_token_ids: true });
  check(r.object === "chat.completion" && r.id.startsWith("chatcmpl-"), "the object " + r.object);
  check(r.choices.length === 1 && r.choices[0].message.role === "assistant", "one assistant choice");
  const c = await post("/completions", { prompt: chatml, max_tokens: 10, temperature: 0,
    logprobs: 2, return_token_ids: true });
  const cc = c.choices[0], ch = r.choices[0];
  check(ch.message.content === cc.text, `content ${JSON.stringify(ch.message.content)} vs completions ${JSON.stringify(cc.text)}`);
  check(JSON.stringify(ch.token_ids) === JSON.stringify(cc.token_ids), "token ids equal the completion's");
  check(JSON.stringify(r.prompt_token_ids) === JSON.stringify(cc.prompt_token_ids), "the prompt is chatml's rendering");
  check(ch.finish_reason === cc.finish_reason, "finish reason " + ch.finish_reason);
  check(r.usage.completion_tokens === c.usage.completion_tokens && r.usage.prompt_tokens === c.usage.prompt_tokens, "usage");
  const lc = ch.logprobs.content;
  check(lc.length === cc.logprobs.tokens.length, `logprobs of ${lc.length} tokens vs ${cc.logprobs.tokens.length}`);
  for (let i = 0; i < lc.length; i++) {
    check(lc[i].token === cc.logprobs.tokens[i] && Math.abs(lc[i].logprob - cc.logprobs.token_logprobs[i]) < 1e-12,
      `token ${i}: ${lc[i].token} ${lc[i].logprob}`);
    check(lc[i].top_logprobs.length === 2 && lc[i].top_logprobs[0].logprob >= lc[i].top_logprobs[1].logprob,
      `token ${i}: two top logprobs, best first`);
    check(JSON.stringify(lc[i].bytes) === JSON.stringify([...Buffer.from(lc[i].token)]), `token ${i}: bytes`);
  }
  // streaming: the same content, a finish reason, and the usage chunk
  const stream = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 10,
    temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const k of stream) {
    chunks++;
    check(k.object === "chat.completion.chunk", "chunk object " + k.object);
    for (const x of k.choices) {
      text += x.delta?.content ?? "";
      finish = x.finish_reason ?? finish;
    }
    usage = k.usage ?? usage;
  }
  check(text === ch.message.content, `streamed ${JSON.stringify(text)}`);
  check(finish === ch.finish_reason && usage && usage.completion_tokens === r.usage.completion_tokens,
    `stream finish ${finish}, usage ${JSON.stringify(usage)}`);
  check(chunks >= 3, "chunks " + chunks);
  // n 2, a seed and a stop string: each choice's deltas add up to its message; the content comes
  // in several deltas (one per token here), not in one piece at the end
  const req2 = { model: "arith-base", messages: [{ role: "user", content: "47*3+512=" }], max_tokens: 30,
    temperature: 1, n: 2, seed: 7, stop: ["51"] };
  const whole = await client.chat.completions.create(req2);
  const parts = [[], []];
  const finishes = [null, null];
  for await (const k of await client.chat.completions.create({ ...req2, stream: true })) {
    for (const x of k.choices) {
      if (x.delta?.content) parts[x.index].push(x.delta.content);
      finishes[x.index] = x.finish_reason ?? finishes[x.index];
    }
  }
  for (const i of [0, 1]) {
    check(parts[i].join("") === whole.choices[i].message.content && finishes[i] === whole.choices[i].finish_reason,
      `choice ${i} streamed ${JSON.stringify(parts[i].join(""))} (${finishes[i]}), the message is ${JSON.stringify(whole.choices[i].message.content)}`);
    check(parts[i].length >= 3, `choice ${i}: ${parts[i].length} deltas`);
  }
  // the first delta arrives while the generation runs: the client that leaves on it stops the
  // generation (64 choices x 100 tokens, ignore_eos, and their logprobs: about a second here)
  const long = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 100,
    n: 64, temperature: 1, ignore_eos: true, logprobs: true, top_logprobs: 5, stream: true });
  let firstAt = null;
  const t0 = Date.now();
  for await (const k of long) {
    if (k.choices.some((x) => x.delta?.content)) {
      firstAt = Date.now() - t0;
      break; // the client closes the connection
    }
  }
  check(firstAt !== null, "a content delta");
  await new Promise((r) => setTimeout(r, 1500));
  check(/a client left; its completion stopped after [0-9.]+ s \(cancelled/.test(serverLog),
    "the server's log does not say the stream's generation stopped when its client left:\n" + serverLog);
  const after = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 4 });
  check(after.choices.length === 1, "a completion after the client left");
  // ignore_eos: max_tokens tokens, finish "length"
  const ie = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 40,
    temperature: 0, ignore_eos: true, return_token_ids: true });
  check(ie.choices[0].finish_reason === "length" && ie.choices[0].token_ids.length === 40 &&
    ie.usage.completion_tokens === 40, `ignore_eos: ${ie.choices[0].finish_reason}, ${ie.usage.completion_tokens} tokens`);
  // n and a seed: repeatable choices
  const a = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 6, n: 2, seed: 5 });
  const b = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 6, n: 2, seed: 5 });
  check(a.choices.length === 2 && JSON.stringify(a.choices) === JSON.stringify(b.choices), "n 2 with a seed repeats");
  // tools with tool_choice auto: a text without a call is content, no tool_calls
  const t = await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 6,
    temperature: 0, tools: [{ type: "function", function: { name: "calc", parameters: { type: "object" } } }],
    tool_choice: "auto" });
  check(t.choices[0].message.tool_calls === undefined && typeof t.choices[0].message.content === "string",
    "no tool_calls in a text without one");
  check(t.choices[0].finish_reason !== "tool_calls", "finish reason without a call");
  // refusals, each a 400 naming the field
  const refusals = [
    [{ frobnicate: 1 }, "frobnicate"],
    [{ tool_choice: "required" }, "tool_choice"],
    [{ top_logprobs: 2 }, "top_logprobs"],
    [{ chat_template_kwargs: { enable_thinking: false } }, "chat_template_kwargs"],
  ];
  for (const [extra, param] of refusals) {
    try {
      await client.chat.completions.create({ model: "arith-base", messages, max_tokens: 2, ...extra });
      check(false, `${param}: no error`);
    } catch (e) {
      check(e.status === 400 && e.param === param, `${param}: status ${e.status}, param ${e.param}: ${e.message}`);
    }
  }
} catch (e) {
  check(false, "unexpected: " + (e.stack || e));
} finally {
  server.kill("SIGTERM");
}
console.log(`chat_check: ${checks} checks, ${failed} failed`);
process.exit(failed ? 1 : 0);
