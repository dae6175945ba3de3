// The glyphpack navigator: builds the page from the JSON in #data. Message text only
// ever reaches the DOM through textContent (never innerHTML), so nothing in it runs.
"use strict";
(function () {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("data").textContent);
  const byId = new Map(), kids = new Map(), order = new Map();
  D.nodes.forEach((n, i) => {
    byId.set(n.id, n);
    order.set(n.id, i);
    const key = n.p === null ? "root:" + n.c : n.p;
    if (!kids.has(key)) kids.set(key, []);
    kids.get(key).push(n.id);
  });
  const conversations = new Map(D.conversations.map((c) => [c.id, c]));
  const compactions = D.compactions;
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const shortId = (id) => id.split("/").pop().slice(0, 8);
  const callId = (id) => id.length > 12 ? "…" + id.slice(-8) : id;  // provider call ids share long prefixes
  const state = { conv: null, agent: null, end: null, path: [], focus: -1, hits: [], hit: -1 };

  function childrenOf(id, conv) { return kids.get(id === null ? "root:" + conv : id) || []; }
  function pathTo(id) {
    const out = [];
    for (let n = byId.get(id); n; n = n.p === null ? null : byId.get(n.p)) out.push(n.id);
    return out.reverse();
  }
  function leafBelow(id) {  // a branch is shown whole: down its first children
    let cur = id;
    for (;;) { const k = childrenOf(cur, byId.get(cur).c); if (!k.length) return cur; cur = k[0]; }
  }
  function leaves(conv) { return D.nodes.filter((n) => n.c === conv && !childrenOf(n.id, conv).length).map((n) => n.id); }
  function summary(n) {
    const parts = n.b.map((b) => b.k === "text" ? b.x : b.k === "call" ? b.n + "(...)" : b.k === "result" ? "[result]" :
      b.k === "image" ? "[image]" : b.k === "thinking" ? "[thinking]" : "[" + (b.n || b.k) + "]");
    const text = parts.join(" ").replace(/\s+/g, " ").trim();
    return text.length > 70 ? text.slice(0, 67) + "..." : text;
  }
  function dataUrl(key) { const im = D.images[key]; return "data:" + im.m + ";base64," + im.d; }
  function image(key) {
    const img = el("img", "inline");
    img.src = dataUrl(key);
    img.alt = "image";
    img.title = "click: actual size";
    img.addEventListener("click", () => img.classList.toggle("actual"));  // pages are read at 1:1
    return img;
  }

  // ------------------------------------------------------------------ header
  $("workspace").textContent = D.workspace;
  for (const c of D.conversations) {
    const o = el("option", "", c.id + (c.title ? "  " + c.title : "") + (c.forked_from ? "  (fork of " + c.forked_from + ")" : ""));
    o.value = c.id;
    $("conversation").appendChild(o);
  }
  $("conversation").addEventListener("change", (e) => selectConversation(e.target.value));

  function selectConversation(conv, agent) {
    const c = conversations.get(conv);
    state.conv = conv;
    $("conversation").value = conv;
    const agents = Object.keys(c.agents);
    state.agent = agent || agents[0] || null;
    const tabs = $("agents");
    tabs.textContent = "";
    for (const a of agents) {
      const b = el("button", "", a);
      b.setAttribute("role", "tab");
      b.setAttribute("aria-selected", String(a === state.agent));
      b.addEventListener("click", () => selectConversation(conv, a));
      tabs.appendChild(b);
    }
    const tip = state.agent ? c.agents[state.agent] : c.tip;
    showPath(tip || c.tip || (leaves(conv)[0] || null));
  }

  // ------------------------------------------------------------------ tree
  function renderTree() {
    const nav = $("tree");
    nav.textContent = "";
    const conv = state.conv, c = conversations.get(conv);
    const onPath = new Set(state.path);
    const tips = new Map();
    for (const [agent, tip] of Object.entries(c.agents)) { if (!tips.has(tip)) tips.set(tip, []); tips.get(tip).push(agent); }
    const stack = childrenOf(null, conv).map((id, i, all) => [id, branchPrefix("", i, all.length)]).reverse();
    if (!stack.length) nav.appendChild(el("div", "empty", "(empty)"));
    while (stack.length) {  // depth first without recursion: paths run to thousands of messages
      const [id, [linePrefix, childPrefix]] = stack.pop();
      const n = byId.get(id);
      const row = el("div", "node" + (onPath.has(id) ? " on-path" : "") + (id === state.end ? " current" : ""));
      row.dataset.id = id;
      row.appendChild(document.createTextNode(linePrefix));
      row.appendChild(el("span", "dot", "* "));
      row.appendChild(document.createTextNode(n.r + ": " + summary(n) + " [" + shortId(id) + "]"));
      if (tips.has(id)) row.appendChild(el("span", "mark", "  <- " + (id === c.tip ? "tip" : "") + (Object.keys(c.agents).length > 1 ? " (" + tips.get(id).join(", ") + ")" : "")));
      row.addEventListener("click", () => { showPath(leafBelow(id)); scrollToMessage(id); });
      nav.appendChild(row);
      const k = childrenOf(id, conv);
      for (let i = k.length - 1; i >= 0; i--) stack.push([k[i], branchPrefix(childPrefix, i, k.length)]);
    }
  }
  function branchPrefix(prefix, i, count) {
    if (count === 1) return [prefix, prefix];
    const last = i === count - 1;
    return [prefix + (last ? "└─" : "├─"), prefix + (last ? "  " : "│ ")];
  }

  // ------------------------------------------------------------------ transcript
  function showPath(end) {
    state.end = end;
    state.path = end ? pathTo(end) : [];
    state.focus = -1;
    renderTree();
    renderTranscript();
    runSearch();
  }

  function renderTranscript() {
    const box = $("transcript");
    box.textContent = "";
    const here = compactions.filter((c) => c.conv === state.conv && (!state.agent || c.agent === state.agent));
    const elidedAt = new Map();
    for (const c of here) for (const id of c.elided) elidedAt.set(id, c.n);
    for (const id of state.path) {
      box.appendChild(messageElement(byId.get(id), elidedAt.get(id)));
      for (const c of here) if (c.covers === id) box.appendChild(compactionElement(c));
    }
    if (!state.path.length) box.appendChild(el("div", "empty", "(no messages)"));
  }

  function messageElement(n, elided) {
    const m = el("article", "msg " + n.r);
    m.id = "m-" + n.id;
    const head = el("div", "head");
    head.appendChild(el("span", "role", n.r));
    const link = el("a", "", "#" + shortId(n.id));
    link.href = "#m-" + encodeURIComponent(n.id);
    link.title = "permalink";
    head.appendChild(link);
    const siblings = n.p === null ? childrenOf(null, n.c) : childrenOf(n.p, n.c);
    if (siblings.length > 1) head.appendChild(el("span", "", "branch " + (siblings.indexOf(n.id) + 1) + " of " + siblings.length));
    if (elided) head.appendChild(el("span", "badge", "elided or dropped in compaction " + elided));
    m.appendChild(head);
    for (const b of n.b) m.appendChild(blockElement(b));
    return m;
  }

  function collapsible(title, body, open, cls) {
    const d = el("details", cls || "");
    d.open = !!open;
    d.appendChild(el("summary", "", title));
    d.appendChild(body);
    return d;
  }

  function blockElement(b) {
    if (b.k === "text") return el("div", "text", b.x);
    if (b.k === "image") return b.i ? image(b.i) : el("div", "text", "[image: " + b.ref + "]");
    if (b.k === "call") {
      return collapsible("tool call " + b.n + " (" + callId(b.id) + ")", el("pre", "", b.a), false, "call");
    }
    if (b.k === "result") {
      const body = el("div");
      body.appendChild(el("pre", "", b.x));
      for (const key of b.imgs) body.appendChild(image(key));
      const lines = b.x ? b.x.split("\n").length : 0;
      return collapsible((b.e ? "error result" : "tool result") + " (" + callId(b.id) + ", " + lines + " lines" +
        (b.imgs.length ? ", " + b.imgs.length + " image(s)" : "") + ")", body, false, "result" + (b.e ? " error" : ""));
    }
    if (b.k === "thinking") return collapsible("thinking", el("pre", "", b.x), false, "thinking");
    return el("div", "text", "[" + (b.n || b.k) + ": kept, not shown]");
  }

  function compactionElement(c) {
    const box = el("div", "compaction");
    box.id = "compaction-" + c.conv + "-" + c.agent + "-" + c.n;
    box.appendChild(el("div", "title", "compaction " + c.n + " (" + c.trigger + ")" + (c.shape ? ": pages in " + c.shape : "")));
    box.appendChild(el("div", "text", c.report));
    if (c.elided.length) box.appendChild(el("div", "text", c.elided.length + " message(s) elided or with images dropped (marked above)"));
    if (c.pages.length) {
      const pages = el("div");
      for (const key of c.pages) pages.appendChild(image(key));
      box.appendChild(collapsible(c.pages.length + " snapshot page(s)", pages, true, "pages"));
    }
    for (const note of c.notes) if (note) box.appendChild(collapsible("text sent with them", el("pre", "", note), false, "note"));
    if (c.source) {
      const ids = pathTo(c.source[1]);
      const from = ids.indexOf(c.source[0]);
      const source = el("div");
      for (const id of ids.slice(Math.max(0, from))) {
        const n = byId.get(id);
        const text = n.b.map((b) => b.x !== undefined ? b.x : b.k === "call" ? b.n + " " + b.a : "").join("\n");
        source.appendChild(el("pre", "", n.r + " [" + shortId(id) + "]\n" + text));
      }
      box.appendChild(collapsible("source text (" + ids.slice(Math.max(0, from)).length + " messages)", source, false, "source"));
    }
    return box;
  }

  function scrollToMessage(id) {
    const target = document.getElementById("m-" + id);
    if (!target) return;
    document.querySelectorAll(".msg.target").forEach((e) => e.classList.remove("target"));
    target.classList.add("target");
    target.scrollIntoView({ block: "start" });
    state.focus = state.path.indexOf(id);
  }

  // ------------------------------------------------------------------ search
  function runSearch() {
    const q = $("search").value.trim().toLowerCase();
    state.hits = [];
    state.hit = -1;
    document.querySelectorAll(".hit").forEach((e) => e.classList.remove("hit"));
    if (!q) { $("hits").textContent = ""; return; }
    for (const m of document.querySelectorAll("#transcript .msg")) {
      if (m.textContent.toLowerCase().includes(q)) { m.classList.add("hit"); state.hits.push(m); }
    }
    let inTree = 0;
    for (const row of document.querySelectorAll("#tree .node")) {
      const n = byId.get(row.dataset.id);
      const text = n.b.map((b) => (b.x || "") + " " + (b.a || "") + " " + (b.n || "")).join(" ").toLowerCase();
      if (text.includes(q)) { row.classList.add("hit"); inTree++; }
    }
    $("hits").textContent = state.hits.length + " in this path, " + inTree + " in the tree";
  }
  $("search").addEventListener("input", runSearch);
  $("search").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && state.hits.length) {
      state.hit = (state.hit + (e.shiftKey ? state.hits.length - 1 : 1)) % state.hits.length;
      state.hits[state.hit].scrollIntoView({ block: "center" });
    } else if (e.key === "Escape") { e.target.blur(); }
  });

  // ------------------------------------------------------------------ keys
  function focusMessage(index) {
    const all = document.querySelectorAll("#transcript .msg");
    if (!all.length) return;
    state.focus = Math.max(0, Math.min(all.length - 1, index));
    document.querySelectorAll(".msg.focused").forEach((e) => e.classList.remove("focused"));
    all[state.focus].classList.add("focused");
    all[state.focus].scrollIntoView({ block: "nearest" });
  }
  function nextBranch(step) {
    const all = leaves(state.conv).sort((a, b) => order.get(a) - order.get(b));
    if (!all.length) return;
    const at = all.indexOf(state.end);
    showPath(all[(at + step + all.length) % all.length]);
  }
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT" || e.metaKey || e.ctrlKey || e.altKey) return;
    if (e.key === "j") focusMessage(state.focus + 1);
    else if (e.key === "k") focusMessage(state.focus - 1);
    else if (e.key === "n") nextBranch(1);
    else if (e.key === "p") nextBranch(-1);
    else if (e.key === "/") { e.preventDefault(); $("search").focus(); }
    else return;
    e.preventDefault();
  });

  // ------------------------------------------------------------------ permalinks
  function followHash() {
    const id = decodeURIComponent(location.hash.replace(/^#m-/, ""));
    const n = byId.get(id);
    if (!location.hash.startsWith("#m-") || !n) return false;
    if (state.conv !== n.c) selectConversation(n.c);
    if (!state.path.includes(id)) showPath(leafBelow(id));
    scrollToMessage(id);
    return true;
  }
  window.addEventListener("hashchange", followHash);

  if (D.conversations.length) {
    selectConversation(D.conversations[0].id);
    followHash();
  } else {
    $("transcript").appendChild(el("div", "empty", "(no conversations in this workspace)"));
  }
  // ms: building the page; sinceNavigation: from the start of loading the file to ready.
  window.glyphpackNavigator = { ready: true, ms: performance.now() - started, sinceNavigation: performance.now(), state };
})();
