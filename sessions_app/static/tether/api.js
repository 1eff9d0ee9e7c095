// The HTTP API, same origin, authenticated by the session cookie. Unsafe methods carry the
// CSRF token from the csrftoken cookie (the chat page makes Django set it).

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
  }
}

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

async function request(method, url, body) {
  const headers = { Accept: "application/json" };
  if (!["GET", "HEAD"].includes(method)) headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined && !(body instanceof FormData)) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(body);
  }
  const response = await fetch(url, { method, headers, body, credentials: "same-origin" });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = data?.detail ?? (data ? Object.values(data).flat().join(" ") : "");
    throw new ApiError(response.status, detail || `HTTP ${response.status}`);
  }
  return data;
}

const threadUrl = (id) => `/api/threads/${encodeURIComponent(id)}/`;

/** The caller's threads, newest first: `{next, previous, results}`; `next` is a full URL. */
export function listThreads({ search = "", limit = 30 } = {}) {
  const params = new URLSearchParams({ limit: String(limit) });
  if (search.trim()) params.set("search", search.trim());
  return request("GET", `/api/threads/?${params}`);
}

export function fetchUrl(url) {
  return request("GET", url);
}

export function renameThread(id, name) {
  return request("PATCH", threadUrl(id), { name });
}

export function deleteThread(id) {
  return request("DELETE", threadUrl(id));
}

/** `{thread, entries, omittedBeforeSeq, pending, failed}`: what a page needs to show a thread
 * (with `limit`, only the last that many entries; `omittedBeforeSeq` says where they start
 * when older ones were left out). */
export function bootstrap(id, { limit } = {}) {
  const query = limit ? `?limit=${encodeURIComponent(limit)}` : "";
  return request("GET", `${threadUrl(id)}bootstrap/${query}`);
}

/** Every transcript step after `afterSeq`, following the pages (the pages' elements are
 * pushed onto `elements` when given). */
export async function historyAfter(id, afterSeq, elements = null) {
  const steps = [];
  let url = `${threadUrl(id)}history/?after_seq=${encodeURIComponent(afterSeq)}&limit=500`;
  while (url) {
    const page = await request("GET", url);
    steps.push(...page.results);
    elements?.push(...(page.elements ?? []));
    url = page.next;
  }
  return steps;
}

/** The page of steps before `beforeSeq` (the newest of them, at most `limit`), scrolling up:
 * `{results, previous, elements}`; `previous` is null at the start of the thread. */
export function historyBefore(id, beforeSeq, limit) {
  const query = `before_seq=${encodeURIComponent(beforeSeq)}&limit=${encodeURIComponent(limit)}`;
  return request("GET", `${threadUrl(id)}history/?${query}`);
}

/** Give or change the user's feedback on an assistant message (Chainlit's PUT /feedback):
 * `{forId, value, comment?, threadId?}` -> `{success, feedbackId}`. */
export function setFeedback(feedback) {
  return request("PUT", "/api/feedback", { feedback });
}

/** Take back the user's feedback, by its id. */
export function deleteFeedback(feedbackId) {
  return request("DELETE", "/api/feedback", { feedbackId });
}

/** Upload one photo, or another file the server accepts (multipart field `file`); answers
 * `{id, contentType, size, name}`. */
export function uploadPhoto(file) {
  const form = new FormData();
  form.append("file", file, file.name);
  return request("POST", "/api/uploads/", form);
}

/** The URL of a photo stripped from the history, by its media reference. */
export function mediaUrl(ref) {
  return `/api/session-media/${String(ref).split("/").map(encodeURIComponent).join("/")}`;
}

/** What an empty chat offers: `{chatProfiles, chatProfile, starters}` for the chosen profile
 * (the server answers with the default one when it does not offer `profile`). */
export function projectSettings(profile) {
  const query = profile ? `?${new URLSearchParams({ chat_profile: profile })}` : "";
  return request("GET", `/api/project/settings${query}`);
}
