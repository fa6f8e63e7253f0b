// The positional-encoding explorer of chapter 6: the browser half of
// lib/widgets/positions.py::PositionExplorer. It computes, in the page, the paper's
// sinusoidal encoding (interleaved, as lib.sinusoidal_positional_encoding):
//     PE[pos, 2i] = sin(pos / 10000^(2i / d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
// for two positions a, b and the dimensions lo..hi, their dot product and cosine
// similarity, and draws the curves and the bars (SVG). No kernel needed, no network.
//
// Accessibility: four labelled sliders (arrow keys move them) with their values as
// text; the readout is text; each panel is an image with a text description; a polite
// live region says the new dot product and cosine after each change.
//
// DOM contract (tests/browser/test_site.py):
//   root          .positions-explorer
//   controls      input[type=range][data-control="pos_a|pos_b|dim_lo|dim_hi"]
//   readout       [data-output="dot"][data-value], [data-output="cosine"][data-value] ("" if undefined)
//   bars          svg[data-plot="bars"] rect[data-dim][data-which="a|b"][data-value]
//   curves        svg[data-plot="curves"] (the dims drawn in data-dims="lo-hi")
//   note          [data-output="note"] (which dims have curves, when fewer than selected)
//   announcements .pe-status (role="status")

const STYLE = `
.positions-explorer { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.35; max-width: 900px; }
.positions-explorer .pe-controls { display: grid; grid-template-columns: max-content minmax(120px, 1fr) 3em; gap: 4px 10px; align-items: center; max-width: 520px; }
.positions-explorer input[type="range"] { width: 100%; min-height: 24px; }
.positions-explorer input:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
.positions-explorer .pe-panels { display: flex; flex-wrap: wrap; gap: 8px; }
.positions-explorer .pe-panels > div { min-width: 0; }
.positions-explorer .pe-panels > div:first-child { flex: 56 1 300px; }  /* in proportion to the drawings' widths */
.positions-explorer .pe-panels > div:last-child { flex: 34 1 200px; }
.positions-explorer svg { width: 100%; height: auto; display: block; }
.positions-explorer .pe-note { font-style: italic; color: #444; }
.positions-explorer .pe-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
`;

/** PE[pos, dim] for width d, as lib's formula (computed in float64). */
export function peValue(pos, dim, d) {
  const angle = pos / 10000 ** ((dim - (dim % 2)) / d);
  return dim % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
}

/** The numbers the explorer shows: values on dims lo..hi, dot product, cosine (NaN if a norm is 0). */
export function positionValues(a, b, lo, hi, d) {
  const valuesA = [];
  const valuesB = [];
  for (let k = lo; k <= hi; k++) {
    valuesA.push(peValue(a, k, d));
    valuesB.push(peValue(b, k, d));
  }
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < valuesA.length; i++) {
    dot += valuesA[i] * valuesB[i];
    na += valuesA[i] ** 2;
    nb += valuesB[i] ** 2;
  }
  const norms = Math.sqrt(na) * Math.sqrt(nb);
  return { valuesA, valuesB, dot, cosine: norms > 0 ? dot / norms : NaN };
}

const SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#555555", "#b8860b"];
const BAR_A = "#1f63a8";
const BAR_B = "#c45a00";

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

const range = (lo, hi, word) => `${word}${hi > lo ? "s" : ""} ${lo}${hi > lo ? ` to ${hi}` : ""}`;

let counter = 0;

