// The Q/K/V explorer of chapter 2: the browser half of lib/widgets.py::AttentionExplorer.
//
// The widget works in two places:
//  * in Jupyter, every edit is sent to Python (model.set + save_changes), where lib
//    recomputes scores, weights, output and argmax;
//  * in the static HTML book there is no kernel, so this file ALWAYS recomputes the
//    same formula itself and draws what it computed:
//        scores  = Q Kᵀ / (√d_k if scale else 1) / temperature   (masked entries: null)
//        weights = softmax over the visible keys of each row (a row with none: zeros)
//        output  = weights · V
// No libraries, no network.
//
// DOM contract (a browser test relies on it):
//   root                .qkv-explorer
//   matrix entries      <input type="number" data-matrix="Q|K|V" data-row="i" data-col="j">
//   controls            <input type="checkbox" data-control="scale">, data-control="causal",
//                       <input type="number" data-control="temperature">
//   heatmap cells       data-output="scores|weights|output" data-row data-col
//                       data-value = full-precision number ("" for a masked score),
//                       text = the number rounded to 3 decimals

const MATRICES = [
  ["Q", "q", "queries: what each position looks for"],
  ["K", "k", "keys: what each position offers"],
  ["V", "v", "values: what each position passes on"],
];
const INPUT_NAMES = ["q", "k", "v", "scale", "causal", "temperature"];
const DEFAULTS = {
  q: [[1, 0], [0, 1], [1, 1]],
  k: [[1, 1], [0, 1], [1, 0]],
  v: [[0, 2], [1, 1], [2, 0]],
  scale: true,
  causal: false,
  temperature: 1.0,
};
// Ties: the lowest key index within this distance of the row's largest weight
// (lib/widgets.py uses the same rule), so both sides agree despite rounding.
const ARGMAX_TOLERANCE = 1e-9;

const STYLE = `
.qkv-explorer { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.3; }
.qkv-explorer .qkv-row { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; margin: 8px 0; }
.qkv-explorer table { border-collapse: collapse; }
.qkv-explorer caption { font-weight: 600; padding-bottom: 4px; text-align: left; white-space: nowrap; }
.qkv-explorer th { font-weight: normal; color: #555; padding: 2px 5px; font-size: 12px; }
.qkv-explorer input[type="number"][data-matrix] { width: 4.2em; }
.qkv-explorer input[data-control="temperature"] { width: 5em; }
.qkv-explorer td[data-output] { min-width: 3.6em; padding: 5px 6px; text-align: center;
  font-variant-numeric: tabular-nums; border: 1px solid #ddd; }
.qkv-explorer td[data-output].qkv-masked { background: #eee; color: #888; }
.qkv-explorer td[data-output].qkv-top { outline: 3px solid #111; outline-offset: -3px; font-weight: 700; }
.qkv-explorer .qkv-invalid { outline: 2px solid #c00; }
.qkv-explorer .qkv-summary { margin: 4px 0 0 0; padding-left: 18px; }
.qkv-explorer .qkv-note { color: #555; font-size: 12px; }
`;

function copyMatrix(a) {
  return a.map((row) => row.slice());
}

/** The explorer's formula; the same definition as lib/widgets.py::explorer_values. */
export function computeAttention(q, k, v, scale, causal, temperature) {
  const m = q.length;
  const n = k.length;
  const dK = q[0].length;
  const dV = v[0].length;
  const divisor = (scale ? Math.sqrt(dK) : 1) * temperature;
  const scores = [];
  const weights = [];
  const output = [];
  const argmax = [];
  for (let i = 0; i < m; i++) {
    const sRow = [];
    for (let j = 0; j < n; j++) {
      if (causal && j > i) {
        sRow.push(null); // query i may not see a later key
        continue;
      }
      let dot = 0;
      for (let c = 0; c < dK; c++) dot += q[i][c] * k[j][c];
      sRow.push(dot / divisor);
    }
    // Numerically stable softmax: subtract the row's largest visible score.
    let max = -Infinity;
    for (const s of sRow) if (s !== null && s > max) max = s;
    const wRow = new Array(n).fill(0);
    if (max > -Infinity) {
      let total = 0;
      for (let j = 0; j < n; j++) {
        if (sRow[j] !== null) {
          wRow[j] = Math.exp(sRow[j] - max);
          total += wRow[j];
        }
      }
      for (let j = 0; j < n; j++) wRow[j] /= total;
    } // else: every key masked, weights stay 0 and so does the output
    const oRow = new Array(dV).fill(0);
    for (let j = 0; j < n; j++) {
      for (let c = 0; c < dV; c++) oRow[c] += wRow[j] * v[j][c];
    }
    const top = Math.max(...wRow);
    argmax.push(top > 0 ? wRow.findIndex((w) => w >= top - ARGMAX_TOLERANCE) : -1);
    scores.push(sRow);
    weights.push(wRow);
    output.push(oRow);
  }
  return { scores, weights, output, argmax };
}

