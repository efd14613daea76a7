// attention_ref.viewer: makes one view live. The view's own <script> runs this; the view is
// the script's parent element (document.currentScript), so several views live on one page.
(function () {
  "use strict";
  const root = document.currentScript && document.currentScript.parentElement;
  if (!root || root.dataset.live === "yes") {
    return;
  }
  root.dataset.live = "yes";
  const data = JSON.parse(root.querySelector("script.av-data").textContent);
  const queries = Array.from(root.querySelectorAll(".av-query"));
  const layers = Array.from(root.querySelectorAll(".av-layer"));
  const rows = Array.from(root.querySelectorAll(".av-table tbody tr")).map(
    (tr) => Array.from(tr.querySelectorAll("td")));
  const status = root.querySelector(".av-status");
  const scroller = root.querySelector(".av-scroll");
  const DARK = [8, 48, 107];
  let layer = 0;
  let query = 0;

  // White to dark blue, and black or white text, whichever keeps 4.5:1 (as viewer.shade).
  function shade(weight) {
    const w = Math.min(Math.max(weight, 0), 1);
    const rgb = DARK.map((d) => Math.round(255 + (d - 255) * w));
    const linear = rgb.map((c) => {
      const s = c / 255;
      return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
    });
    const luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
    return ["rgb(" + rgb.join(", ") + ")", luminance >= 0.179 ? "#000000" : "#ffffff"];
  }

  function describe() {
    const heads = data.weights[layer].map((head, h) => {
      const row = head[query];
      const best = row.indexOf(Math.max.apply(null, row));
      return "head " + (h + 1) + " on key " + best + " \u201c" + data.keys[best] + "\u201d (" +
        Math.round(row[best] * 100) + "%)";
    });
    return data.layers[layer] + ", query " + query + " \u201c" + data.queries[query] +
      "\u201d attends most: " + heads.join("; ") + ".";
  }

  function render() {
    rows.forEach((cells, h) => {
      const row = data.weights[layer][h][query];
      cells.forEach((cell, k) => {
        const colours = shade(row[k]);
        cell.dataset.weight = String(row[k]);
        cell.textContent = String(Math.round(row[k] * 100));
        cell.style.background = colours[0];
        cell.style.color = colours[1];
      });
    });
    queries.forEach((button, q) => {
      button.setAttribute("aria-pressed", String(q === query));
      button.tabIndex = q === query ? 0 : -1;
    });
    layers.forEach((button, l) => button.setAttribute("aria-pressed", String(l === layer)));
    status.textContent = describe();
    follow();
  }

  // A table wider than its box scrolls to the chosen query's own key (self-attention: the
  // diagonal, where a late query's recent keys are), else to the key it weighs most; only
  // sideways, and only when that column is out of sight.
  function follow() {
    if (!scroller || !rows.length || scroller.scrollWidth <= scroller.clientWidth) {
      return;
    }
    const selfAttention = data.keys.length === data.queries.length;
    let column = selfAttention ? query : 0;
    if (!selfAttention) {
      const totals = data.keys.map((_, k) =>
        data.weights[layer].reduce((sum, head) => sum + head[query][k], 0));
      column = totals.indexOf(Math.max.apply(null, totals));
    }
    const cell = rows[0][column];
    const left = cell.getBoundingClientRect().left - scroller.getBoundingClientRect().left +
      scroller.scrollLeft;
    const right = left + cell.offsetWidth;
    if (left < scroller.scrollLeft || right > scroller.scrollLeft + scroller.clientWidth) {
      scroller.scrollLeft = Math.max(0, right - scroller.clientWidth / 2);
    }
  }

  function choose(q) {
    if (q !== query) {
      query = q;
      render();
    }
  }

  const KEYS = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1};
  queries.forEach((button, q) => {
    button.addEventListener("mouseenter", () => choose(q));
    button.addEventListener("focus", () => choose(q));
    button.addEventListener("click", () => choose(q));
    button.addEventListener("keydown", (event) => {
      let next = null;
      if (event.key in KEYS) {
        next = (q + KEYS[event.key] + queries.length) % queries.length;
      } else if (event.key === "Home") {
        next = 0;
      } else if (event.key === "End") {
        next = queries.length - 1;
      }
      if (next !== null) {
        event.preventDefault();
        queries[next].focus();
      }
    });
  });
  layers.forEach((button, l) => {
    button.addEventListener("click", () => {
      layer = l;
      render();
    });
  });
  render();
})();
