// The chat page: one Socket.IO connection, the transcript, pending sends, the composer.
//
// Where a thread's lines come from:
//   - the bootstrap read when a thread page opens (entries, pending and failed sends);
//   - resume_thread, when the server resumes the thread into a new session;
//   - live events: new_message, update_message, delete_message, stream_start/stream_token;
//   - after a reconnect, the history read after the last seq shown (what was missed);
//   - older pages (history before the first seq shown) as the user scrolls up (older.js):
//     a thread opens with its newest PAGE_STEPS steps.
// All of them go through Transcript.upsert (keyed by step id), so nothing shows twice, and
// pending sends are merged, retired and labelled in one place, reconcile.js.

import { io } from "./vendor/socket.io.esm.min.js";
import * as api from "./api.js";
import { Asks } from "./asks.js";
import { FeedbackControls } from "./feedback.js";
import { gettext, interpolate } from "./i18n.js";
import { reconcilePending } from "./reconcile.js";
import { el, fillStep, icon, pendingElement, stepElement } from "./render.js";
import { ChatSettingsPanel } from "./settings.js";
import { Sidebar } from "./sidebar.js";
import { ElementViews } from "./elements.js";
import { MessageEditor } from "./edit.js";
import { FollowView } from "./follow.js";
import { MenuButton } from "./menus.js";
import { OlderSteps } from "./older.js";
import { ChatStart } from "./starters.js";
import { containerFor, insertInOrder, isStepEntry } from "./steps.js";
import { Toasts } from "./toasts.js";
import { Transcript } from "./transcript.js";

const $ = (selector) => document.querySelector(selector);
const config = JSON.parse($("#chat-config").textContent);

const dom = {
  chat: $("#chat"),
  messages: $("#messages"),
  transcript: $("#transcript"),
  pending: $("#pending"),
  empty: $("#empty-state"),
  banner: $("#banner"),
  bannerText: $("#banner-text"),
  bannerAction: $("#banner-action"),
  toasts: $("#toasts"),
  working: $("#working"),
  form: $("#composer"),
  input: $("#message-input"),
  fileInput: $("#file-input"),
  attachments: $("#attachments"),
  stop: $("#stop"),
  title: $("#thread-title"),
  newChat: $("#new-chat"),
  sidebar: $("#sidebar"),
  sidebarToggle: $("#sidebar-toggle"),
  backdrop: $("#backdrop"),
  feedbackDialog: $("#feedback-dialog"),
  profileBar: $("#profile-bar"),
  profileButton: $("#chat-profile"),
  profileValue: $("#chat-profile-value"),
  profileMenu: $("#chat-profile-menu"),
  profileCurrent: $("#chat-profile-current"),
  profileDescription: $("#chat-profile-description"),
  starters: $("#starters"),
  jump: $("#jump-latest"),
  search: $("#thread-search"),
};

// --- session ids: one per tab and thread ----------------------------------------------------

const SESSION_PREFIX = "tether.session.";

function uuid4() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function storage(action, key, value) {
  try {
    if (action === "get") return sessionStorage.getItem(key);
    if (action === "set") sessionStorage.setItem(key, value);
    if (action === "remove") sessionStorage.removeItem(key);
  } catch {
    // Storage disabled: every load is a new session, which still works.
  }
  return null;
}

// The profile a new chat asks for: the one last chosen in this tab. A thread's is its own.
const PROFILE_KEY = "tether.chat-profile";

/** A reload of a thread page restores its session; a new chat always starts a fresh one. */
function sessionFor(threadId) {
  if (!threadId) return uuid4();
  const id = storage("get", SESSION_PREFIX + threadId) || uuid4();
  storage("set", SESSION_PREFIX + threadId, id);
  return id;
}

// --- state ------------------------------------------------------------------------------

