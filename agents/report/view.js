// The run report's page: reads the JSON in #report-data and draws curves, the episode list and one episode.
// No libraries: plain DOM and SVG. The list is paged, and an episode's turns and tokens are built only when
// it is opened, so a run with thousands of episodes loads quickly.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const PAGE_SIZE = 100;
  const COLORS = ["#2456a4", "#d1495b", "#2a9d8f", "#e9a03b", "#6a4c93", "#444444"];
  const SVG_NS = "http://www.w3.org/2000/svg";
  const state = { page: 0, filtered: [], open: null, tab: "tokens" };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    return node;
  }

  function fmt(x, digits) {
    if (x === null || x === undefined) return "–";
    if (typeof x !== "number") return String(x);
    return Number.isInteger(x) ? String(x) : x.toFixed(digits === undefined ? 3 : digits);
  }

  // ------------------------------------------------------------------------------------------ notes
  function showNotes() {
    const list = document.getElementById("notes");
    for (const note of DATA.notes) list.appendChild(el("li", {}, note));
  }

  // ----------------------------------------------------------------------------------------- curves
  function drawCurves() {
    const box = document.getElementById("curves");
    if (!DATA.panels.length) {
      box.appendChild(el("p", { class: "empty" }, "No learning curves (no metrics.jsonl, or no step logged yet)."));
      return;
    }
    for (const panel of DATA.panels) box.appendChild(drawPanel(panel));
  }

  function drawPanel(panel) {
    const W = 360, H = 210, L = 44, R = 10, T = 8, B = 46;
    const xs = [], ys = [];
    for (const line of panel.lines) {
      for (const [x, y] of line.points) { xs.push(x); ys.push(y); }
      for (const [x, lo, hi] of line.band || []) { xs.push(x); ys.push(lo, hi); }
    }
    let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const div = el("div", { class: "panel" });
    div.appendChild(el("h3", {}, panel.title));
    const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-title": panel.title });
    root.appendChild(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
    root.appendChild(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
    for (const [value, x, y, anchor] of [
      [y0, L - 4, sy(y0) + 3, "end"], [y1, L - 4, sy(y1) + 8, "end"],
      [x0, sx(x0), H - B + 12, "start"], [x1, sx(x1), H - B + 12, "end"],
    ]) {
      const tick = svg("text", { class: "tick", x: x, y: y, "text-anchor": anchor });
      tick.textContent = fmt(value, 2);
      root.appendChild(tick);
    }
    panel.lines.forEach((line, n) => {
      const color = COLORS[n % COLORS.length];
      if (line.band && line.band.length) {
        const upper = line.band.map(([x, , hi]) => `${sx(x)},${sy(hi)}`);
        const lower = line.band.slice().reverse().map(([x, lo]) => `${sx(x)},${sy(lo)}`);
        root.appendChild(svg("path", { class: "band", fill: color, d: `M${upper.join("L")}L${lower.join("L")}Z` }));
      }
      const d = line.points.map(([x, y], i) => `${i ? "L" : "M"}${sx(x)},${sy(y)}`).join("");
      root.appendChild(svg("path", { class: "line", stroke: color, d: d, "data-metric": line.metric }));
      for (const [x, y] of line.points) {
        const point = svg("circle", { class: "pt", cx: sx(x), cy: sy(y), r: 2.6, fill: color, "data-metric": line.metric });
        const title = svg("title");
        title.textContent = `${line.metric} at step ${x}: ${fmt(y, 4)}`;
        point.appendChild(title);
        root.appendChild(point);
      }
      const key = svg("text", { class: "key", x: L + 4 + (n % 2) * 160, y: H - 18 + Math.floor(n / 2) * 13, fill: color });
      key.textContent = line.label;
      root.appendChild(key);
    });
    div.appendChild(root);
    return div;
  }

  // ----------------------------------------------------------------------------------- episode list
  function fillFilters() {
    const steps = new Map(DATA.episodes.map((e) => [e.source, e.step]));
    const sources = [...steps.keys()].sort((a, b) => (steps.get(a) ?? -1) - (steps.get(b) ?? -1) || a.localeCompare(b));
    const envs = [...new Set(DATA.episodes.map((e) => e.env))].sort();
    const sourceSelect = document.getElementById("filter-source");
    for (const s of sources) {
      const folder = s.includes("/") ? s.split("/")[0] + " · " : "";
      sourceSelect.appendChild(el("option", { value: s }, steps.get(s) === null ? s : `${folder}step ${steps.get(s)}`));
    }
    const envSelect = document.getElementById("filter-env");
    for (const s of envs) envSelect.appendChild(el("option", { value: s }, s));
    for (const id of ["filter-source", "filter-success", "filter-env", "filter-seed"]) {
      const refilter = () => { state.page = 0; applyFilters(); };
      document.getElementById(id).addEventListener(id === "filter-seed" ? "input" : "change", refilter);
    }
    document.getElementById("page-prev").addEventListener("click", () => { state.page -= 1; renderList(); });
    document.getElementById("page-next").addEventListener("click", () => { state.page += 1; renderList(); });
  }

  function applyFilters() {
    const source = document.getElementById("filter-source").value;
    const success = document.getElementById("filter-success").value;
    const env = document.getElementById("filter-env").value;
    const seed = document.getElementById("filter-seed").value.trim();
    state.filtered = [];
    DATA.episodes.forEach((e, i) => {
      if (source && e.source !== source) return;
      if (success && (success === "yes") !== e.success) return;
      if (env && e.env !== env) return;
      if (seed && String(e.seed) !== seed) return;
      state.filtered.push(i);
    });
    renderList();
  }

  function renderList() {
    const pages = Math.max(1, Math.ceil(state.filtered.length / PAGE_SIZE));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    const body = document.querySelector("#episode-list tbody");
    const rows = document.createDocumentFragment();
    for (const i of state.filtered.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE)) {
      const e = DATA.episodes[i];
      const row = el("tr", { class: "episode" + (state.open === i ? " open" : ""), "data-index": i });
      const cells = [i, e.source, e.step === null ? "–" : e.step, e.env, e.seed, e.success ? "yes" : "no",
        fmt(e.return, 2), e.turns.length, e.invalid, e.termination];
      cells.forEach((value, c) => row.appendChild(el("td", c === 5 ? { class: value } : {}, String(value))));
      row.addEventListener("click", () => { location.hash = `episode=${i}`; });
      rows.appendChild(row);
    }
    body.replaceChildren(rows);
    document.getElementById("episode-count").textContent =
      `${state.filtered.length} of ${DATA.episodes.length} episodes`;
    document.getElementById("page-label").textContent = `page ${state.page + 1} of ${pages}`;
    document.getElementById("page-prev").disabled = state.page === 0;
    document.getElementById("page-next").disabled = state.page >= pages - 1;
  }

  // -------------------------------------------------------------------------------------- one episode
  function openEpisode(i, tab) {
    const e = DATA.episodes[i];
    const detail = document.getElementById("detail");
    detail.hidden = false;
    if (!e) {
      document.getElementById("detail-title").textContent = `No episode ${i}: the report has ${DATA.episodes.length}`;
      for (const id of ["detail-summary", "turns", "tokens"]) document.getElementById(id).replaceChildren();
      return;
    }
    state.open = i;
    document.getElementById("detail-title").textContent = `Episode ${i}: ${e.env}, seed ${e.seed} (${e.source})`;
    document.getElementById("detail-summary").textContent =
      `${e.success ? "solved" : "not solved"} · return ${fmt(e.return, 2)} · ${e.turns.length} turn(s) · ` +
      `${e.invalid} invalid action(s) · ended: ${e.termination}`;
    renderTurns(e);
    renderTokens(e);
    showTab(e.tokens && DATA.vocab ? tab || state.tab : "turns");
    for (const row of document.querySelectorAll("#episode-list tr.episode")) {
      row.classList.toggle("open", Number(row.dataset.index) === i);
    }
    detail.scrollIntoView();
  }

  function showTab(tab) {
    state.tab = tab;
    document.getElementById("turns").hidden = tab !== "turns";
    document.getElementById("token-view").hidden = tab !== "tokens";
    for (const b of document.querySelectorAll("#detail-tabs button")) b.classList.toggle("active", b.dataset.tab === tab);
  }

  function infoBlock(title, info) {
    const details = el("details", { class: "info" });
    details.appendChild(el("summary", {}, title));
    details.appendChild(el("pre", {}, JSON.stringify(info, null, 1)));
    return details;
  }

  function renderTurns(e) {
    const box = document.getElementById("turns");
    box.replaceChildren();
    if (e.system) box.appendChild(infoBlockText("system prompt", e.system));
    e.turns.forEach((turn, n) => {
      const div = el("div", { class: "turn", "data-turn": n + 1 });
      div.appendChild(el("h4", {}, `Turn ${n + 1}`));
      div.appendChild(el("pre", { class: "obs" }, turn.observation));
      div.appendChild(el("pre", { class: "action" }, turn.action));
      const meta = el("div", { class: "meta" });
      meta.appendChild(el("span", {}, `reward ${fmt(turn.reward, 2)}`));
      if (turn.valid === false) meta.appendChild(el("span", { class: "invalid" }, " · invalid action"));
      else if (turn.valid === true) meta.appendChild(el("span", {}, " · valid action"));
      const info = Object.entries(turn.info).map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : v}`);
      if (info.length) meta.appendChild(el("span", { class: "turn-info" }, " · " + info.join(" · ")));
      div.appendChild(meta);
      box.appendChild(div);
    });
    if (e.final) {
      const div = el("div", { class: "turn final" });
      div.appendChild(el("h4", {}, "After the last turn"));
      div.appendChild(el("pre", { class: "obs" }, e.final));
      box.appendChild(div);
    }
    if (Object.keys(e.info).length) box.appendChild(infoBlock("episode info", e.info));
  }

  function infoBlockText(title, text) {
    const details = el("details", { class: "info" });
    details.appendChild(el("summary", {}, title));
    details.appendChild(el("pre", { class: "system" }, text));
    return details;
  }

  function renderTokens(e) {
    const box = document.getElementById("tokens");
    box.replaceChildren();
    if (!e.tokens) {
      box.appendChild(el("p", { class: "empty" }, "This episode has no token ids (a scripted agent, a person, " +
        "or a readable sample): there is no token view."));
      return;
    }
    if (!DATA.vocab) {
      box.appendChild(el("p", { class: "empty" }, "No tokenizer for this report (give --model NAME): no token view."));
      return;
    }
    const t = e.tokens, out = document.createDocumentFragment();
    const rewardAt = new Map(t.ends.map((end, n) => [end, t.rewards[n]]));
    const tokenSpan = (id, mask) => {
      const text = DATA.vocab[id];
      const span = el("span", { class: "tok", "data-mask": mask, "data-id": id }, text === undefined ? `<${id}>` : text);
      if (text !== undefined && /^<\|.*\|>$/.test(text)) span.classList.add("special");
      return span;
    };
    for (const id of t.prompt) out.appendChild(tokenSpan(id, 0));
    let sampled = 0;
    t.response.forEach((id, j) => {
      const mask = t.mask[j];
      const span = tokenSpan(id, mask);
      if (mask === 1) {
        const lp = t.logprobs[sampled];
        span.title = `logprob ${lp} (p = ${Math.exp(lp).toFixed(3)})`;
        span.dataset.logprob = lp;
        if (t.values) { // the critic's value of the state the token was chosen in (PPO with the engine's values)
          span.title += ` · value ${t.values[sampled]}`;
          span.dataset.value = t.values[sampled];
        }
        sampled++;
      }
      out.appendChild(span);
      if (rewardAt.has(j)) out.appendChild(el("span", { class: "reward", "data-turn-end": j }, `reward ${fmt(rewardAt.get(j), 2)}`));
    });
    box.appendChild(out);
  }

  // ------------------------------------------------------------------------------------------- links
  function followHash() {
    const match = /^#episode=(\d+)$/.exec(location.hash);
    if (match) openEpisode(Number(match[1]), "tokens");
  }

  showNotes();
  drawCurves();
  fillFilters();
  for (const b of document.querySelectorAll("#detail-tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  applyFilters();
  window.addEventListener("hashchange", followHash);
  followHash();
  document.body.dataset.readyMs = performance.now().toFixed(1); // since navigation start: the load benchmark
  document.body.dataset.ready = "1";
})();