function render({ model, el: host }) {
  const id = `pe-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const d = model.get("d_model");
  const maxPos = model.get("max_pos");
  const maxCurves = model.get("max_curves");
  const dims = model.get("dims");
  const state = { pos_a: model.get("pos_a"), pos_b: model.get("pos_b"), dim_lo: dims[0], dim_hi: dims[1] };
  const root = el("div", { class: "positions-explorer" });
  root.peModel = model;
  host.appendChild(root);
  root.appendChild(el("style", {}, STYLE));
  const controls = el("div", { class: "pe-controls" });
  const inputs = {};
  const outputs = {};
  for (const [name, label, max] of [["pos_a", "position a", maxPos - 1], ["pos_b", "position b", maxPos - 1],
    ["dim_lo", "first dimension", d - 1], ["dim_hi", "last dimension", d - 1]]) {
    controls.appendChild(el("label", { for: `${id}-${name}` }, label));
    const input = el("input", { type: "range", id: `${id}-${name}`, "data-control": name, min: "0", max: String(max), step: "1" });
    input.value = String(state[name]);
    const out = el("output", { for: `${id}-${name}` }, String(state[name]));
    input.addEventListener("input", () => {
      const v = parseInt(input.value, 10);
      if (!Number.isFinite(v) || v === state[name]) return;
      state[name] = v;
      // keep first <= last: the other end follows
      if (name === "dim_lo" && state.dim_hi < v) state.dim_hi = v;
      if (name === "dim_hi" && state.dim_lo > v) state.dim_lo = v;
      syncControls();
      draw();
      announce();
      try {
        model.set({ pos_a: state.pos_a, pos_b: state.pos_b, dims: [state.dim_lo, state.dim_hi] });
        model.save_changes();
      } catch (err) {
        // static page: no kernel; the page has redrawn itself
      }
    });
    inputs[name] = input;
    outputs[name] = out;
    controls.appendChild(input);
    controls.appendChild(out);
  }
  root.appendChild(controls);
  const readout = el("p", { class: "pe-readout" });
  root.appendChild(readout);
  const panels = el("div", { class: "pe-panels" });
  const left = el("div");
  const right = el("div");
  panels.appendChild(left);
  panels.appendChild(right);
  root.appendChild(panels);
  const status = el("div", { class: "pe-status pe-sr-only", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  root.appendChild(status);

  function syncControls() {
    for (const name of Object.keys(inputs)) {
      inputs[name].value = String(state[name]);
      outputs[name].textContent = String(state[name]);
    }
  }

  let current = null;
  function draw() {
    const { pos_a: a, pos_b: b, dim_lo: lo, dim_hi: hi } = state;
    const v = positionValues(a, b, lo, hi, d);
    const cHi = Math.min(hi, lo + maxCurves - 1);
    const note = cHi < hi ? `showing dims ${lo}-${cHi} of ${lo}-${hi}` : "";
    const cosText = Number.isNaN(v.cosine) ? "undefined (a zero vector has no direction)" : v.cosine.toFixed(4);
    current = v;
    readout.replaceChildren();
    readout.appendChild(document.createTextNode(`PE[${a}, ${lo}:${hi + 1}] · PE[${b}, ${lo}:${hi + 1}] = `));
    readout.appendChild(el("b", { "data-output": "dot", "data-value": String(v.dot) }, v.dot.toFixed(4)));
    readout.appendChild(document.createTextNode(", cosine similarity = "));
    readout.appendChild(el("b", { "data-output": "cosine", "data-value": Number.isNaN(v.cosine) ? "" : String(v.cosine) }, cosText));
    if (note) {
      readout.appendChild(el("br"));
      readout.appendChild(el("span", { class: "pe-note", "data-output": "note" },
        `curves: ${note} (at most ${maxCurves} curves); the bars and both numbers use all ${hi - lo + 1} dimensions`));
    }
    const shortCos = Number.isNaN(v.cosine) ? "undefined" : v.cosine.toFixed(3);
    // left: the curves
    const W = 560, H = 330, ml = 44, mr = 10, mt = 24, mb = 80;
    const curves = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "data-plot": "curves", "data-dims": `${lo}-${cHi}`,
      "aria-label": `The sinusoidal encoding's value (y axis) against position 0 to ${maxPos - 1} (x axis) for ` +
        `${range(lo, cHi, "dimension")}, each a sine or cosine wave, slower for higher dimensions, with positions ${a} and ${b} marked by vertical lines.` });
    const px = (p) => ml + (p / Math.max(1, maxPos - 1)) * (W - ml - mr);
    const py = (val) => mt + ((1 - val) / 2) * (H - mt - mb);
    curves.appendChild(svgEl("text", { x: W / 2, y: 15, "text-anchor": "middle", "font-size": 12, fill: "#222" },
      `curves: ${note || `dims ${lo}-${hi}`}`));
    curves.appendChild(svgEl("line", { x1: ml, y1: H - mb, x2: W - mr, y2: H - mb, stroke: "#444" }));
    curves.appendChild(svgEl("line", { x1: ml, y1: mt, x2: ml, y2: H - mb, stroke: "#444" }));
    for (const val of [-1, 0, 1]) {
      curves.appendChild(svgEl("text", { x: ml - 6, y: py(val) + 4, "text-anchor": "end", "font-size": 11, fill: "#333" }, String(val)));
    }
    for (let i = 0; i <= 4; i++) {
      const p = Math.round(((maxPos - 1) * i) / 4);
      curves.appendChild(svgEl("text", { x: px(p), y: H - mb + 14, "text-anchor": "middle", "font-size": 11, fill: "#333" }, String(p)));
    }
    curves.appendChild(svgEl("text", { x: (ml + W - mr) / 2, y: H - mb + 28, "text-anchor": "middle", "font-size": 12, fill: "#222" }, "position"));
    for (let k = lo; k <= cHi; k++) {
      const pts = [];
      for (let p = 0; p < maxPos; p++) pts.push(`${px(p).toFixed(1)},${py(peValue(p, k, d)).toFixed(1)}`);
      curves.appendChild(svgEl("polyline", { points: pts.join(" "), fill: "none", stroke: COLOURS[(k - lo) % COLOURS.length], "stroke-width": 1.5 }));
    }
    curves.appendChild(svgEl("line", { x1: px(a), y1: mt, x2: px(a), y2: H - mb, stroke: "#000", "stroke-width": 1.2 }));
    curves.appendChild(svgEl("line", { x1: px(b), y1: mt, x2: px(b), y2: H - mb, stroke: "#000", "stroke-width": 1.2, "stroke-dasharray": "5 3" }));
    // legend: the dims drawn, in two rows below the axis label
    for (let k = lo; k <= cHi; k++) {
      const slot = k - lo;
      const lx = ml + (slot % 4) * 125;
      const y = H - mb + 46 + Math.floor(slot / 4) * 16;
      curves.appendChild(svgEl("rect", { x: lx, y: y - 6, width: 14, height: 4, fill: COLOURS[slot % COLOURS.length] }));
      curves.appendChild(svgEl("text", { x: lx + 18, y, "font-size": 11, fill: "#222" }, `dim ${k} (${k % 2 === 0 ? "sin" : "cos"})`));
    }
    left.replaceChildren(curves);
    // right: the bars
    const BW = 340, BH = 300, bl = 40, br = 8, bt = 24, bb = 40;
    const n = hi - lo + 1;
    const bars = svgEl("svg", { viewBox: `0 0 ${BW} ${BH}`, role: "img", "data-plot": "bars",
      "aria-label": `Bars of the values of positions ${a} (solid blue) and ${b} (orange) on ${range(lo, hi, "dimension")}, whose cosine similarity is ${shortCos}.` });
    const by = (val) => bt + ((1 - val) / 2) * (BH - bt - bb);
    bars.appendChild(svgEl("text", { x: BW / 2, y: 15, "text-anchor": "middle", "font-size": 12, fill: "#222" }, `cosine = ${shortCos}`));
    bars.appendChild(svgEl("line", { x1: bl, y1: by(0), x2: BW - br, y2: by(0), stroke: "#444" }));
    for (const val of [-1, 0, 1]) {
      bars.appendChild(svgEl("text", { x: bl - 6, y: by(val) + 4, "text-anchor": "end", "font-size": 11, fill: "#333" }, String(val)));
    }
    const slot = (BW - bl - br) / n;
    for (let i = 0; i < n; i++) {
      for (const [which, val, colour, shift] of [["a", v.valuesA[i], BAR_A, 0.1], ["b", v.valuesB[i], BAR_B, 0.5]]) {
        const y0 = by(Math.max(val, 0));
        bars.appendChild(svgEl("rect", { x: bl + slot * (i + shift), y: y0, width: Math.max(slot * 0.4, 0.5),
          height: Math.max(Math.abs(by(val) - by(0)), 0.5), fill: colour, "data-dim": lo + i, "data-which": which, "data-value": val }));
      }
    }
    for (const i of [0, n - 1]) {
      bars.appendChild(svgEl("text", { x: bl + slot * (i + 0.5), y: BH - bb + 14, "text-anchor": "middle", "font-size": 11, fill: "#333" }, String(lo + i)));
    }
    bars.appendChild(svgEl("text", { x: (bl + BW - br) / 2, y: BH - 8, "text-anchor": "middle", "font-size": 12, fill: "#222" },
      `dimension (blue: pos ${a}, orange: pos ${b})`));
    right.replaceChildren(bars);
  }

  let timer = null;
  function announce() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const cos = Number.isNaN(current.cosine) ? "undefined" : current.cosine.toFixed(4);
      status.textContent = `Positions ${state.pos_a} and ${state.pos_b}, dimensions ${state.dim_lo} to ${state.dim_hi}: ` +
        `dot product ${current.dot.toFixed(4)}, cosine similarity ${cos}.`;
    }, 400);
  }

  function onModel() {
    const dm = model.get("dims");
    const fresh = { pos_a: model.get("pos_a"), pos_b: model.get("pos_b"), dim_lo: dm[0], dim_hi: dm[1] };
    if (Object.keys(fresh).some((k) => fresh[k] !== state[k])) {
      Object.assign(state, fresh);
      syncControls();
      draw();
      announce();
    }
  }
  draw();
  for (const name of ["pos_a", "pos_b", "dims"]) model.on(`change:${name}`, onModel);
  return () => {
    for (const name of ["pos_a", "pos_b", "dims"]) model.off(`change:${name}`, onModel);
  };
}

export default { render };