const state = {
  threadId: config.threadId,
  sessionId: sessionFor(config.threadId),
  chatProfile: config.threadId ? config.chatProfile : storage("get", PROFILE_KEY) || "",
  transcript: new Transcript(),
  pending: [], // sends not transcribed yet: {id, text, state, reason?, error?, attempt?, files?}
  outbox: new Map(), // message id -> {payload, inflight}: client_message not acknowledged yet
  running: false,
  loaded: !config.threadId, // the thread's history has been read
  files: [], // photos attached to the next message
};
const elements = new Map(); // step id -> its <li>
const feedback = new FeedbackControls(dom.feedbackDialog, {
  threadId: () => state.threadId,
  onError: (text) => notify(text),
});

const chatSettings = new ChatSettingsPanel(dom.input, {
  save: (values) =>
    new Promise((resolve, reject) => {
      if (!socket.connected) reject(new Error("not connected"));
      else socket.timeout(10000).emit("chat_settings_change", values, (err, answer) => (err ? reject(err) : resolve(answer)));
    }),
});

let asks = null; // action buttons and the app's questions (asks.js), made with the socket

const attached = new ElementViews({ nodeFor: (id) => elements.get(id) });

// "Edit" on the user's messages, for apps that answer an edit (the page's config says).
const editor = new MessageEditor({
  enabled: Boolean(config.canEdit),
  busy: () => state.running,
  save: (id, text) =>
    new Promise((resolve, reject) => {
      if (!socket.connected) reject(new Error(gettext("not connected")));
      else socket.timeout(10000).emit("edit_message", { message: { id, output: text } }, (err, answer) => (err ? reject(err) : resolve(answer)));
    }),
  onError: (text) => notify(text),
  onSaved: () => dom.input.focus(),
});

// A thread opens with its newest this many steps; older ones are read as the user scrolls up.
const PAGE_STEPS = 50;
const older = new OlderSteps(dom.messages, dom.transcript, {
  load: (beforeSeq) => api.historyBefore(state.threadId, beforeSeq, PAGE_STEPS),
  show: (page) => {
    attached.add(page.elements);
    applySteps(page.results, { read: true });
  },
  onError: (error) =>
    notify(interpolate(gettext("Could not load earlier messages: %(error)s"), { error: error.message })),
});
// What the server lets users upload (chatproject.views): photos only unless configured.
const uploads = config.uploads ?? { accept: ["image/png", "image/jpeg", "image/gif", "image/webp"] };

/** Draw a step into its element, with its feedback bar, buttons and elements when it takes them. */
/** An assistant message before the thread's first user message (a greeting) answers
 * nothing: it gets no thumbs or Copy (render.js `answersSomething`). Known only while the
 * page shows the thread from its start. */
function markOpening(step) {
  if (step.type !== "assistant_message" || older.before != null) return;
  const entries = state.transcript.entries;
  const at = state.transcript.indexOf(step.id);
  step.opening = !entries.slice(0, at === -1 ? entries.length : at).some((e) => e.type === "user_message");
}

function draw(node, step) {
  markOpening(step);
  fillStep(node, step);
  feedback.decorate(node, step);
  asks?.decorate(node, step);
  attached.decorate(node, step);
  editor.decorate(node, step);
}

// --- the transcript on screen -------------------------------------------------------------

// The list stays at its end while the user is there, whatever grows (follow.js).
const view = new FollowView(dom.messages, [dom.transcript, dom.pending], dom.jump, {
  onJump: () => dom.input.focus(),
});

function scrollToBottom() {
  view.toEnd();
}

/** Put a step's element where the transcript says it belongs. */
function place(step) {
  let node = elements.get(step.id);
  if (node) draw(node, step);
  else {
    markOpening(step);
    node = stepElement(step);
    feedback.decorate(node, step);
    asks?.decorate(node, step);
    attached.decorate(node, step);
    editor.decorate(node, step);
    elements.set(step.id, node);
  }
  // A step nested in a step on the page goes into that step's children (steps.js).
  insertInOrder(containerFor(step, elements) ?? dom.transcript, node, state.transcript.entries, step, elements);
}

/** Show steps. `read`: they come from a transcript read (bootstrap, history, resume_thread),
 * which carries the user's feedback on each (absent: none); live events do not say. */
