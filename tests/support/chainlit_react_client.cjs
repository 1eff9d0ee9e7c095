// Chainlit's own client state logic (@chainlit/react-client, installed from npm by the test)
// against a live Tether: the socket is opened with the auth its useChatSession sends, every
// event it handles is applied with the package's own message functions (addMessage,
// updateMessageById, updateMessageContentById, deleteMessageById) the way useChatSession
// applies them, and a message is sent the way useChatInteract's sendMessage sends it (drawn
// first under the id it chose, then emitted without an ack). Prints what the client holds.
//
// Environment: TETHER_URL, TETHER_COOKIE, TEXT (the message), CLIENT_DIR (the npm install).

const { randomUUID } = require("node:crypto");

const fromClient = (name) => require(require.resolve(name, { paths: [process.env.CLIENT_DIR] }));
const rc = fromClient("@chainlit/react-client");
const { io } = fromClient("socket.io-client");

let messages = [];
const seen = { toasts: [], errors: [], favorites: [], beforeUpdate: {} };

const socket = io(process.env.TETHER_URL, {
  path: "/ws/socket.io",
  transports: ["websocket"],
  reconnection: false,
  extraHeaders: { Cookie: process.env.TETHER_COOKIE },
  auth: { clientType: "webapp", sessionId: randomUUID(), threadId: "", userEnv: "{}", chatProfile: "" },
});

socket.on("new_message", (m) => (messages = rc.addMessage(messages, m)));
socket.on("stream_start", (m) => (messages = rc.addMessage(messages, m)));
socket.on("update_message", (m) => {
  const before = messages.find((held) => held.id === m.id);
  if (before) seen.beforeUpdate[m.id] = { ...before };
  messages = rc.updateMessageById(messages, m.id, m);
});
socket.on("delete_message", (m) => (messages = rc.deleteMessageById(messages, m.id)));
socket.on("stream_token", ({ id, token, isSequence, isInput }) => {
  messages = rc.updateMessageContentById(messages, id, token, isSequence, isInput);
});
socket.on("toast", (t) => seen.toasts.push(t));
socket.on("error", (e) => seen.errors.push(e));
socket.on("set_favorites", (steps) => seen.favorites.push(steps));

const finish = (code) => {
  process.stdout.write(JSON.stringify({ messages, ...seen }));
  socket.close();
  process.exit(code);
};
setTimeout(() => finish(2), 60_000);

let sent = null;
let startedAfterSend = false;
const send = () => {
  sent = { id: randomUUID(), createdAt: new Date().toISOString(), name: "User", type: "user_message" };
  sent.output = process.env.TEXT;
  seen.sentId = sent.id;
  messages = rc.addMessage(messages, sent);
  socket.emit("client_message", { message: sent, fileReferences: [] });
};
socket.on("task_start", () => {
  if (sent) startedAfterSend = true;
});
socket.on("task_end", () => {
  if (!sent) send(); // the connection's task_end: the chat is there, send as a user would
  else if (startedAfterSend) setTimeout(() => finish(0), 500); // the turn ended; late events land
});
socket.on("connect_error", (e) => {
  seen.errors.push({ message: String(e?.message ?? e) });
  finish(3);
});
socket.on("connect", () => {
  socket.emit("connection_successful");
  socket.emit("fetch_favorites");
});
