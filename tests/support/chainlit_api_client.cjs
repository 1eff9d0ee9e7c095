// Chainlit's own HTTP client (ChainlitAPI of @chainlit/react-client, installed from npm by the
// test) against a live Tether, the way Chainlit's frontend uses it: sign in with the login
// form, read the user, the sticky-cookie call, a socket opened where the frontend opens it
// (under the API's path, default transports), a click, the thread list, rename, feedback,
// delete, logout. Node's fetch keeps no cookies, so this wraps it with the cookie jar and the
// Origin a browser would send. Prints what each call answered.
//
// Environment: TETHER_URL, PREFIX (CHAINLIT_PATH_PREFIX), USERNAME, PASSWORD, CLIENT_DIR.

const { randomUUID } = require("node:crypto");

const fromClient = (name) => require(require.resolve(name, { paths: [process.env.CLIENT_DIR] }));
const { ChainlitAPI } = fromClient("@chainlit/react-client");
const { io } = fromClient("socket.io-client");

const origin = process.env.TETHER_URL;
const jar = new Map();
const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
const nodeFetch = globalThis.fetch;
globalThis.fetch = async (url, options = {}) => {
  const headers = new Headers(options.headers || {});
  headers.set("Origin", origin);
  if (jar.size) headers.set("Cookie", cookieHeader());
  const response = await nodeFetch(url, { ...options, headers });
  for (const line of response.headers.getSetCookie()) {
    const [pair, ...attributes] = line.split(";");
    const [name, ...value] = pair.split("=");
    const expired = attributes.some((a) => /max-age=0/i.test(a.trim()));
    if (expired) jar.delete(name.trim());
    else jar.set(name.trim(), value.join("=").trim());
  }
  return response;
};

const api = new ChainlitAPI(`${origin}${process.env.PREFIX}`, "webapp");
const out = { texts: [], errors: [] };
const finish = (code) => {
  process.stdout.write(JSON.stringify(out));
  process.exit(code);
};
setTimeout(() => {
  out.errors.push("timed out");
  finish(2);
}, 60_000);
const status = async (call) => {
  try {
    await call();
    return 200;
  } catch (e) {
    return e.status ?? String(e);
  }
};

const waitFor = (predicate) =>
  new Promise((resolve) => {
    const check = setInterval(() => {
      const found = predicate();
      if (found) {
        clearInterval(check);
        resolve(found);
      }
    }, 50);
  });

(async () => {
  out.userBefore = await status(() => api.getUser());
  const form = new FormData();
  form.append("username", process.env.USERNAME);
  form.append("password", process.env.PASSWORD);
  out.login = await api.passwordAuth(form);
  out.user = await api.getUser();
  const sessionId = randomUUID();
  out.sticky = await api.stickyCookie(sessionId);

  // Where the frontend opens its socket: <the API's path>/ws/socket.io, its default transports.
  const { protocol, host, pathname } = new URL(api.httpEndpoint);
  const socket = io(`${protocol}//${host}`, {
    path: `${pathname}/ws/socket.io`,
    reconnection: false,
    extraHeaders: { Cookie: cookieHeader(), Origin: origin },
    auth: { clientType: "webapp", sessionId, threadId: "", userEnv: "{}", chatProfile: "" },
  });
  const messages = [];
  socket.on("new_message", (m) => {
    messages.push(m);
    out.texts.push(m.output);
  });
  socket.on("connect_error", (e) => {
    out.errors.push(String(e?.message ?? e));
    finish(3);
  });
  socket.on("connect", () => socket.emit("connection_successful"));
  await waitFor(() => socket.connected);
  const sent = { id: randomUUID(), createdAt: new Date().toISOString(), name: "User", type: "user_message", output: "buttons" };
  socket.emit("client_message", { message: sent, fileReferences: [] });
  const picker = await waitFor(() => messages.find((m) => m.output === "Pick a colour"));
  out.transport = socket.io.engine.transport.name;
  out.action = await api.callAction(picker.actions?.[0] ?? picker.metadata.actions[0], sessionId);
  const answer = await waitFor(() => messages.find((m) => m.output === "Colour: red"));

  out.threads = await api.listThreads({ first: 20 }, {});
  const threadId = out.threads.data[0]?.id;
  out.renamed = await api.renameThread(threadId, "colours");
  out.threadsAfterRename = await api.listThreads({ first: 20 }, { search: "colours" });
  out.feedback = await api.setFeedback({ forId: answer.id, value: 1, comment: "nice" }, sessionId);
  out.feedbackDeleted = await api.deleteFeedback(out.feedback.feedbackId);
  socket.close();
  out.deleted = await api.deleteThread(threadId);
  out.threadsAfterDelete = await api.listThreads({ first: 20 }, {});
  out.logout = await api.logout();
  out.userAfter = await status(() => api.getUser());
  finish(0);
})().catch((e) => {
  out.errors.push(String(e?.stack ?? e));
  finish(1);
});