function applySteps(steps, { read = false } = {}) {
  for (const incoming of steps) {
    if (!incoming?.id) continue;
    if (incoming.threadId && state.threadId && incoming.threadId !== state.threadId) continue;
    const { step, changed } = state.transcript.upsert(incoming);
    if (changed) {
      dirty.delete(step.id);
      place(step);
    }
    if (read) feedback.learn(incoming);
  }
  reconcile();
  view.follow();
}

function removeStep(step) {
  const id = step?.id ? state.transcript.idOf(step) : null;
  if (!id || !state.transcript.remove(id)) return;
  elements.get(id)?.remove();
  elements.delete(id);
  feedback.forget(id);
  updateView();
}

// Stream tokens are drawn once per frame, however fast they come.
const dirty = new Set();
let frame = 0;

function onToken(token) {
  if (!token?.id) return;
  const known = elements.has(String(token.id));
  const step = state.transcript.appendToken(token);
  if (!step) return;
  if (!known) {
    place(step);
    updateView();
    return;
  }
  dirty.add(step.id);
  if (!frame) frame = requestAnimationFrame(drawDirty);
}

function drawDirty() {
  frame = 0;
  for (const id of dirty) {
    const step = state.transcript.get(id);
    const node = elements.get(id);
    if (step && node) draw(node, step);
  }
  dirty.clear();
  view.follow();
}

/** A turn ended: a reply still streaming was cut off (stopped, or its engine died) and no
 * final version will come. It keeps the text it got, without the cursor. */
function finishStreams() {
  for (const step of state.transcript.entries.filter((e) => e.streaming || (isStepEntry(e) && e.end == null))) {
    step.streaming = false;
    step.interrupted = true;
    const node = elements.get(step.id);
    if (node) draw(node, step);
  }
}

/** Retire pending sends the transcript now carries (the one comparison, reconcilePending). */
function reconcile() {
  const before = state.pending;
  state.pending = reconcilePending(state.pending, state.transcript.entries);
  const still = new Set(state.pending.map((p) => p.id));
  for (const gone of before.filter((p) => !still.has(p.id))) {
    state.outbox.delete(gone.id);
    for (const f of gone.files ?? []) if (f.url) URL.revokeObjectURL(f.url);
  }
  renderPending();
}

function addPending(items) {
  state.pending = [...state.pending, ...items.map(queuedIfBehind)];
  reconcile();
}

/** A send read back from the server (a reload's bootstrap) learned no ack saying it waits:
 * while a reply runs it waits behind it, as its ack said before the reload ("Queued"). */
function queuedIfBehind(item) {
  return state.running && item.readBack && item.state === "pending" ? { ...item, state: "queued" } : item;
}

/** A new status of a send this page shows (nothing for one it does not): one more copy of
 * it, which reconcilePending merges with what the page knew. */
function setPending(id, changes) {
  if (!state.pending.some((p) => p.id === id)) return;
  addPending([{ ...changes, id }]);
}

/** Pending copies of bootstrap's `pending` and `failed` sends, oldest first. */
function openSends({ pending = [], failed = [] }) {
  const items = [
    ...pending.map((p) => ({ ...p, state: "pending", readBack: true })),
    ...failed.map(({ messageId, reason, ...rest }) => ({
      ...rest,
      id: messageId,
      state: "failed",
      reason: reason ?? "",
    })),
  ];
  return items.sort((a, b) => String(a.acceptedAt ?? "").localeCompare(String(b.acceptedAt ?? "")));
}

function renderPending() {
  dom.pending.replaceChildren(...state.pending.map((item) => pendingElement(item, { onRetry: retry })));
  updateView();
}

function updateView() {
  const empty = state.loaded && state.transcript.size === 0 && state.pending.length === 0;
  dom.empty.hidden = !empty;
  dom.messages.classList.toggle("is-empty", empty);
  // The first screen (nothing sent yet): the greeting, the starters and the composer, centred.
  const start = !state.threadId && state.pending.length === 0 && !state.transcript.entries.some((e) => e.type === "user_message");
  dom.chat.classList.toggle("is-start", start);
}

