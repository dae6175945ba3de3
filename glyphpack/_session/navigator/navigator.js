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
  const state = { conv: null, agent: null, end: null, path: [], focus: -1, hits: [], hit: -1, open: new Set(), opened: [] };
  //: A run of single-child messages longer than this shows its ends and a count.
  const RUN = 6, RUN_ENDS = 2;

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
  function labelsAt(id) {  // the checkpoints set on a message (as glyphpack tree shows them)
    const c = conversations.get(byId.get(id).c);
    return Object.entries(c.labels || {}).filter(([, at]) => at === id).map(([name]) => name).sort();
  }
  function summary(n) {
    const parts = n.b.map((b) => b.k === "text" ? b.x : b.k === "call" ? b.label : b.k === "result" ? (b.e ? "[error]" : "[result]") :
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
    const names = agentNames(conv, agents[0]);
    const tabs = $("agents");
    tabs.textContent = "";
    for (const a of agents) {  // a subagent by what its caller called it, its id on hover
      const b = el("button", "", names.get(a) || a);
      b.dataset.agent = a;
      b.title = "agent " + a;
      b.setAttribute("role", "tab");
      b.addEventListener("click", () => selectConversation(conv, a));
      tabs.appendChild(b);
    }
    const tip = state.agent ? c.agents[state.agent] : c.tip;
    showPath(tip || c.tip || (leaves(conv)[0] || null));
    // another conversation starts at its top, not at the old scroll position; the main
    // path opens at the first prompt the person typed (what the harness put before it
    // is above it, folded)
    $("transcript").scrollTop = 0;
    $("tree").scrollTop = 0;
    if (c.first_prompt && state.path.includes(c.first_prompt)) {
      scrollToMessage(c.first_prompt);
      const typed = document.getElementById("m-" + c.first_prompt);
      if (typed) typed.classList.add("first-prompt");
    }
  }

  // The subagents' names: the description (and kind) of the call that started each, as
  // its caller wrote them, found on the main agent's messages.
  function agentNames(conv, main) {
    const names = new Map();
    for (const n of D.nodes) {
      if (n.c !== conv) continue;
      for (const b of n.b) {
        if (b.k !== "call" || b.p === undefined || !b.d) continue;
        const sub = subagentOf(b, conv, main);
        if (sub && !names.has(sub.agent)) names.set(sub.agent, b.d);
      }
    }
    return names;
  }

  // Which agent the shown path is (the one whose tip is on it, furthest down) and which
  // branch of the conversation: after n/p the header says where you are.
  function showWhere() {
    const c = conversations.get(state.conv);
    let agent = null, at = -1;
    for (const [a, tip] of Object.entries(c.agents)) {  // two agents at one tip: the one chosen stays
      const i = state.path.indexOf(tip);
      if (i > at || (i === at && i >= 0 && a === state.agent)) { at = i; agent = a; }
    }
    if (agent) state.agent = agent;
    for (const b of $("agents").children) b.setAttribute("aria-selected", String(agent !== null && b.dataset.agent === agent));
    const all = leaves(state.conv).sort((a, b) => order.get(a) - order.get(b));
    const k = all.indexOf(state.end);
    $("branch").textContent = all.length > 1 && k >= 0 ? "branch " + (k + 1) + " of " + all.length + (agent ? "" : " · no agent's tip") : "";
  }

  // ------------------------------------------------------------------ tree
  function renderTree() {
    const nav = $("tree");
    nav.textContent = "";
    const conv = state.conv, c = conversations.get(conv);
    const onPath = new Set(state.path);
    const tips = new Map();
    for (const [agent, tip] of Object.entries(c.agents)) { if (!tips.has(tip)) tips.set(tip, []); tips.get(tip).push(agent); }
    const covers = new Set(compactions.filter((x) => x.conv === conv).map((x) => x.covers));
    // Marked: never folded into a run (a tip, the message shown last, a compaction's end).
    const marked = (id) => tips.has(id) || id === state.end || covers.has(id);
    const stack = childrenOf(null, conv).map((id, i, all) => [id, branchPrefix("", i, all.length)]).reverse();
    if (!stack.length) nav.appendChild(el("div", "empty", "(empty)"));
    while (stack.length) {  // depth first without recursion: paths run to thousands of messages
      const [first, [linePrefix, childPrefix]] = stack.pop();
      const chain = [first];  // a linear run: each message the only child of the one before
      for (let k = childrenOf(first, conv); k.length === 1; k = childrenOf(chain[chain.length - 1], conv)) chain.push(k[0]);
      let prefix = linePrefix;
      for (let i = 0; i < chain.length; i++) {
        let j = i;
        while (j < chain.length && !marked(chain[j])) j++;
        // fold the middle of an unmarked stretch, unless one of it was opened (a run opens whole)
        if (j - i > RUN && !chain.slice(i + RUN_ENDS, j - RUN_ENDS).some((id) => state.open.has(id))) {
          for (const id of chain.slice(i, i + RUN_ENDS)) { nav.appendChild(nodeRow(id, prefix, onPath, tips, c)); prefix = childPrefix; }
          nav.appendChild(runRow(chain.slice(i + RUN_ENDS, j - RUN_ENDS), prefix, onPath));
          i = j - RUN_ENDS - 1;
          continue;
        }
        nav.appendChild(nodeRow(chain[i], prefix, onPath, tips, c));
        prefix = childPrefix;
      }
      const k = childrenOf(chain[chain.length - 1], conv);
      for (let i = k.length - 1; i >= 0; i--) stack.push([k[i], branchPrefix(childPrefix, i, k.length)]);
    }
  }
  function nodeRow(id, prefix, onPath, tips, c) {
    const n = byId.get(id);
    const row = el("div", "node" + (onPath.has(id) ? " on-path" : "") + (id === state.end ? " current" : ""));
    row.dataset.id = id;
    row.title = n.r + ": " + summary(n);
    row.appendChild(document.createTextNode(prefix));
    row.appendChild(el("span", "dot", "* "));
    row.appendChild(document.createTextNode(n.r + ": " + summary(n) + " [" + shortId(id) + "]"));
    for (const name of labelsAt(id)) row.appendChild(el("span", "mark", "  [checkpoint " + name + "]"));
    if (tips.has(id)) row.appendChild(el("span", "mark", "  <- " + (id === c.tip ? "tip" : "") + (Object.keys(c.agents).length > 1 ? " (" + tips.get(id).join(", ") + ")" : "")));
    row.addEventListener("click", () => { showPath(leafBelow(id)); scrollToMessage(id); });
    return row;
  }
  function runRow(ids, prefix, onPath) {  // click: show them
    const row = el("div", "node run" + (ids.some((id) => onPath.has(id)) ? " on-path" : ""));
    row.dataset.run = ids[0];
    row.dataset.count = String(ids.length);
    row.appendChild(document.createTextNode(prefix + "  … " + ids.length + " messages …"));
    row.addEventListener("click", () => { for (const id of ids) state.open.add(id); renderTree(); });
    return row;
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
    showWhere();
    renderTree();
    renderTranscript();
    runSearch();
  }

  function renderTranscript() {
    const box = $("transcript");
    box.textContent = "";
    const here = compactions.filter((c) => c.conv === state.conv && (!state.agent || c.agent === state.agent));
    const elidedAt = new Map(), pagedAt = new Map();
    for (const c of here) for (const id of c.elided) elidedAt.set(id, c.n);
    // The messages a compaction drew on its pages (its source range, on this path): the
    // model sees those only as page pixels, until it recalls them.
    for (const c of here) {
      if (!c.source || !c.pages.length) continue;
      const from = state.path.indexOf(c.source[0]), to = state.path.indexOf(c.source[1]);
      if (from >= 0 && to >= from) for (const id of state.path.slice(from, to + 1)) pagedAt.set(id, c);
    }
    const results = resultsOf(state.path);
    for (const id of state.path) {
      const m = messageElement(byId.get(id), elidedAt.get(id), results, "msg");
      const paged = pagedAt.get(id);
      if (paged) {
        m.classList.add("paged");
        m.querySelector(".head").appendChild(el("span", "badge paged", "drawn on the " + paged.pages.length + " page(s) of compaction " + paged.n));
      }
      box.appendChild(m);
      for (const c of here) if (c.covers === id) box.appendChild(compactionElement(c));
    }
    if (!state.path.length) box.appendChild(el("div", "empty", "(no messages)"));
  }

  // Each call's result on a path, by call id: shown under its call, not apart.
  function resultsOf(path) {
    const calls = new Set(), out = new Map();
    for (const id of path) for (const b of byId.get(id).b) {
      if (b.k === "call") calls.add(b.id);
      else if (b.k === "result" && calls.has(b.id)) out.set(b.id, b);
    }
    return out;
  }

  function messageElement(n, elided, results, cls) {
    const m = el("article", cls + " " + n.r);
    if (cls === "msg") m.id = "m-" + n.id;
    const head = el("div", "head");
    head.appendChild(el("span", "role", n.r));
    const link = el("a", "", "#" + shortId(n.id));
    link.href = "#m-" + encodeURIComponent(n.id);
    link.title = "permalink";
    head.appendChild(link);
    if (n.t) {  // when the harness recorded it (an import keeps the session's own times)
      const when = el("time", "when", new Date(n.t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
      when.dateTime = new Date(n.t * 1000).toISOString();
      head.appendChild(when);
    }
    const siblings = n.p === null ? childrenOf(null, n.c) : childrenOf(n.p, n.c);
    if (siblings.length > 1) head.appendChild(el("span", "", "branch " + (siblings.indexOf(n.id) + 1) + " of " + siblings.length));
    if (elided) head.appendChild(el("span", "badge", "elided or dropped in compaction " + elided));
    if (cls === "msg") for (const name of labelsAt(n.id)) head.appendChild(el("span", "badge checkpoint", "checkpoint " + name));
    m.appendChild(head);
    let shown = 0;
    for (const b of n.b) {
      if (b.k === "result" && results.has(b.id)) continue;  // under its call
      m.appendChild(b.k === "call" ? callElement(b, results.get(b.id), n.c) : blockElement(b, n.r));
      shown++;
    }
    if (!shown) m.classList.add("folded");  // every result shown under its call above: the message is not drawn again
    return m;
  }

  function lineCount(text) { return text ? text.split("\n").length : 0; }

  function callElement(b, result, conv) {
    const body = el("div");
    body.appendChild(el("pre", "args", b.a));
    if (result) body.appendChild(resultElement(result, true));
    const sub = b.p !== undefined ? subagentOf(b, conv) : null;
    if (sub) body.appendChild(subagentElement({ ...sub, name: b.d }));
    const status = !result ? "no result" : (result.e ? "error, " : "") + lineCount(result.x) + " lines" +
      (result.imgs.length ? ", " + result.imgs.length + " image(s)" : "");
    const d = collapsible("", body, false, "call" + (result && result.e ? " error" : ""));
    const title = d.querySelector("summary");
    title.appendChild(el("span", "label", b.label || b.n));
    title.appendChild(el("span", "dim", "  " + status + (sub ? " · subagent " + (b.d || sub.agent) : "")));
    title.title = "call " + b.id;
    return d;
  }

  // The subagent a call started: the agent of this conversation, other than the caller
  // (default: the agent shown), whose name ends with the call's id (the proxy names them
  // so) or whose first message is the call's prompt.
  const agentPaths = new Map();
  function subagentOf(b, conv, caller = state.agent) {
    const c = conversations.get(conv);
    const prompt = b.p.trim();
    for (const [agent, tip] of Object.entries(c.agents)) {
      if (agent === caller) continue;
      if (!agentPaths.has(tip)) agentPaths.set(tip, pathTo(tip));  // once per tip, not per call
      const path = agentPaths.get(tip);
      if (agent.endsWith(b.id.slice(-8))) return { agent, path };
      const first = path.map((id) => byId.get(id)).find((n) => n.r === "user");
      if (first && first.b.map((x) => x.x || "").join("\n").trim() === prompt) return { agent, path };
    }
    return null;
  }

  function subagentElement(sub) {  // drawn when opened: a subagent can run to thousands of messages
    const body = el("div", "subagent-body");
    const d = collapsible("subagent " + (sub.name ? sub.name + " [" + sub.agent + "]" : sub.agent) + " (" + sub.path.length + " messages)", body, false, "subagent");
    d.addEventListener("toggle", () => {
      if (!d.open || body.childElementCount) return;
      const results = resultsOf(sub.path);
      for (const id of sub.path) body.appendChild(messageElement(byId.get(id), undefined, results, "submsg"));
    });
    return d;
  }

  function resultElement(b, under) {
    const body = el("div");
    body.appendChild(el("pre", "", b.x));
    for (const key of b.imgs) body.appendChild(image(key));
    const what = (b.e ? "error result" : under ? "result" : "tool result") + (under ? "" : " (" + callId(b.id) + ")");
    return collapsible(what + ", " + lineCount(b.x) + " lines" + (b.imgs.length ? ", " + b.imgs.length + " image(s)" : ""),
      body, false, "result" + (b.e ? " error" : ""));
  }

  // Markdown as elements whose text is set with textContent: fences, headings, lists,
  // paragraphs; inline code, bold, italic, http(s) links. No HTML in the text is parsed.
  const LIST_ITEM = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;
  function markdown(text) {
    const box = el("div", "text md");
    const lines = text.split("\n");
    let para = [];
    const flush = () => { if (para.length) { const p = el("p"); inline(p, para.join("\n")); box.appendChild(p); para = []; } };
    for (let i = 0; i < lines.length;) {
      const line = lines[i];
      const fence = line.match(/^\s*(```|~~~)/);
      if (fence) {
        flush();
        const code = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
        box.appendChild(el("pre", "code", code.join("\n")));
        i++;
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      if (heading) { flush(); const h = el("h" + Math.min(6, heading[1].length + 2)); inline(h, heading[2]); box.appendChild(h); i++; continue; }
      if (LIST_ITEM.test(line)) {
        flush();
        // Nested by indentation: a deeper item opens a list inside the item before it; an
        // ordered list keeps the number it starts at.
        const stack = [];  // [indent, list element]
        for (let m; i < lines.length && (m = lines[i].match(LIST_ITEM)); i++) {
          const indent = m[1].length, ordered = /\d/.test(m[2]);
          while (stack.length && stack[stack.length - 1][0] > indent) stack.pop();
          const top = stack[stack.length - 1];
          if (!top || top[0] < indent || (top[1].tagName === "OL") !== ordered) {
            if (top && top[0] === indent) stack.pop();
            const list = el(ordered ? "ol" : "ul");
            const number = parseInt(m[2], 10);
            if (ordered && number !== 1) list.start = number;
            const parent = stack.length ? stack[stack.length - 1][1].lastElementChild || stack[stack.length - 1][1] : box;
            parent.appendChild(list);
            stack.push([indent, list]);
          }
          const item = el("li");
          inline(item, m[3]);
          stack[stack.length - 1][1].appendChild(item);
        }
        continue;
      }
      if (!line.trim()) flush(); else para.push(line);
      i++;
    }
    flush();
    return box;
  }
  // Inline spans found in one pass over the text: the spans of
  //   (`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s][^*\n]*\*)|(\[([^\]\n]+)\]\((https?:\/\/[^)\s]+)\))
  // leftmost first, without the backtracking that pattern does on an opener with no
  // closer (a message of 200,000 '[' took 41 s): each position looks up the next
  // closer in tables made once, so drawing is linear in the text's length.
  function nextOf(text, test) {
    const next = new Int32Array(text.length + 2).fill(text.length);
    for (let i = text.length - 1; i >= 0; i--) next[i] = test(text[i]) ? i : next[i + 1];
    return next;
  }
  const isSpace = c => /\s/.test(c);
  function inlineSpans(text) {
    const n = text.length;
    const newline = nextOf(text, c => c === "\n"), tick = nextOf(text, c => c === "`"), star = nextOf(text, c => c === "*");
    const close = nextOf(text, c => c === "]"), paren = nextOf(text, c => c === ")"), space = nextOf(text, isSpace);
    const spans = [];
    for (let i = 0; i < n;) {
      const c = text[i], eol = newline[i];
      let span = null;
      if (c === "`") {
        const j = tick[i + 1];
        if (j > i + 1 && j < eol) span = { kind: "code", end: j + 1, text: text.slice(i + 1, j) };
      } else if (c === "*" && text[i + 1] === "*") {
        const j = star[i + 2];
        if (j > i + 2 && j < eol && text[j + 1] === "*") span = { kind: "strong", end: j + 2, text: text.slice(i + 2, j) };
      } else if (c === "*" && i + 1 < n && !isSpace(text[i + 1])) {
        const j = star[i + 1];
        if (j < eol) span = { kind: "em", end: j + 1, text: text.slice(i + 1, j) };
      } else if (c === "[") {
        const k = close[i + 1];
        const scheme = text.startsWith("(https://", k + 1) ? 9 : text.startsWith("(http://", k + 1) ? 8 : 0;
        if (k > i + 1 && k < eol && scheme) {
          const m = paren[k + scheme];
          if (m > k + 1 + scheme && m < n && space[k + 2] > m) span = { kind: "link", end: m + 1, text: text.slice(i + 1, k), href: text.slice(k + 2, m) };
        }
      }
      if (span) { span.start = i; spans.push(span); i = span.end; } else i++;
    }
    return spans;
  }
  function inline(parent, text) {
    let last = 0;
    for (const s of inlineSpans(text)) {
      if (s.start > last) parent.appendChild(document.createTextNode(text.slice(last, s.start)));
      if (s.kind === "link") { const a = el("a", "", s.text); a.href = s.href; a.rel = "noopener noreferrer"; a.target = "_blank"; parent.appendChild(a); }
      else parent.appendChild(el(s.kind, "", s.text));
      last = s.end;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function collapsible(title, body, open, cls) {
    const d = el("details", cls || "");
    d.open = !!open;
    d.appendChild(el("summary", "", title));
    d.appendChild(body);
    return d;
  }

  // What a harness wraps around the conversation, shown as such (folded), not as the user's words.
  const HARNESS_TEXT = [
    [/^\s*(<system-reminder>[\s\S]*?<\/system-reminder>\s*)+$/, "system reminder (from the harness)"],
    [/^x-anthropic-billing-header:/, "billing header (from the harness)"],
  ];

  function blockElement(b, role) {
    if (b.k === "text") {
      const harness = HARNESS_TEXT.find(([pattern]) => pattern.test(b.x));
      if (harness) return collapsible(harness[1], el("pre", "", b.x), false, "reminder");
      return role === "user" || role === "assistant" ? markdown(b.x) : el("div", "text", b.x);
    }
    if (b.k === "image") return b.i ? image(b.i) : el("div", "text", "[image: " + b.ref + "]");
    if (b.k === "result") return resultElement(b, false);
    if (b.k === "thinking") return collapsible("thinking", el("pre", "", b.x), false, "thinking");
    return el("div", "text", "[" + (b.n || b.k) + ": kept, not shown]");
  }

  function compactionElement(c) {
    const box = el("div", "compaction");
    box.id = "compaction-" + c.conv + "-" + c.agent + "-" + c.n;
    box.appendChild(el("div", "title", "compaction " + c.n + " (" + c.trigger + ")" + (c.shape ? ": pages in " + c.shape : "")));
    box.appendChild(el("div", "text", c.report));
    const stubs = (s) => s.elided + " elision stub(s)" + (s.dropped ? ", " + s.dropped + " dropped image(s)" : "");
    box.appendChild(el("div", "text counts-sent", "sent as text: " + c.verbatim + " message(s) verbatim, " + c.elided.length +
      " with stubs (marked above): " + stubs(c.stubs_sent)));
    if (c.pages.length) {
      box.appendChild(el("div", "text counts-pages", c.pages.length + " page(s) drawing " + c.page_text.length.toLocaleString("en") +
        " characters: " + stubs(c.stubs_on_pages)));
      const pages = el("div");
      for (const key of c.pages) pages.appendChild(image(key));
      box.appendChild(collapsible(c.pages.length + " snapshot page(s)", pages, true, "pages"));
      if (c.page_text) box.appendChild(collapsible("the text the pages draw, exactly", el("pre", "", c.page_text), false, "page-text"));
    }
    for (const note of c.notes) if (note) box.appendChild(collapsible("text sent with them", el("pre", "", note), false, "note"));
    if (c.refs.length) {
      const refs = el("pre", "", c.refs.map((r) => "ref " + JSON.stringify(r)).join("\n"));
      box.appendChild(collapsible(c.refs.length + " ref(s) recall brings back (glyphpack recall WS CONV REF)", refs, false, "refs"));
    }
    if (c.source) {
      const ids = pathTo(c.source[1]);
      const from = ids.indexOf(c.source[0]);
      const source = el("div");
      for (const id of ids.slice(Math.max(0, from))) {
        const n = byId.get(id);
        const text = n.b.map((b) => b.x !== undefined ? b.x : b.k === "call" ? b.n + " " + b.a : "").join("\n");
        source.appendChild(el("pre", "", n.r + " [" + shortId(id) + "]\n" + text));
      }
      box.appendChild(collapsible("the stored messages they stand for (" + ids.slice(Math.max(0, from)).length + ", in full: recall brings each back)", source, false, "source"));
    }
    return box;
  }

  function scrollToMessage(id) {
    let target = document.getElementById("m-" + id);
    while (target && target.classList.contains("folded") && target.previousElementSibling) target = target.previousElementSibling;  // its results sit under the calls above
    if (!target) return;
    document.querySelectorAll(".msg.target").forEach((e) => e.classList.remove("target"));
    target.classList.add("target");
    target.scrollIntoView({ block: "start" });
    state.focus = state.path.indexOf(id);
  }

  // ------------------------------------------------------------------ search
  // Each word found is marked where it is (<mark class="find">); what a search opened to
  // show a hit is folded again when the search changes or is cleared.
  function unmark() {
    for (const mark of document.querySelectorAll("#transcript mark.find")) {
      const parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    }
    for (const d of state.opened || []) d.open = false;
    state.opened = [];
  }
  function markIn(root, q) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const found = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) if (node.nodeValue.toLowerCase().includes(q)) found.push(node);
    for (const node of found) {
      const text = node.nodeValue, lower = text.toLowerCase(), parts = document.createDocumentFragment();
      let at = 0;
      for (let k = lower.indexOf(q); k >= 0; k = lower.indexOf(q, k + q.length)) {
        parts.appendChild(document.createTextNode(text.slice(at, k)));
        parts.appendChild(el("mark", "find", text.slice(k, k + q.length)));
        at = k + q.length;
      }
      parts.appendChild(document.createTextNode(text.slice(at)));
      node.parentNode.replaceChild(parts, node);
    }
  }
  function runSearch() {
    const q = $("search").value.trim().toLowerCase();
    state.hits = [];
    state.hit = -1;
    unmark();
    document.querySelectorAll(".hit").forEach((e) => e.classList.remove("hit"));
    if (!q) { $("hits").textContent = ""; return; }
    for (const m of document.querySelectorAll("#transcript .msg")) {
      if (!m.textContent.toLowerCase().includes(q)) continue;
      m.classList.add("hit");
      state.hits.push(m);
      // open what holds it: a collapsed call, result or thinking (and fold it again after)
      for (const d of m.querySelectorAll("details")) {
        if (!d.open && d.textContent.toLowerCase().includes(q)) { d.open = true; state.opened.push(d); }
      }
      markIn(m, q);
    }
    let inTree = 0;
    const matches = (id) => byId.get(id).b.map((b) => (b.x || "") + " " + (b.a || "") + " " + (b.n || "")).join(" ").toLowerCase().includes(q);
    for (const row of document.querySelectorAll("#tree .node")) {
      if (row.dataset.id && matches(row.dataset.id)) { row.classList.add("hit"); inTree++; }
      if (row.dataset.run) {  // a folded run: its hits counted on its row
        const start = byId.get(row.dataset.run);
        let n = 0, id = start.id;
        for (let i = 0; i < Number(row.dataset.count); i++, id = childrenOf(id, start.c)[0]) if (matches(id)) n++;
        if (n) { row.classList.add("hit"); row.title = n + " hit(s) inside"; inTree += n; }
      }
    }
    $("hits").textContent = state.hits.length + " in this path, " + inTree + " in the tree";
  }
  $("search").addEventListener("input", runSearch);
  $("search").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && state.hits.length) {
      state.hit = (state.hit + (e.shiftKey ? state.hits.length - 1 : 1)) % state.hits.length;
      document.querySelectorAll(".msg.current-hit").forEach((m) => m.classList.remove("current-hit"));
      state.hits[state.hit].classList.add("current-hit");
      state.hits[state.hit].scrollIntoView({ block: "center" });
    } else if (e.key === "Escape") { e.target.blur(); }
  });

  // ------------------------------------------------------------------ keys
  function focusMessage(index) {
    const all = document.querySelectorAll("#transcript .msg:not(.folded)");
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
  window.glyphpackNavigator = { ready: true, ms: performance.now() - started, sinceNavigation: performance.now(), state, inlineSpans };
})();
