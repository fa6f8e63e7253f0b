// The Q/K/V explorer of chapter 2: the browser half of lib/widgets/attention_explorer.py::AttentionExplorer.
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
// Accessibility (issue 15): every input has a name (matrix entries "Q row 0, column 1";
// the check boxes and the temperature by their labels; shape buttons by what they do);
// the Tab key walks the controls, the shape buttons and then Q, K and V row by row;
// each change is announced through a polite live region; the heatmaps are tables with
// row and column headers; text on every cell colour is black or white, whichever
// contrasts more (at least 4.5:1), and the strongest key is marked by a frame, bold
// digits and the word "max", not by colour alone.
//
// Shapes: Q is (m, d_k), K is (n, d_k), V is (n, d_v). The buttons that change a
// shape change every matrix involved in ONE model update (K and V together for n,
// Q and K together for d_k), and a model whose matrices disagree (which a kernel
// sending them in separate messages could produce) is never drawn: the explorer
// keeps showing the last consistent inputs with their outputs and says, in its
// error line, what it received. Errors the kernel reports (the synced `error`
// trait) and invalid entries typed here appear in the same line.
//
// DOM contract (a browser test relies on it):
//   root                .qkv-explorer
//   matrix entries      <input type="number" data-matrix="Q|K|V" data-row="i" data-col="j">
//   controls            <input type="checkbox" data-control="scale">, data-control="causal",
//                       <input type="number" data-control="temperature">
//   heatmap cells       data-output="scores|weights|output" data-row data-col
//                       data-value = full-precision number ("" for a masked score),
//                       text = the number rounded to 3 decimals
//   shape buttons       <button data-shape="m+|m-|n+|n-|dk+|dk-|dv+|dv-">
//   matrix captions     <caption data-shape-of="Q|K|V">Q (3×2)</caption>
//   error line          .qkv-error (role="alert"), empty and hidden when all is well
//   announcements       .qkv-status (role="status", aria-live="polite"): after each change,
//                       what changed and which key each query now weighs most
//   strongest key       td.qkv-top[data-argmax="true"]: a bold frame, bold digits and a "max" mark
//   root.qkvModel       the widget's model (for tests and debugging in the console)