function fmt(x) {
  const s = x.toFixed(3);
  return s === "-0.000" ? "0.000" : s;
}

function readState(model) {
  const state = {};
  for (const name of INPUT_NAMES) {
    const value = model.get(name);
    state[name] = value === undefined || value === null ? DEFAULTS[name] : value;
  }
  state.q = copyMatrix(state.q);
  state.k = copyMatrix(state.k);
  state.v = copyMatrix(state.v);
  return state;
}

function shapeKey(state) {
  return [state.q.length, state.q[0].length, state.k.length, state.v[0].length].join("x");
}

// Background colour of a heatmap cell: weights from white to blue (0..1);
// scores and outputs diverging (blue negative, red positive) relative to maxAbs.
function cellColour(kind, x, maxAbs) {
  const t = kind === "weights" ? Math.min(Math.max(x, 0), 1) : maxAbs > 0 ? Math.abs(x) / maxAbs : 0;
  const target = kind === "weights" || x < 0 ? [33, 102, 172] : [178, 24, 43];
  const mix = target.map((c) => Math.round(255 + (c - 255) * t));
  return { background: `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`, text: t > 0.55 ? "#fff" : "#111" };
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== null) node.textContent = text;
  return node;
}

function render({ model, el: host }) {
  let state = readState(model);
  const root = el("div", { class: "qkv-explorer" });
  host.appendChild(root);

  // Send an edit to the model. In Jupyter, Python recomputes with lib; in the
  // static book there is no kernel, save_changes may throw, and we carry on.
  function push(name, value) {
    state[name] = value;
    update();
    try {
      model.set(name, value);
      model.save_changes();
    } catch (err) {
      // static page: no comm to a kernel; the display above is already up to date
    }
  }

  function matrixTable(label, name, title) {
    const rows = state[name].length;
    const cols = state[name][0].length;
    const table = el("table", { class: "qkv-matrix", title });
    table.appendChild(el("caption", {}, `${label} (${rows}×${cols})`));
    for (let i = 0; i < rows; i++) {
      const tr = el("tr");
      tr.appendChild(el("th", {}, `${name}${i}`));
      for (let j = 0; j < cols; j++) {
        const td = el("td");
        const input = el("input", {
          type: "number",
          step: "0.1",
          "data-matrix": label,
          "data-row": String(i),
          "data-col": String(j),
          "aria-label": `${label}[${i}][${j}]`,
        });
        input.value = String(state[name][i][j]);
        const onEdit = () => {
          const x = parseFloat(input.value);
          if (!Number.isFinite(x)) {
            input.classList.add("qkv-invalid");
            return;
          }
          input.classList.remove("qkv-invalid");
          if (x === state[name][i][j]) return;
          const next = copyMatrix(state[name]);
          next[i][j] = x;
          push(name, next);
        };
        input.addEventListener("input", onEdit);
        input.addEventListener("change", onEdit);
        td.appendChild(input);
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    return table;
  }

  function heatmapTable(kind, caption, rowPrefix, colPrefix, rows, cols) {
    const table = el("table", { class: "qkv-heatmap", "data-heatmap": kind });
    table.appendChild(el("caption", {}, caption));
    const head = el("tr");
    head.appendChild(el("th"));
    for (let j = 0; j < cols; j++) head.appendChild(el("th", {}, `${colPrefix}${j}`));
    table.appendChild(head);
    for (let i = 0; i < rows; i++) {
      const tr = el("tr");
      tr.appendChild(el("th", {}, `${rowPrefix}${i}`));
      for (let j = 0; j < cols; j++) {
        tr.appendChild(el("td", { "data-output": kind, "data-row": String(i), "data-col": String(j), "data-value": "" }));
      }
      table.appendChild(tr);
    }
    return table;
  }

  function checkbox(control, labelHtml) {
    const label = el("label");
    const input = el("input", { type: "checkbox", "data-control": control });
    input.checked = Boolean(state[control]);
    const onToggle = () => {
      if (input.checked !== state[control]) push(control, input.checked);
    };
    input.addEventListener("input", onToggle);
    input.addEventListener("change", onToggle);
    label.appendChild(input);
    const text = el("span");
    text.innerHTML = " " + labelHtml;
    label.appendChild(text);
    return label;
  }

  function build() {
    root.replaceChildren();
    root.appendChild(el("style", {}, STYLE));
    const m = state.q.length;
    const n = state.k.length;
    const dV = state.v[0].length;

    const controls = el("div", { class: "qkv-row qkv-controls" });
    controls.appendChild(checkbox("scale", "divide by √d<sub>k</sub>"));
    controls.appendChild(checkbox("causal", "causal mask (query i sees keys 0..i)"));
    const tLabel = el("label", {}, "temperature ");
    const tInput = el("input", { type: "number", min: "0.05", step: "0.05", "data-control": "temperature" });
    tInput.value = String(state.temperature);
    const onTemperature = () => {
      const t = parseFloat(tInput.value);
      if (!Number.isFinite(t) || t <= 0) {
        tInput.classList.add("qkv-invalid");
        tInput.title = "the temperature must be a number > 0";
        return;
      }
      tInput.classList.remove("qkv-invalid");
      tInput.title = "";
      if (t !== state.temperature) push("temperature", t);
    };
    tInput.addEventListener("input", onTemperature);
    tInput.addEventListener("change", onTemperature);
    tLabel.appendChild(tInput);
    controls.appendChild(tLabel);
    root.appendChild(controls);

    const inputs = el("div", { class: "qkv-row qkv-inputs" });
    for (const [label, name, title] of MATRICES) inputs.appendChild(matrixTable(label, name, title));
    root.appendChild(inputs);

    const maps = el("div", { class: "qkv-row qkv-heatmaps" });
    maps.appendChild(heatmapTable("scores", "scores (logits)", "q", "k", m, n));
    maps.appendChild(heatmapTable("weights", "weights (softmax)", "q", "k", m, n));
    maps.appendChild(heatmapTable("output", "output = weights · V", "q", "d", m, dV));
    root.appendChild(maps);

    root.appendChild(el("ul", { class: "qkv-summary" }));
    root.appendChild(el("p", { class: "qkv-note" }, "A bold frame marks the key each query weighs most."));
    update();
  }

  // Show the model's values in the inputs, except in the one being edited.
  function syncInputs() {
    for (const input of root.querySelectorAll("input[data-matrix]")) {
      const name = input.getAttribute("data-matrix").toLowerCase();
      const value = state[name][Number(input.getAttribute("data-row"))][Number(input.getAttribute("data-col"))];
      if (input !== document.activeElement && parseFloat(input.value) !== value) input.value = String(value);
    }
    for (const control of ["scale", "causal"]) {
      root.querySelector(`input[data-control="${control}"]`).checked = Boolean(state[control]);
    }
    const tInput = root.querySelector('input[data-control="temperature"]');
    if (tInput !== document.activeElement && parseFloat(tInput.value) !== state.temperature) {
      tInput.value = String(state.temperature);
    }
  }

  // Recompute from the current inputs and redraw the three heatmaps.
  function update() {
    const result = computeAttention(state.q, state.k, state.v, state.scale, state.causal, state.temperature);
    for (const kind of ["scores", "weights", "output"]) {
      const matrix = result[kind];
      let maxAbs = 0;
      for (const row of matrix) for (const x of row) if (x !== null) maxAbs = Math.max(maxAbs, Math.abs(x));
      for (const cell of root.querySelectorAll(`td[data-output="${kind}"]`)) {
        const i = Number(cell.getAttribute("data-row"));
        const j = Number(cell.getAttribute("data-col"));
        const x = matrix[i][j];
        const top = kind !== "output" && result.argmax[i] === j;
        cell.classList.toggle("qkv-top", top);
        if (top) cell.setAttribute("data-argmax", "true");
        else cell.removeAttribute("data-argmax");
        if (x === null) {
          cell.setAttribute("data-value", "");
          cell.textContent = "−∞";
          cell.title = "masked: a later key";
          cell.classList.add("qkv-masked");
          cell.style.background = "";
          cell.style.color = "";
          continue;
        }
        const colour = cellColour(kind, x, maxAbs);
        cell.classList.remove("qkv-masked");
        cell.setAttribute("data-value", String(x));
        cell.textContent = fmt(x);
        cell.title = String(x);
        cell.style.background = colour.background;
        cell.style.color = colour.text;
      }
    }
    const list = root.querySelector(".qkv-summary");
    list.replaceChildren();
    result.argmax.forEach((j, i) => {
      const ties = [];
      const top = Math.max(...result.weights[i]);
      result.weights[i].forEach((w, jj) => {
        if (jj !== j && top > 0 && w >= top - ARGMAX_TOLERANCE) ties.push(jj);
      });
      const text =
        j < 0 ? `query ${i} sees no key` : `query ${i} attends most to key ${j}`;
      const item = el("li", { "data-argmax-query": String(i), "data-argmax-key": String(j) }, text);
      if (ties.length) item.appendChild(el("span", { class: "qkv-note" }, ` (tied with key ${ties.join(", ")})`));
      list.appendChild(item);
    });
  }

  function onModelChange() {
    const fresh = readState(model);
    const reshape = shapeKey(fresh) !== shapeKey(state);
    state = fresh;
    if (reshape) build();
    else {
      syncInputs();
      update();
    }
  }

  build();
  for (const name of INPUT_NAMES) model.on(`change:${name}`, onModelChange);
  return () => {
    for (const name of INPUT_NAMES) model.off(`change:${name}`, onModelChange);
  };
}

export default { render };
