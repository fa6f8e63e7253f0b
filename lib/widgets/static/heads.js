// The heads explorer of chapter 4: the browser half of lib/widgets/heads.py::HeadsExplorer.
// It computes, in the page, the attention weights of one head of a seeded
// lib.MultiHeadAttention(d_model, n_heads) over the stored sequence x:
//     q = x W_qᵀ + b_q,  k = x W_kᵀ + b_k   (the layer's projections, stored per n_heads)
//     head h uses features h·d_k .. (h+1)·d_k - 1, d_k = d_model / n_heads
//     weights = softmax_rows(q_h k_hᵀ / √d_k)
// and draws them as a table whose cells are shaded (no kernel needed, no network).
//
// Accessibility: a labelled select (number of heads) and a labelled slider (head); the
// heatmap is a table with row and column headers and every weight as text, the largest of
// each row marked by a frame, bold digits and the word "max"; a polite live region
// says which key each query weighs most after each change.
//
// DOM contract (tests/browser/test_site.py):
//   root          .heads-explorer
//   controls      select[data-control="n_heads"], input[type=range][data-control="head"]
//   heatmap       td[data-output="weights"][data-row][data-col][data-value]
//   title         [data-output="title"]
//   announcements .he-status (role="status")

const STYLE = `
.heads-explorer { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.3; }
.heads-explorer .he-controls { display: flex; flex-wrap: wrap; gap: 16px; align-items: center; margin: 6px 0; }
.heads-explorer input[type="range"] { min-height: 24px; vertical-align: middle; }
.heads-explorer select { min-height: 28px; }
.heads-explorer input:focus-visible, .heads-explorer select:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
.heads-explorer table { border-collapse: collapse; }
.heads-explorer caption { font-weight: 600; text-align: left; padding-bottom: 4px; }
.heads-explorer th { font-weight: normal; color: #444; padding: 2px 5px; font-size: 12px; }
.heads-explorer td[data-output] { min-width: 3.2em; padding: 5px 4px; text-align: center; border: 1px solid #ddd;
  font-variant-numeric: tabular-nums; font-size: 13px; }
.heads-explorer td.he-top { outline: 3px solid #111; outline-offset: -3px; font-weight: 700; }
.heads-explorer .he-max { display: block; font-size: 10px; font-weight: 700; }
.heads-explorer .he-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
.heads-explorer .he-note { color: #555; font-size: 12px; }
`;

function project(x, W, b) {
  return x.map((row) => W.map((wRow, o) => {
    let s = b[o];
    for (let i = 0; i < row.length; i++) s += wRow[i] * row[i];
    return s;
  }));
}