function setRunning(running) {
  state.running = running;
  const behind = state.pending.filter((p) => queuedIfBehind(p) !== p);
  if (behind.length) addPending(behind.map((p) => ({ id: p.id, state: "queued" })));
  dom.working.hidden = !running;
  dom.stop.hidden = !running;
  editor.setBusy(running);
  document.body.dataset.running = String(running);
}

function setTitle(name) {
  const title = name || gettext("New chat");
  dom.title.textContent = title;
  document.title = `${title} · Tether`;
}

const toasts = new Toasts(dom.toasts, icon);
function notify(text) {
  toasts.show(text);
}

// --- the thread this page shows ---------------------------------------------------------------

/** The page's chat now has a thread (its first message created it): show it at its URL. */
function adoptThread(id) {
  if (!id || state.threadId === id) return;
  state.threadId = id;
  feedback.redrawAll(); // the replies on screen can be rated now
  chatStart.lock();
  storage("set", SESSION_PREFIX + id, state.sessionId);
  history.replaceState(null, "", `/thread/${encodeURIComponent(id)}/`);
  sidebar.setCurrent(id);
  sidebar.load().then((threads) => {
    const thread = threads?.find((t) => t.id === id);
    if (thread && state.threadId === id) setTitle(thread.name);
  });
}

async function loadThread() {
  try {
    const data = await api.bootstrap(state.threadId, { limit: PAGE_STEPS });
    setTitle(data.thread.name);
    addPending(openSends(data));
    attached.add(data.elements);
    applySteps(data.entries, { read: true });
    older.setCursor(data.omittedBeforeSeq);
    for (const ask of data.asks ?? []) asks.show(ask); // a question still waiting for the user
  } catch (error) {
    notify(
      error.status === 404
        ? gettext("This chat no longer exists.")
        : interpolate(gettext("Could not load the chat: %(error)s"), { error: error.message }),
    );
  }
  state.loaded = true;
  updateView();
  scrollToBottom();
  older.fill();
}

/** A send failed that this page does not show (made in another tab, its event missed):
 * read the thread's pending and failed sends again (bootstrap with one entry). */
async function refreshOpenSends() {
  if (!state.threadId) return;
  try {
    const data = await api.bootstrap(state.threadId, { limit: 1 });
    addPending(openSends(data));
    applySteps(data.entries, { read: true });
  } catch (error) {
    notify(interpolate(gettext("Could not read the chat's unsent messages: %(error)s"), { error: error.message }));
  }
}

/** After a reconnect: read what the transcript gained while the socket was down. */
async function catchUp() {
  if (!state.threadId || !state.loaded) return;
  try {
    const found = [];
    applySteps(await api.historyAfter(state.threadId, state.transcript.maxSeq(), found), { read: true });
    attached.add(found);
  } catch (error) {
    notify(interpolate(gettext("Could not catch up with the chat: %(error)s"), { error: error.message }));
  }
}

// --- the socket -----------------------------------------------------------------------------

// Event offsets (the server's replay): every session event carries its offset as a last
// argument. socket.io-client keeps the last one and, reconnecting, asks for what came after it
// (`socket.recovered` says whether the server still had all of it). A reload loses that, so
// the offset just before the turn in progress is kept in the tab's storage: the reloaded page
// asks for the turn again and shows its reply from the first token.
const OFFSET_PREFIX = "tether.turn-offset.";
let replayTurnOnConnect = true;

function authPayload() {
  const auth = { sessionId: state.sessionId, threadId: state.threadId ?? "", clientType: "webapp", offsets: true };
  // A resume carries the newest PAGE_STEPS steps and where they start (older.js reads the rest).
  if (state.threadId) auth.resumeSteps = PAGE_STEPS;
  if (state.chatProfile) auth.chatProfile = encodeURIComponent(state.chatProfile);
  const turnStart = storage("get", OFFSET_PREFIX + state.sessionId);
  if (replayTurnOnConnect && turnStart) auth.offset = turnStart;
  replayTurnOnConnect = false;
  return auth;
}