const MATRICES = [
  ["Q", "q", "queries: what each position looks for"],
  ["K", "k", "keys: what each position offers"],
  ["V", "v", "values: what each position passes on"],
];
const INPUT_NAMES = ["q", "k", "v", "scale", "causal", "temperature"];
const MAX_SIZE = 8; // largest m, n, d_k, d_v the shape buttons allow
const DEFAULTS = {
  q: [[1, 0], [0, 1], [1, 1]],
  k: [[1, 1], [0, 1], [1, 0]],
  v: [[0, 2], [1, 1], [2, 0]],
  scale: true,
  causal: false,
  temperature: 1.0,
};
// Ties: the lowest key index within this distance of the row's largest weight
// (lib/widgets/attention_explorer.py uses the same rule), so both sides agree despite rounding.
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
.qkv-explorer td[data-output].qkv-masked { background: #eee; color: #555; }
.qkv-explorer td[data-output].qkv-top { outline: 3px solid #111; outline-offset: -3px; font-weight: 700; }
.qkv-explorer .qkv-max { display: block; font-size: 10px; font-weight: 700; letter-spacing: 0.05em; }
.qkv-explorer input:focus-visible, .qkv-explorer button:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
.qkv-explorer .qkv-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px;
  overflow: hidden; clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
.qkv-explorer .qkv-invalid { outline: 2px solid #c00; }
.qkv-explorer .qkv-summary { margin: 4px 0 0 0; padding-left: 18px; }
.qkv-explorer .qkv-note { color: #555; font-size: 12px; }
.qkv-explorer .qkv-shape button { font-size: 12px; padding: 0 6px; margin: 0 1px; }
.qkv-explorer .qkv-error { color: #b00; font-weight: 600; margin: 4px 0; white-space: pre-wrap; }
.qkv-explorer .qkv-error:empty { display: none; }
`;

function copyMatrix(a) {
  return a.map((row) => row.slice());
}

/** The explorer's formula; the same definition as lib/widgets/attention_explorer.py::explorer_values. */
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
  for (const name of ["q", "k", "v"]) {
    state[name] = Array.isArray(state[name]) ? state[name].map((row) => (Array.isArray(row) ? row.slice() : row)) : [];
  }
  return state;
}

function shapeOf(a) {
  return Array.isArray(a) && a.length && Array.isArray(a[0]) ? `(${a.length}×${a[0].length})` : "(?)";
}

// Every dimension: m, width of Q, n of K, width of K, n of V, d_v.
function shapeKey(state) {
  const width = (a) => (Array.isArray(a) && Array.isArray(a[0]) ? a[0].length : -1);
  return [state.q.length, width(state.q), state.k.length, width(state.k), state.v.length, width(state.v)].join("x");
}

// null if Q, K, V can be combined; otherwise what is wrong with them.
function shapeProblem(state) {
  for (const [label, name] of MATRICES) {
    const a = state[name];
    if (!Array.isArray(a) || !a.length || !a.every((row) => Array.isArray(row) && row.length === a[0].length && row.length > 0)) {
      return `${label} is not a non-empty rectangular matrix`;
    }
    if (!a.every((row) => row.every((x) => typeof x === "number" && Number.isFinite(x)))) {
      return `${label} has an entry that is not a finite number`;
    }
  }
  if (state.q[0].length !== state.k[0].length) {
    return `Q ${shapeOf(state.q)} and K ${shapeOf(state.k)} must have the same width d_k`;
  }
  if (state.k.length !== state.v.length) {
    return `K ${shapeOf(state.k)} and V ${shapeOf(state.v)} must have the same number of rows n`;
  }
  return null;
}

// WCAG relative luminance of an sRGB colour [r, g, b] (0..255).
function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const x = c / 255;
    return x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

// Background colour of a heatmap cell: weights from white to blue (0..1);
// scores and outputs diverging (blue negative, red positive) relative to maxAbs.
// The text is black or white, whichever contrasts more with the background: for any
// background one of them reaches at least 4.58:1 (WCAG AA asks 4.5:1).
function cellColour(kind, x, maxAbs) {
  const t = kind === "weights" ? Math.min(Math.max(x, 0), 1) : maxAbs > 0 ? Math.abs(x) / maxAbs : 0;
  const target = kind === "weights" || x < 0 ? [33, 102, 172] : [178, 24, 43];
  const mix = target.map((c) => Math.round(255 + (c - 255) * t));
  const L = luminance(mix);
  const onWhite = 1.05 / (L + 0.05);
  const onBlack = (L + 0.05) / 0.05;
  return { background: `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`, text: onWhite >= onBlack ? "#fff" : "#000" };
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== null) node.textContent = text;
  return node;
}

function render({ model, el: host }) {
  // `state` is what is drawn: always a consistent set of inputs. The model may
  // briefly hold matrices whose shapes disagree; then `modelProblem` says how.
  let state = readState(model);
  let modelProblem = shapeProblem(state);
  if (modelProblem) state = readState({ get: (name) => DEFAULTS[name] });
  let entryProblem = null; // an invalid entry typed into this view
  const root = el("div", { class: "qkv-explorer" });
  root.qkvModel = model;
  host.appendChild(root);

  // The live region: after a change, say what changed and which key each query now
  // weighs most. Waits until typing pauses, so a screen reader hears one message.
  let announceTimer = null;
  let announceWhat = [];
  function announce(what) {
    if (what) announceWhat.push(what);
    clearTimeout(announceTimer);
    announceTimer = setTimeout(() => {
      const status = root.querySelector(".qkv-status");
      if (!status) return;
      const result = computeAttention(state.q, state.k, state.v, state.scale, state.causal, state.temperature);
      const lines = result.argmax.map((j, i) =>
        j < 0 ? `query ${i} sees no key` : `query ${i} weighs key ${j} most, ${fmt(result.weights[i][j])}`);
      const changed = announceWhat.length ? [...new Set(announceWhat)].join(", ") + ". " : "";
      status.textContent = `${changed}${lines.join("; ")}.`;
      announceWhat = [];
    }, 600);
  }
  function describeChange(changes) {
    const parts = [];
    for (const [name, value] of Object.entries(changes)) {
      if (name === "scale") parts.push(`divide by square root of d_k ${value ? "on" : "off"}`);
      else if (name === "causal") parts.push(`causal mask ${value ? "on" : "off"}`);
      else if (name === "temperature") parts.push(`temperature ${value}`);
    }
    const shape = { q: "Q", k: "K", v: "V" };
    const matrices = Object.keys(changes).filter((name) => name in shape);
    if (matrices.length) {
      parts.push(matrices.map((name) => `${shape[name]} is now ${changes[name].length} by ${changes[name][0].length}`).join(", "));
    }
    return parts.join(", ");
  }

  // Send edits to the model, all in one update. In Jupyter, Python recomputes
  // with lib; in the static book there is no kernel, save_changes may throw,
  // and we carry on.
  function pushMany(changes, what = null) {
    const reshape = Object.keys(changes).some((name) => ["q", "k", "v"].includes(name)) &&
      shapeKey({ ...state, ...changes }) !== shapeKey(state);
    Object.assign(state, changes);
    modelProblem = null;
    if (reshape) build();
    else update();
    announce(what === null ? describeChange(changes) : what);
    try {
      model.set(changes);
      model.save_changes();
    } catch (err) {
      // static page: no comm to a kernel; the display above is already up to date
    }
  }
  function push(name, value, what = null) {
    pushMany({ [name]: value }, what);
  }

  // The shape buttons: one more or one fewer query (m), key (n, in K and V),
  // column of Q and K (d_k) or column of V (d_v). New entries start at 0.
  function reshaped(kind, grow) {
    const addRow = (a) => (grow ? [...copyMatrix(a), new Array(a[0].length).fill(0)] : copyMatrix(a).slice(0, -1));
    const addCol = (a) => copyMatrix(a).map((row) => (grow ? [...row, 0] : row.slice(0, -1)));
    if (kind === "m") return { q: addRow(state.q) };
    if (kind === "n") return { k: addRow(state.k), v: addRow(state.v) };
    if (kind === "dk") return { q: addCol(state.q), k: addCol(state.k) };
    return { v: addCol(state.v) };
  }
  function size(kind) {
    return { m: state.q.length, n: state.k.length, dk: state.q[0].length, dv: state.v[0].length }[kind];
  }
  function shapeControls() {
    const box = el("div", { class: "qkv-row qkv-shape" });
    for (const [kind, label, title] of [
      ["m", "queries m", "a query: a row of Q"],
      ["n", "keys n", "a key: a row of K and of V"],
      ["dk", "d_k", "a column of Q and of K"],
      ["dv", "d_v", "a column of V"],
    ]) {
      const group = el("span", { role: "group", "aria-label": label }, `${label} `);
      for (const [sign, grow] of [["-", false], ["+", true]]) {
        const what = `${grow ? "add" : "remove"} ${title}`;
        const button = el("button", { type: "button", "data-shape": kind + sign, title: what, "aria-label": what },
          grow ? "+" : "−");
        button.disabled = grow ? size(kind) >= MAX_SIZE : size(kind) <= 1;
        button.addEventListener("click", () => {
          if (grow ? size(kind) < MAX_SIZE : size(kind) > 1) pushMany(reshaped(kind, grow));
          // Rebuilding replaced the button: keep the keyboard focus on its successor
          // (or on the other button of the pair, once this one is disabled).
          const again = root.querySelector(`button[data-shape="${kind + sign}"]`);
          const other = root.querySelector(`button[data-shape="${kind + (grow ? "-" : "+")}"]`);
          if (again && !again.disabled) again.focus();
          else if (other) other.focus();
        });
        group.appendChild(button);
      }
      box.appendChild(group);
    }
    return box;
  }

  function showErrors() {
    const line = root.querySelector(".qkv-error");
    if (!line) return;
    const kernel = model.get("error");
    const messages = [];
    if (modelProblem) {
      messages.push(`The widget received matrices that do not fit together (${modelProblem}); ` +
        "still showing the last consistent ones.");
    }
    if (entryProblem) messages.push(entryProblem);
    if (kernel) messages.push(String(kernel));
    line.textContent = messages.join("\n");
    root.classList.toggle("qkv-has-error", messages.length > 0);
  }

  function matrixTable(label, name, title) {
    const rows = state[name].length;
    const cols = state[name][0].length;
    const table = el("table", { class: "qkv-matrix", title });
    table.appendChild(el("caption", { "data-shape-of": label }, `${label} (${rows}×${cols})`));
    for (let i = 0; i < rows; i++) {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, `${name}${i}`));
      for (let j = 0; j < cols; j++) {
        const td = el("td");
        const input = el("input", {
          type: "number",
          step: "0.1",
          "data-matrix": label,
          "data-row": String(i),
          "data-col": String(j),
          "aria-label": `${label} row ${i}, column ${j}`,
        });
        input.value = String(state[name][i][j]);
        const onEdit = () => {
          const x = parseFloat(input.value);
          if (!Number.isFinite(x)) {
            input.classList.add("qkv-invalid");
            entryProblem = `${label}[${i}][${j}] must be a number; still using ${state[name][i][j]}`;
            showErrors();
            return;
          }
          input.classList.remove("qkv-invalid");
          if (entryProblem) {
            entryProblem = null;
            showErrors();
          }
          if (x === state[name][i][j]) return;
          const next = copyMatrix(state[name]);
          next[i][j] = x;
          push(name, next, `${label} row ${i}, column ${j} is ${x}`);
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
    head.appendChild(el("td"));
    for (let j = 0; j < cols; j++) head.appendChild(el("th", { scope: "col" }, `${colPrefix}${j}`));
    table.appendChild(head);
    for (let i = 0; i < rows; i++) {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, `${rowPrefix}${i}`));
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
        entryProblem = `the temperature must be a number > 0; still using ${state.temperature}`;
        showErrors();
        return;
      }
      tInput.classList.remove("qkv-invalid");
      tInput.title = "";
      if (entryProblem) {
        entryProblem = null;
        showErrors();
      }
      if (t !== state.temperature) push("temperature", t);
    };
    tInput.addEventListener("input", onTemperature);
    tInput.addEventListener("change", onTemperature);
    tLabel.appendChild(tInput);
    controls.appendChild(tLabel);
    root.appendChild(controls);
    root.appendChild(shapeControls());
    root.appendChild(el("div", { class: "qkv-error", role: "alert" }));
    root.appendChild(el("div", { class: "qkv-status qkv-sr-only", role: "status", "aria-live": "polite", "aria-atomic": "true" }));

    const inputs = el("div", { class: "qkv-row qkv-inputs" });
    for (const [label, name, title] of MATRICES) inputs.appendChild(matrixTable(label, name, title));
    root.appendChild(inputs);

    const maps = el("div", { class: "qkv-row qkv-heatmaps" });
    maps.appendChild(heatmapTable("scores", "scores (logits)", "q", "k", m, n));
    maps.appendChild(heatmapTable("weights", "weights (softmax)", "q", "k", m, n));
    maps.appendChild(heatmapTable("output", "output = weights · V", "q", "d", m, dV));
    root.appendChild(maps);

    root.appendChild(el("ul", { class: "qkv-summary" }));
    root.appendChild(el("p", { class: "qkv-note" }, "A bold frame and the word max mark the key each query weighs most."));
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
    showErrors();
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
        if (top) cell.appendChild(el("span", { class: "qkv-max" }, " max"));
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

  // The model changed (the kernel, or another view of the same widget).
  // Matrices whose shapes disagree are refused: nothing is recomputed from
  // them, the error line says what arrived, and the next consistent update
  // is drawn in full.
  function onModelChange() {
    const fresh = readState(model);
    modelProblem = shapeProblem(fresh);
    if (modelProblem) {
      showErrors();
      return;
    }
    const reshape = shapeKey(fresh) !== shapeKey(state);
    const changed = INPUT_NAMES.some((name) => JSON.stringify(fresh[name]) !== JSON.stringify(state[name]));
    state = fresh;
    if (reshape) build();
    else {
      syncInputs();
      update();
    }
    if (changed) announce(null); // a change from the kernel (this view's own edits are announced already)
  }

  build();
  for (const name of INPUT_NAMES) model.on(`change:${name}`, onModelChange);
  model.on("change:error", showErrors);
  return () => {
    for (const name of INPUT_NAMES) model.off(`change:${name}`, onModelChange);
    model.off("change:error", showErrors);
  };
}

export default { render };
