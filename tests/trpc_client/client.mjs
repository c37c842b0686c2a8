// Drives a live `threadline serve` with the real @trpc/client v11 (httpLink and
// httpBatchLink, no transformer, untyped) and prints one JSON line per step: what
// came back, or the TRPCClientError's message, shape code and data. The Python test
// (tests/test_trpc_client.py) starts the server and checks every step.
//
//   node client.mjs <base url> <token> <locked session id>
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from "@trpc/client";

const [base, token, lockedSession] = process.argv.slice(2);
const url = `${base}/trpc`;
const headers = (value) => () => ({ authorization: `Bearer ${value}` });
const client = createTRPCClient({ links: [httpLink({ url, headers: headers(token) })] });
const stranger = createTRPCClient({ links: [httpLink({ url, headers: headers("not-the-token-0000") })] });
const batched = createTRPCClient({ links: [httpBatchLink({ url, headers: headers(token) })] });

function report(step, outcome) {
  process.stdout.write(JSON.stringify({ step, ...outcome }) + "\n");
}

function failure(err) {
  if (!(err instanceof TRPCClientError)) {
    return { threw: String(err) };
  }
  return {
    error: {
      message: err.message,
      code: err.shape?.code ?? null,
      data: err.data ?? null,
    },
  };
}

async function step(name, call) {
  try {
    report(name, { data: await call() });
  } catch (err) {
    report(name, failure(err));
  }
}

const created = await client.session.create.mutate({ workerId: "node-1", workspaceId: "ws-node", title: "from node" });
report("session.create", { data: created });
const sid = created.sessionId;
await step("session.list", () => client.session.list.query({ workspaceId: "ws-node" }));
await step("session.get", () => client.session.get.query({ sessionId: sid }));
await step("session.rename", () => client.session.rename.mutate({ sessionId: sid, title: "renamed" }));
await step("agent.prompt", () => client.agent.prompt.mutate({ sessionId: sid, text: "hello from node" }));
await step("agent.cancel", () => client.agent.cancel.mutate({ sessionId: sid }));
await step("session.list.noInput", () => client.session.list.query());

// the error steps
await step("unauthorized", () => stranger.session.list.query({}));
await step("badRequest", () => client.session.create.mutate({ workerId: "../x", workspaceId: "ws" }));
await step("notFound", () => client.session.get.query({ sessionId: "no-such-session" }));
await step("conflict", () => client.agent.prompt.mutate({ sessionId: lockedSession, text: "hi" }));
await step("methodNotSupported", () => client.session.list.mutate({}));
await step("noSuchProcedure", () => client.session.nope.query({}));

// a batch: two queries in one request, one answered and one refused
const [listed, missing] = await Promise.allSettled([
  batched.session.list.query({ workspaceId: "ws-node" }),
  batched.session.get.query({ sessionId: "no-such-session" }),
]);
report("batch.list", listed.status === "fulfilled" ? { data: listed.value } : failure(listed.reason));
report("batch.get", missing.status === "fulfilled" ? { data: missing.value } : failure(missing.reason));

// delete last: a turn may still run on this session; wait until it lets go
for (let i = 0; ; i++) {
  try {
    report("session.delete", { data: await client.session.delete.mutate({ sessionId: sid }) });
    break;
  } catch (err) {
    if (!(err instanceof TRPCClientError) || err.data?.code !== "CONFLICT" || i > 200) {
      report("session.delete", failure(err));
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
await step("deleted.get", () => client.session.get.query({ sessionId: sid }));