const socket = io({
  path: "/ws/socket.io",
  transports: ["websocket"],
  // Called on every (re)connect: a reconnect restores the same session.
  auth: (send) => send(authPayload()),
});
let connectedBefore = false;
asks = new Asks({ socket, form: dom.form, input: dom.input, onError: (text) => notify(text) });
dom.form.before($(".toast-anchor")); // the toasts stay right above the composer, under the ask panel
let leaving = false;

socket.onAny((event, ...args) => {
  const offset = args.at(-1);
  if (typeof offset !== "string" || !/^\d+$/.test(offset)) return;
  if (event === "task_start") storage("set", OFFSET_PREFIX + state.sessionId, String(Number(offset) - 1));
  if (event === "task_end") storage("remove", OFFSET_PREFIX + state.sessionId);
});

function showBanner(text, action) {
  dom.bannerText.textContent = text;
  dom.bannerAction.hidden = !action;
  if (action) {
    dom.bannerAction.textContent = action.label;
    dom.bannerAction.onclick = action.run;
  }
  dom.banner.hidden = false;
  document.body.dataset.connection = "down";
}

function hideBanner() {
  dom.banner.hidden = true;
  document.body.dataset.connection = "up";
}

socket.on("connect", () => {
  hideBanner();
  socket.emit("connection_successful");
  // Recovered: the events missed while away were replayed; nothing to read.
  if (connectedBefore && !socket.recovered) catchUp();
  connectedBefore = true;
  flushOutbox();
});

socket.on("disconnect", (reason) => {
  for (const entry of state.outbox.values()) entry.inflight = false;
  if (leaving || reason === "io client disconnect") return;
  if (reason === "io server disconnect") {
    // The server let another connection of this session take over (a duplicated tab).
    showBanner(gettext("This chat was opened in another tab or window."), {
      label: gettext("Continue here"),
      run: () => {
        state.sessionId = uuid4();
        if (state.threadId) storage("set", SESSION_PREFIX + state.threadId, state.sessionId);
        socket.connect();
      },
    });
    return;
  }
  showBanner(gettext("Connection lost. Reconnecting…"));
});

socket.on("connect_error", (error) => {
  if (socket.active) {
    showBanner(gettext("Connection lost. Reconnecting…"));
  } else if (error.message === "authentication failed") {
    showBanner(gettext("You are signed out."), {
      label: gettext("Sign in"),
      run: () => location.assign(`/accounts/login/?next=${encodeURIComponent(location.pathname)}`),
    });
  } else {
    showBanner(interpolate(gettext("Could not connect: %(error)s"), { error: error.message }), {
      label: gettext("Retry"),
      run: () => socket.connect(),
    });
  }
});

