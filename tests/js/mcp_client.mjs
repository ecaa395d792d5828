// The TypeScript MCP SDK against Belvedir's /mcp (tests/test_mcp.py): list the tools, call two, print what came back.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, jobId] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
const client = new Client({ name: "belvedir-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const text = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name}: ${result.content[0].text}`);
  return JSON.parse(result.content[0].text);
};
const whoami = await text("whoami", {});
const job = await text("get_job", { job_id: Number(jobId) });
await client.close();
console.log(JSON.stringify({ tools: tools.length, whoami, job }));
