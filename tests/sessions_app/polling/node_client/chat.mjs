// One chat turn with socket.io-client's default options (polling first, then the upgrade):
// node chat.mjs <base url> <cookie header> <message>. Prints one JSON line: what happened.
import { io } from "socket.io-client";

const [url, cookie, text] = process.argv.slice(2);
const result = { transports: [], events: [], replies: {}, ack: null, upgraded: false };
const socket = io(url, {
  path: "/ws/socket.io",
  reconnection: false,
  extraHeaders: { Cookie: cookie },
  auth: { sessionId: crypto.randomUUID(), clientType: "webapp" },
});
const finish = (code, error) => {
  result.error = error ? String(error) : undefined;
  console.log(JSON.stringify(result));
  socket.close();
  process.exit(code);
};
setTimeout(() => finish(1, "timed out"), 30000);
socket.io.on("open", () => {
  const engine = socket.io.engine;
  result.transports.push(engine.transport.name);
  engine.on("upgrade", (transport) => {
    result.transports.push(transport.name);
    result.upgraded = true;
  });
});
socket.on("connect_error", (error) => finish(1, error.message));
socket.onAny((name, data) => {
  result.events.push(name);
  if ((name === "new_message" || name === "update_message") && data.type === "assistant_message") {
    result.replies[data.id] = data.output; // its last version
  }
});
socket.on("connect", async () => {
  socket.emit("connection_successful");
  const ack = await socket.timeout(15000).emitWithAck("client_message", {
    message: { id: crypto.randomUUID(), output: text },
  });
  result.ack = ack;
});
const done = setInterval(() => {
  if (result.ack && result.upgraded && result.events.at(-1) === "task_end" && Object.values(result.replies).some((r) => r.endsWith(text))) {
    clearInterval(done);
    finish(0);
  }
}, 50);