socket.on("task_start", () => setRunning(true));
socket.on("task_end", () => {
  setRunning(false);
  finishStreams();
  // The thread this turn wrote to is now the newest: keep the sidebar's order true.
  const newest = dom.sidebar.querySelector("#thread-list .thread-item")?.dataset.threadId;
  if (state.threadId && newest !== state.threadId && !dom.sidebar.querySelector("#thread-search").value) {
    sidebar.load();
  }
});
socket.on("first_interaction", (data) => adoptThread(data?.thread_id));
socket.on("resume_thread", (thread) => {
  setTitle(thread?.name);
  attached.add(thread?.elements);
  applySteps(thread?.steps ?? [], { read: true });
  older.setCursor(thread?.omittedBeforeSeq);
  state.loaded = true;
  updateView();
  scrollToBottom();
  older.fill();
});
socket.on("resume_thread_error", (message) => {
  notify(interpolate(gettext("Couldn't resume this chat: %(error)s"), { error: message }));
  storage("remove", SESSION_PREFIX + state.threadId);
  state.threadId = null;
  history.replaceState(null, "", "/");
  sidebar.setCurrent(null);
  setTitle("");
});
socket.on("chat_settings", (inputs) => chatSettings.show(inputs));
socket.on("new_message", (step) => applySteps([step]));
socket.on("update_message", (step) => applySteps([step]));
socket.on("delete_message", removeStep);
// An editor closed (edit.js): the message is drawn again from what the transcript holds.
dom.transcript.addEventListener("tether:redraw", (event) => {
  const step = state.transcript.get(event.detail?.id);
  const node = step && elements.get(step.id);
  if (node) draw(node, step);
});
socket.on("stream_start", (step) => applySteps([{ ...step, streaming: true }]));
socket.on("stream_token", onToken);
socket.on("ask", (payload) => {
  if (payload?.msg?.id) applySteps([payload.msg]);
  asks.show(payload);
});
socket.on("clear_ask", (data) => asks.clear(data));
socket.on("remove_action", (action) => asks.removeAction(action));
socket.on("element", (element) => {
  if (element?.threadId && state.threadId && element.threadId !== state.threadId) return;
  attached.add([element]);
});
socket.on("remove_element", (data) => attached.remove(data));
socket.on("chat-user-message", (data) => {
  // A send made elsewhere (another tab, the HTTP API) for the thread on screen.
  if (!data?.messageId || (state.threadId && data.threadId !== state.threadId)) return;
  addPending([{ id: data.messageId, text: data.text, imageCount: data.imageCount, state: "pending" }]);
});
socket.on("message_failed", (data) => {
  // A send the server will not answer (a stop dropped it from the queue, a limit, an error).
  if (!data?.messageId || (state.threadId && data.threadId && data.threadId !== state.threadId)) return;
  if (!state.pending.some((p) => p.id === data.messageId)) {
    refreshOpenSends();
    return;
  }
  setPending(data.messageId, { state: "failed", reason: data.reason ?? "" });
});
socket.on("error", (data) => {
  if (data?.event === "chat_settings_change") return; // the settings panel shows it by its control
  notify(data?.message ?? gettext("Something went wrong."));
});

// --- sending ------------------------------------------------------------------------------

let sendChain = Promise.resolve(); // sends leave in the order they were made

function submit() {
  if (asks.answeringText()) {
    // The app asked a question: the text is its answer (asks.js), not a new message.
    if (!dom.input.value.trim()) return;
    asks.answerText(dom.input.value);
    dom.input.value = "";
    autosize();
    return;
  }
  const text = dom.input.value;
  const files = state.files;
  if (!text.trim() && files.length === 0) return;
  dom.input.value = "";
  state.files = [];
  renderAttachments();
  autosize();
  send(text, files);
}

/** Send a message (typed, or a starter's): shown at once as pending, then uploaded and sent. */
function send(text, files = []) {
  const item = {
    id: uuid4(),
    text,
    state: "sending",
    files: files.map((file) => ({
      name: file.name,
      url: file.type.startsWith("image/") ? URL.createObjectURL(file) : null,
      file,
    })),
  };
  chatStart.lock(); // the chat's first message fixes its profile
  addPending([item]);
  scrollToBottom();
  sendChain = sendChain.then(() => prepare(item));
}

/** Upload the photos, then hand the message to the outbox. */
async function prepare(item) {
  let fileReferences;
  if (item.files?.length) {
    try {
      const uploaded = await Promise.all(item.files.map((f) => api.uploadPhoto(f.file)));
      fileReferences = uploaded.map((u) => ({ id: u.id }));
    } catch (error) {
      const why = interpolate(gettext("the upload failed (%(error)s)"), { error: error.message });
      setPending(item.id, { state: "failed", error: why });
      return;
    }
  }
  const message = { id: item.id, output: item.text, type: "user_message", createdAt: new Date().toISOString() };
  state.outbox.set(item.id, { payload: fileReferences ? { message, fileReferences } : { message }, inflight: false });
  flushOutbox();
}

/** Emit what is not acknowledged yet. A send cut off by a drop goes again on the next
 * connection with the same id, which the server answers as the same message. */
function flushOutbox() {
  if (!socket.connected) return;
  for (const [id, entry] of state.outbox) {
    if (entry.inflight) continue;
    entry.inflight = true;
    socket.emit("client_message", entry.payload, (answer) => onAck(id, answer));
  }
}

