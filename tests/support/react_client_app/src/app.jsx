// A react-client app as a Chainlit user writes one (Chainlit's cookbook "custom-frontend"):
// ChainlitAPI pointed at the server, its hooks for the session, the messages and the sends,
// the socket left on its default transports. Only the server URL names Tether: it comes from
// the page's ?server= (Tether's CHAINLIT_PATH_PREFIX, e.g. http://127.0.0.1:8000/chainlit).
//
// For the tests (tests/e2e/test_react_client_app.py) it shows every message as <li data-type
// data-id>, in the tree's order: Chainlit sends a turn's replies inside the run step its
// on_message runs in (their parentId), so an app lists a message's steps after it, the socket's state on #status, and keeps what the socket saw in
// window.__events and window.__transports, so a failure can print it.
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { RecoilRoot } from "recoil";
import {
  ChainlitAPI,
  ChainlitContext,
  useChatData,
  useChatInteract,
  useChatMessages,
  useChatSession,
} from "@chainlit/react-client";

const server = new URLSearchParams(window.location.search).get("server");
const api = new ChainlitAPI(server, "webapp");
// The thread to resume after a reload, as an app keeps it (Chainlit's frontend keeps it in its URL).
const THREAD_KEY = "react-client-app-thread";

window.__events = [];
window.__transports = [];

function SignIn({ onSignedIn }) {
  const [error, setError] = useState("");
  const submit = async (event) => {
    event.preventDefault();
    try {
      await api.passwordAuth(new FormData(event.target));
      onSignedIn();
    } catch (e) {
      setError(String(e));
    }
  };
  return (
    <form id="sign-in" onSubmit={submit}>
      <input id="username" name="username" />
      <input id="password" name="password" type="password" />
      <button id="sign-in-button" type="submit">Sign in</button>
      <p id="sign-in-error">{error}</p>
    </form>
  );
}

function watch(socket) {
  const record = (direction) => (name, ...args) =>
    window.__events.push(`${direction} ${name} ${JSON.stringify(args).slice(0, 400)}`);
  const incoming = record("<");
  const outgoing = record(">");
  socket.onAny(incoming);
  socket.onAnyOutgoing(outgoing);
  const engineOpened = () => {
    const engine = socket.io.engine;
    const note = (what) => window.__events.push(`~ ${new Date().toISOString()} engine ${what}`);
    window.__transports.push(engine.transport.name);
    note(`open ${engine.transport.name} sid=${engine.id}`);
    engine.on("upgrading", (transport) => note(`upgrading ${transport.name}`));
    engine.on("upgrade", (transport) => {
      window.__transports.push(transport.name);
      note(`upgrade ${transport.name}`);
    });
    engine.on("upgradeError", (e) => note(`upgradeError ${e?.message ?? e}`));
    engine.on("close", (reason, description) => note(`close ${reason} ${description?.message ?? ""}`));
  };
  if (socket.io.engine) engineOpened();
  else socket.io.on("open", engineOpened);
  socket.on("connect_error", (e) => window.__events.push(`! connect_error ${e?.message ?? e}`));
  return () => {
    socket.offAny(incoming);
    socket.offAnyOutgoing(outgoing);
    socket.io.off("open", engineOpened);
  };
}

// The messages of the tree in order: each step, then its own steps; runs and tool steps unlisted.
function listed(steps) {
  return steps.flatMap((m) => [...(m.type.includes("message") ? [m] : []), ...listed(m.steps || [])]);
}

function Chat() {
  const { connect, session } = useChatSession();
  const { messages, threadId } = useChatMessages();
  const { sendMessage, setIdToResume } = useChatInteract();
  const { connected, loading } = useChatData();
  const [ready, setReady] = useState(false);
  const [text, setText] = useState("");

  useEffect(() => {
    const saved = window.localStorage.getItem(THREAD_KEY);
    if (saved) setIdToResume(saved);
    setReady(true);
  }, []);
  useEffect(() => {
    if (ready) connect({ userEnv: {} });
  }, [ready]);
  useEffect(() => {
    if (threadId) window.localStorage.setItem(THREAD_KEY, threadId);
  }, [threadId]);
  useEffect(() => (session?.socket ? watch(session.socket) : undefined), [session?.socket]);

  const send = () => {
    sendMessage({ name: "User", type: "user_message", output: text }, []);
    setText("");
  };
  return (
    <main>
      <p id="status" data-connected={String(!!connected)} data-loading={String(!!loading)} data-thread={threadId || ""}>
        {connected ? "connected" : "not connected"}
      </p>
      <ul id="messages">
        {listed(messages).map((m) => (
          <li key={m.id} className="message" data-type={m.type} data-id={m.id}>
            {m.output}
          </li>
        ))}
      </ul>
      <textarea id="composer" value={text} onChange={(e) => setText(e.target.value)} />
      <button id="send" disabled={!connected || !text} onClick={send}>
        Send
      </button>
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(undefined);
  useEffect(() => {
    api.getUser().then(
      () => setSignedIn(true),
      () => setSignedIn(false),
    );
  }, []);
  if (signedIn === undefined) return <p id="checking">…</p>;
  return signedIn ? <Chat /> : <SignIn onSignedIn={() => setSignedIn(true)} />;
}

createRoot(document.getElementById("root")).render(
  <ChainlitContext.Provider value={api}>
    <RecoilRoot>
      <App />
    </RecoilRoot>
  </ChainlitContext.Provider>,
);
