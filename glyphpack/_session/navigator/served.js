// On a page glyphpack serve serves: each ref a stub or a note names (ref "...") gets a
// button that asks this page's server what the ref stands for (glyphpack recall) and
// shows it under the text, exactly. Text reaches the DOM through textContent only.
(function () {
  "use strict";
  const REF = /ref ("(?:[^"\\]|\\.)*")/g;
  const box = document.getElementById("transcript");
  const nav = window.glyphpackNavigator;

  function refsIn(text) {
    const refs = [];
    for (const match of text.matchAll(REF)) {
      try { refs.push(JSON.parse(match[1])); } catch (e) { /* not a ref JSON wrote */ }
    }
    return refs;
  }

  function recallButton(ref) {
    const button = document.createElement("button");
    button.className = "recall";
    button.type = "button";
    button.dataset.ref = ref;
    button.textContent = "recall " + ref;
    button.addEventListener("click", async () => {
      const state = nav.state;
      const agent = state.agent || "main";
      const url = "/api/recall/" + encodeURIComponent(state.conv) + "/" + encodeURIComponent(agent) + "?ref=" + encodeURIComponent(ref);
      let shown = button.nextElementSibling;
      if (!shown || !shown.classList.contains("recalled")) {
        shown = document.createElement("pre");
        shown.className = "recalled";
        button.after(shown);
      }
      shown.textContent = "recalling…";
      try {
        const answer = await (await fetch(url)).json();
        shown.textContent = answer.text !== undefined ? answer.text : answer.error;
        shown.classList.toggle("error", Boolean(answer.error));
      } catch (error) {
        shown.textContent = "the server did not answer: " + error;
        shown.classList.add("error");
      }
    });
    return button;
  }

  function decorate(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const holders = new Set();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || parent.closest(".recall, .recalled, .recalls") || !node.data.includes("ref \"")) continue;
      holders.add(parent);
    }
    for (const holder of holders) {
      if (holder.dataset.recalls) continue;
      const refs = [...new Set(refsIn(holder.textContent))];
      if (!refs.length) continue;
      holder.dataset.recalls = "1";
      const row = document.createElement("div");
      row.className = "recalls";
      for (const ref of refs) row.appendChild(recallButton(ref));
      holder.after(row);
    }
  }

  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (node.nodeType === 1 && !node.matches(".recall, .recalled, .recalls")) decorate(node);
      }
    }
  }).observe(box, { childList: true, subtree: true });
  decorate(box);
  nav.served = true;
})();