function onAck(id, answer) {
  if (!state.outbox.delete(id) && !state.pending.some((p) => p.id === id)) return;
  if (!answer || answer.error) {
    setPending(id, { state: "failed", error: answer?.error ?? gettext("no answer") });
    return;
  }
  adoptThread(answer.threadId);
  setPending(id, { state: answer.queued ? "queued" : "pending" });
}

/** "Send again": a new attempt at a failed send, with the same message id. A send the server
 * failed (`message_failed`, bootstrap's `failed`) is revived there with `retry: true` (the
 * server still holds its text and photos); one that failed here (`error`: an upload failed,
 * the server refused it) goes again from the start. */
function retry(id) {
  const item = state.pending.find((p) => p.id === id);
  if (!item || item.state !== "failed") return;
  setPending(id, { state: "sending", attempt: (item.attempt ?? 0) + 1 });
  if (!item.error) {
    const payload = { message: { id, output: item.text ?? "" }, retry: true };
    sendChain = sendChain.then(() => {
      state.outbox.set(id, { payload, inflight: false });
      flushOutbox();
    });
  } else {
    sendChain = sendChain.then(() => prepare(item));
  }
}

function stop() {
  if (state.running && socket.connected) socket.emit("stop");
}

/** Another profile for a chat that has no message yet: its session (made with the old one)
 * ends, and a new session starts with the new one; what the old one showed goes away. */
async function switchProfile(name) {
  if (chatStart.locked || name === state.chatProfile) return;
  state.chatProfile = name;
  storage("set", PROFILE_KEY, name);
  if (socket.connected) {
    await new Promise((resolve) => socket.timeout(3000).emit("clear_session", resolve));
  }
  socket.disconnect();
  storage("remove", OFFSET_PREFIX + state.sessionId);
  state.sessionId = uuid4();
  state.transcript = new Transcript();
  chatSettings.reset();
  elements.clear();
  attached.clear();
  dom.transcript.replaceChildren();
  setRunning(false);
  updateView();
  socket.connect();
  await chatStart.load(name);
}

async function newChat() {
  dom.newChat.disabled = true;
  for (const control of dom.form.elements) control.disabled = true; // nothing sent into the old chat
  if (socket.connected) {
    await new Promise((resolve) => socket.timeout(3000).emit("clear_session", resolve));
  }
  if (state.threadId) storage("remove", SESSION_PREFIX + state.threadId);
  leaving = true;
  socket.disconnect();
  location.assign("/");
}

// --- the composer ---------------------------------------------------------------------------

/** The message box grows with its text, up to 240 px. Empty, it is one line, however its
 * placeholder wraps: a box sized while narrow (Stop shown) would stay two lines tall. */
function autosize() {
  if (!dom.input.value) {
    dom.input.style.height = "";
    return;
  }
  dom.input.style.height = "auto";
  dom.input.style.height = `${Math.min(dom.input.scrollHeight, 240)}px`;
}

// Its width changes when Stop shows or hides (an ask pauses the turn), when the settings button
// comes, when a phone turns: the same text may need fewer or more lines.
let inputWidth = 0;
new ResizeObserver(([entry]) => {
  if (entry.contentRect.width === inputWidth) return;
  inputWidth = entry.contentRect.width;
  autosize();
}).observe(dom.input);

/** Whether the server takes this file (its check, by content, is the one that counts). */
function acceptable(file) {
  const family = `${file.type.split("/")[0]}/*`;
  const typeOk = !file.type || uploads.accept.some((t) => t === file.type || t === family || t === "*/*");
  return typeOk && !(uploads.maxBytes && file.size > uploads.maxBytes);
}

function addFiles(files) {
  const taken = [...files].filter(acceptable);
  if (taken.length < files.length) {
    const photosOnly = uploads.accept.every((t) => t.startsWith("image/"));
    notify(gettext(photosOnly ? "Only photos can be attached." : "This type or size of file cannot be attached."));
  }
  state.files = [...state.files, ...taken];
  renderAttachments();
}

