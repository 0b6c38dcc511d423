// Plays a plan of MCP tool calls against sqlenv's MCP server with the official TypeScript SDK
// (@modelcontextprotocol/sdk), over stdio or streamable HTTP, and prints what came back as JSON.
//
//   node play.mjs PLAN.json
//
// PLAN: {"command": [program, ...args]} (stdio: the client starts the server) or {"url": ...}
// (streamable HTTP), and "calls": [{"tool": name, "arguments": {...}}, ...].
// Output: {"tools": [{name, inputSchema}], "results": [{isError, text, structured}]}. The SDK
// checks each structured result against the tool's output schema, as any client of it does.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const transport = plan.url
  ? new StreamableHTTPClientTransport(new URL(plan.url))
  : new StdioClientTransport({
      command: plan.command[0],
      args: plan.command.slice(1),
      env: process.env,
      stderr: "ignore",
    });
const client = new Client({ name: "sqlenv-typescript-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((tool) => ({
  name: tool.name,
  inputSchema: tool.inputSchema,
}));
const results = [];
for (const call of plan.calls) {
  try {
    const result = await client.callTool({ name: call.tool, arguments: call.arguments });
    results.push({
      isError: Boolean(result.isError),
      text: result.content?.[0]?.text ?? null,
      structured: result.structuredContent ?? null,
    });
  } catch (error) {
    results.push({ isError: true, text: String(error), structured: null, thrown: true });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ tools, results }) + "\n");
