// The admin's live dashboard (sessions_app/dashboard.py): fetches the figures every few
// seconds and draws them, the charts with the vendored uPlot. Its URL and the words it
// writes come from the page's data- attributes (no inline script: the admin's CSP).
import uPlot from "../vendor/uplot/uPlot.esm.js";

const root = document.querySelector(".tether-dashboard");
const words = root.dataset;
const CHART_HEIGHT = 220;
const charts = {};
// Points as well as lines: a minute with turns between two quiet ones is a point.
const POINTS = { show: true, size: 7 };

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.append(td);
  return td;
}

function byKind(values) {
  return `${values.hooks ?? 0} / ${values.engine ?? 0}`;
}

function processRows(processes) {
  const body = document.querySelector("#dashboard-processes tbody");
  const rows = processes.map((p) => {
    const row = document.createElement("tr");
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = p.name;
    name.title = p.address;
    row.append(name);
    cell(row, p.app);
    const state = p.alive ? (p.draining ? words.draining : words.alive) : words.dead;
    cell(row, state).className = `tether-state tether-state-${p.alive ? (p.draining ? "draining" : "alive") : "dead"}`;
    cell(row, String(p.beat_age));
    cell(row, String(p.sockets));
    cell(row, String(p.sessions));
    cell(row, byKind(p.running));
    cell(row, byKind(p.queued));
    cell(row, String(p.engine_runs));
    return row;
  });
  body.replaceChildren(...rows);
}

function failureRows(failures) {
  const body = document.querySelector("#dashboard-failures tbody");
  if (!failures.length) {
    const row = document.createElement("tr");
    cell(row, words.none).colSpan = 6;
    body.replaceChildren(row);
    return;
  }
  body.replaceChildren(
    ...failures.map((f) => {
      const row = document.createElement("tr");
      cell(row, new Date(f.accepted_at).toLocaleTimeString());
      cell(row, f.text);
      cell(row, f.state);
      cell(row, f.outcome || "-");
      cell(row, f.failure || "-");
      const links = cell(row, "");
      for (const [href, label] of [[f.thread_url, words.openThread], [f.send_url, words.openSend]]) {
        const a = document.createElement("a");
        a.href = href;
        a.textContent = label;
        a.className = "tether-failure-link";
        links.append(a, " ");
      }
      return row;
    }),
  );
}

function totals(data) {
  const t = data.totals;
  const sum = (values) => (values.hooks ?? 0) + (values.engine ?? 0);
  const s = data.series;
  const hour = [...s.turns_hooks, ...s.turns_engine].reduce((a, b) => a + b, 0);
  const set = (id, value) => (document.getElementById(id).textContent = String(value));
  set("total-processes", t.processes);
  set("total-sockets", t.sockets);
  set("total-sessions", t.sessions);
  set("total-running", `${sum(t.running)} (${byKind(t.running)})`);
  set("total-queued", `${sum(t.queued)} (${byKind(t.queued)})`);
  set("total-turns-hour", hour);
}

function width(element) {
  return Math.max(300, element.clientWidth);
}

function chart(id, series, data) {
  const element = document.getElementById(id);
  if (charts[id]) {
    charts[id].setData(data);
    return;
  }
  const options = {
    width: width(element),
    height: CHART_HEIGHT,
    series: [{}, ...series.map((one) => ({ points: { ...POINTS, fill: one.stroke }, ...one }))],
    axes: [{}, { size: 50 }],
    scales: { x: { time: true } },
  };
  charts[id] = new uPlot(options, data, element);
}

function draw(s) {
  chart(
    "chart-turns",
    [
      { label: words.hooks, stroke: "#2b6cb0", width: 2 },
      { label: words.engine, stroke: "#2f855a", width: 2 },
      { label: words.errors, stroke: "#c53030", width: 2 },
    ],
    [s.t, s.turns_hooks, s.turns_engine, s.errors],
  );
  chart(
    "chart-latency",
    [
      { label: words.taskEndP50, stroke: "#2b6cb0", width: 2, spanGaps: false },
      { label: words.taskEndP95, stroke: "#9b2c2c", width: 2, spanGaps: false },
      { label: words.firstTokenP95, stroke: "#6b46c1", width: 2, spanGaps: false },
    ],
    [s.t, s.task_end_p50, s.task_end_p95, s.first_token_p95],
  );
}

const status = document.getElementById("dashboard-updated");

async function refresh() {
  try {
    const response = await fetch(words.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`${response.status}`);
    const data = await response.json();
    processRows(data.processes);
    failureRows(data.failures);
    totals(data);
    draw(data.series);
    status.textContent = `${words.updated} ${new Date().toLocaleTimeString()}`;
    root.dataset.refreshes = String(Number(root.dataset.refreshes ?? 0) + 1);
  } catch (error) {
    status.textContent = `${words.failedFetch} ${error.message}`;
  }
}

window.addEventListener("resize", () => {
  for (const [id, plot] of Object.entries(charts)) {
    plot.setSize({ width: width(document.getElementById(id)), height: CHART_HEIGHT });
  }
});

refresh();
setInterval(refresh, Number(words.refreshMs) || 3000);