/** The weights (n × n) of head `head` of `nHeads`, from x (n × d) and the layer's projections. */
export function headWeights(x, proj, nHeads, head) {
  const d = x[0].length;
  const dk = d / nHeads;
  const q = project(x, proj.wq, proj.bq);
  const k = project(x, proj.wk, proj.bk);
  const off = head * dk;
  return q.map((qi) => {
    const s = k.map((kj) => {
      let dot = 0;
      for (let c = 0; c < dk; c++) dot += qi[off + c] * kj[off + c];
      return dot / Math.sqrt(dk);
    });
    const max = Math.max(...s);
    const e = s.map((z) => Math.exp(z - max));
    const total = e.reduce((a, b) => a + b, 0);
    return e.map((z) => z / total);
  });
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const x = c / 255;
    return x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function shade(v) {
  const t = Math.min(Math.max(v, 0), 1);
  const mix = [33, 102, 172].map((c) => Math.round(255 + (c - 255) * t));
  const L = luminance(mix);
  return { background: `rgb(${mix.join(", ")})`, text: 1.05 / (L + 0.05) >= (L + 0.05) / 0.05 ? "#fff" : "#000" };
}

let counter = 0;

function render({ model, el: host }) {
  const id = `he-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const tokens = model.get("tokens");
  const x = model.get("x");
  const projections = model.get("projections");
  const choices = model.get("choices");
  const state = { n_heads: model.get("n_heads"), head: model.get("head") };
  const root = el("div", { class: "heads-explorer" });
  root.heModel = model;
  root.heWeights = (n, h) => headWeights(x, projections[String(n)], n, h);
  host.appendChild(root);
  root.appendChild(el("style", {}, STYLE));
  const controls = el("div", { class: "he-controls" });
  const nLabel = el("label", { for: `${id}-n` }, "number of heads ");
  const select = el("select", { id: `${id}-n`, "data-control": "n_heads" });
  for (const h of choices) select.appendChild(el("option", { value: String(h) }, String(h)));
  select.value = String(state.n_heads);
  nLabel.appendChild(select);
  controls.appendChild(nLabel);
  const hLabel = el("label", { for: `${id}-h` }, "head ");
  controls.appendChild(hLabel);
  const range = el("input", { type: "range", id: `${id}-h`, "data-control": "head", min: "0", step: "1" });
  controls.appendChild(range);
  const hOut = el("output", { for: `${id}-h` });
  controls.appendChild(hOut);
  root.appendChild(controls);
  const title = el("p", { "data-output": "title" });
  root.appendChild(title);
  const table = el("table", { "data-heatmap": "weights" });
  root.appendChild(table);
  const status = el("div", { class: "he-status he-sr-only", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  root.appendChild(status);
  root.appendChild(el("p", { class: "he-note" },
    "Rows are queries, columns keys; each row sums to 1. Computed in this page from the layer's stored weights. " +
    "A bold frame and the word max mark the key each query weighs most."));

  let weights = null;
  function draw() {
    range.max = String(state.n_heads - 1);
    range.value = String(state.head);
    hOut.textContent = `${state.head} of 0-${state.n_heads - 1}`;
    select.value = String(state.n_heads);
    const dk = x[0].length / state.n_heads;
    title.textContent = `head ${state.head} of ${state.n_heads} (d_k = ${dk})`;
    weights = headWeights(x, projections[String(state.n_heads)], state.n_heads, state.head);
    table.replaceChildren();
    table.appendChild(el("caption", {}, `Attention weights of head ${state.head} of ${state.n_heads}`));
    const head = el("tr");
    head.appendChild(el("td"));
    tokens.forEach((t, j) => head.appendChild(el("th", { scope: "col" }, `${t} (${j})`)));
    table.appendChild(head);
    weights.forEach((row, i) => {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, `${tokens[i]} (${i})`));
      const top = row.indexOf(Math.max(...row));
      row.forEach((w, j) => {
        const c = shade(w);
        const td = el("td", { "data-output": "weights", "data-row": String(i), "data-col": String(j), "data-value": String(w) },
          w.toFixed(2));
        td.style.background = c.background;
        td.style.color = c.text;
        if (j === top) {
          td.classList.add("he-top");
          td.appendChild(el("span", { class: "he-max" }, "max"));
        }
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  let timer = null;
  function announce() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const lines = weights.map((row, i) => {
        const j = row.indexOf(Math.max(...row));
        return `${tokens[i]} weighs ${tokens[j]} most, ${row[j].toFixed(2)}`;
      });
      status.textContent = `Head ${state.head} of ${state.n_heads}: ${lines.join("; ")}.`;
    }, 400);
  }

  function push(changes) {
    Object.assign(state, changes);
    draw();
    announce();
    try {
      model.set(changes);
      model.save_changes();
    } catch (err) {
      // static page: no kernel; the page has redrawn itself
    }
  }
  select.addEventListener("change", () => {
    const n = parseInt(select.value, 10);
    if (n !== state.n_heads) push({ n_heads: n, head: Math.min(state.head, n - 1) });
  });
  range.addEventListener("input", () => {
    const h = parseInt(range.value, 10);
    if (h !== state.head) push({ head: h });
  });
  function onModel() {
    const n = model.get("n_heads");
    const h = Math.min(model.get("head"), n - 1);
    if (n !== state.n_heads || h !== state.head) {
      state.n_heads = n;
      state.head = h;
      draw();
      announce();
    }
  }
  draw();
  model.on("change:n_heads", onModel);
  model.on("change:head", onModel);
  return () => {
    model.off("change:n_heads", onModel);
    model.off("change:head", onModel);
  };
}

export default { render };
