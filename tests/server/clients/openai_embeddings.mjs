// Calls client.embeddings.create with the official `openai` npm package (as LangChain.js's
// OpenAIEmbeddings does) and its defaults: the SDK asks for base64 and decodes the vectors itself.
//
//     node openai_embeddings.mjs < calls.json
//
// stdin: a JSON list of calls, {"baseURL": ..., "params": {...}} each; stdout: a JSON list with, per
// call, the body the SDK sent and either its decoded answer or the error it raised (class, status).
import OpenAI from "openai";

const calls = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.setEncoding("utf8").on("data", (chunk) => (text += chunk)).on("end", () => resolve(text));
}));

const results = [];
for (const { baseURL, params } of calls) {
  const sent = [];
  const client = new OpenAI({
    baseURL,
    apiKey: "unused",
    // the runtime's own fetch, only noting the body the SDK built (its encoding_format)
    fetch: (url, init) => (sent.push(JSON.parse(init.body)), fetch(url, init)),
  });
  try {
    const answer = await client.embeddings.create(params);
    results.push({ sent, answer });
  } catch (error) {
    if (!(error instanceof OpenAI.APIError)) throw error;
    results.push({ sent, error: { class: error.constructor.name, status: error.status, body: error.error } });
  }
}
console.log(JSON.stringify(results));