function renderAttachments() {
  const chips = state.files.map((file, index) => {
    const chip = el("span", "attachment");
    let thumb = el("span", "attachment-thumb attachment-file", (file.name.split(".").pop() || "").slice(0, 4));
    if (file.type.startsWith("image/")) {
      thumb = el("img", "attachment-thumb");
      thumb.alt = "";
      thumb.src = URL.createObjectURL(file);
      thumb.addEventListener("load", () => URL.revokeObjectURL(thumb.src), { once: true });
    }
    const remove = el("button", "icon-button");
    remove.append(icon("close"));
    remove.type = "button";
    remove.setAttribute("aria-label", interpolate(gettext("Remove %(name)s"), { name: file.name }));
    remove.addEventListener("click", () => {
      state.files = state.files.filter((_, i) => i !== index);
      renderAttachments();
      dom.input.focus();
    });
    chip.append(thumb, el("span", "attachment-name", file.name), remove);
    return chip;
  });
  dom.attachments.replaceChildren(...chips);
  dom.attachments.hidden = chips.length === 0;
}

dom.form.addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
  dom.input.focus();
});
dom.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
dom.input.addEventListener("input", autosize);
dom.input.addEventListener("paste", (event) => {
  if (event.clipboardData?.files?.length) {
    event.preventDefault();
    addFiles(event.clipboardData.files);
  }
});
dom.fileInput.addEventListener("change", () => {
  addFiles(dom.fileInput.files);
  dom.fileInput.value = "";
  dom.input.focus();
});
dom.stop.addEventListener("click", stop);
new MenuButton($("#account-button"), $("#account-menu"));
dom.newChat.addEventListener("click", newChat);
function setDrawer(open) {
  document.body.classList.toggle("drawer-open", open);
  dom.sidebarToggle.setAttribute("aria-expanded", String(open));
  if (open) dom.sidebar.querySelector("#thread-search")?.focus();
}
dom.sidebarToggle.addEventListener("click", () => setDrawer(!document.body.classList.contains("drawer-open")));
dom.backdrop.addEventListener("click", () => setDrawer(false));

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented) return;
  // Escape closes a dialog (feedback, settings, a confirmation), nothing else.
  if (dom.feedbackDialog.open || chatSettings.isOpen || document.querySelector("dialog[open]")) return;
  if (event.target === dom.search && dom.search.value) return; // Escape clears the search (sidebar.js)
  if (document.body.classList.contains("drawer-open")) {
    setDrawer(false);
    dom.sidebarToggle.focus();
  } else if (state.running) {
    event.preventDefault();
    stop();
  }
});
window.addEventListener("pagehide", () => {
  leaving = true;
});
window.addEventListener("pageshow", (event) => {
  // Back from the back/forward cache: the same session carries on.
  if (!event.persisted) return;
  leaving = false;
  if (!socket.connected) socket.connect();
});
document.addEventListener("tether:renamed", (event) => setTitle(event.detail?.name));

// --- start ------------------------------------------------------------------------------------

const chatStart = new ChatStart(
  {
    bar: dom.profileBar,
    button: dom.profileButton,
    value: dom.profileValue,
    list: dom.profileMenu,
    current: dom.profileCurrent,
    description: dom.profileDescription,
    starters: dom.starters,
  },
  { onStarter: (message) => send(message), onProfileChange: switchProfile, onError: notify },
);
if (state.threadId) chatStart.lock(state.chatProfile);
chatStart.load(state.chatProfile).then((profile) => {
  // The profile the server gave this chat's session when it did not offer the one asked for.
  if (!chatStart.locked && profile !== state.chatProfile) {
    state.chatProfile = profile;
    storage("set", PROFILE_KEY, profile);
  }
});

const sidebar = new Sidebar(dom.sidebar, {
  currentId: state.threadId,
  onError: notify,
  onDeletedCurrent: () => {
    storage("remove", SESSION_PREFIX + state.threadId);
    leaving = true;
    socket.disconnect();
    location.assign("/");
  },
});
sidebar.load();
dom.fileInput.accept = uploads.accept.join(",");
setTitle(config.threadName);
setRunning(false);
updateView();
if (state.threadId) loadThread();
if (matchMedia("(min-width: 761px)").matches) dom.input.focus(); // no keyboard popping up on phones
