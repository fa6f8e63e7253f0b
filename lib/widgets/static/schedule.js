// The learning-rate schedule explorer of chapter 8: the browser half of
// lib/widgets/schedule.py::ScheduleExplorer. It computes the paper's schedule
//     lr(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
// for steps 1..total_steps and draws it (SVG), in Jupyter and on the static web book
// alike (no kernel needed, no network). Edits are also sent to Python when a kernel
// listens (Python recomputes the same numbers with lib).
//
// Accessibility: three labelled sliders (arrow keys move them), each with its value
// as text; the plot is an image with a text description (role="img", aria-label);
// the peak and a table of rates at a few steps are text; a polite live region says
// the new peak after each change.
//
// DOM contract (tests/browser/test_site.py):
//   root            .schedule-explorer
//   controls        input[type=range][data-control="d_model|warmup_steps|factor"]
//   peak            [data-output="peak"] data-step, data-lr (full precision)
//   rates table     table[data-table="rates"] td[data-step][data-value]
//   plot            svg[data-plot="schedule"] (role="img", aria-label = its description)
//   announcements   .se-status (role="status")

const STYLE = `
.schedule-explorer { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.35; max-width: 660px; }
.schedule-explorer .se-controls { display: grid; grid-template-columns: max-content minmax(120px, 1fr) 5em; gap: 4px 10px; align-items: center; }
.schedule-explorer input[type="range"] { width: 100%; min-height: 24px; }
.schedule-explorer input:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
.schedule-explorer output { font-variant-numeric: tabular-nums; }
.schedule-explorer svg { width: 100%; height: auto; display: block; margin-top: 6px; }
.schedule-explorer table { border-collapse: collapse; margin-top: 6px; font-size: 12px; }
.schedule-explorer caption { text-align: left; font-weight: 600; }
.schedule-explorer th, .schedule-explorer td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; font-variant-numeric: tabular-nums; }
.schedule-explorer .se-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
`;

/** The paper's learning rate at step (1, 2, ...), as lib.noam_lr. */
export function noamLr(step, dModel, warmup, factor = 1.0) {
  return factor * dModel ** -0.5 * Math.min(step ** -0.5, step * warmup ** -1.5);
}

/** Peak of the curve over steps 1..total (first maximum): {step, lr}. */
export function schedulePeak(dModel, warmup, factor, total) {
  let best = 1;
  let bestLr = noamLr(1, dModel, warmup, factor);
  for (let s = 2; s <= total; s++) {
    const lr = noamLr(s, dModel, warmup, factor);
    if (lr > bestLr) {
      best = s;
      bestLr = lr;
    }
  }
  return { step: best, lr: bestLr };
}

/** The steps the rates table shows. */
export function sampleSteps(warmup, total) {
  const steps = [1, Math.round(warmup / 2), warmup, 2 * warmup, 4 * warmup, total].filter((s) => s >= 1 && s <= total);
  return [...new Set(steps)].sort((a, b) => a - b);
}

const SVG = "http://www.w3.org/2000/svg";

/** x in Python's "%.{digits}e" style (two exponent digits: 6.99e-04), as lib's .alt and title write it. */
export function fmtExp(x, digits) {
  return x.toExponential(digits).replace(/e([+-])(\d)$/, "e$10$2");
}

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

const CONTROLS = [
  ["d_model", "d_model", (v) => String(v)],
  ["warmup_steps", "warmup_steps", (v) => String(v)],
  ["factor", "factor", (v) => v.toFixed(1)],
];

function describe(d, w, f, total, peak) {
  const settings = `d_model=${d}, warmup_steps=${w}, factor=${f.toFixed(1)}`;
  const shape = w < total
    ? `it rises linearly to its peak ${fmtExp(peak.lr, 2)} at step ${peak.step}, then decays in proportion to one over the square root of the step`
    : `it rises linearly over all ${total} steps drawn, to ${fmtExp(peak.lr, 2)} at the last`;
  return `Learning rate (y axis) against training step (x axis, 1 to ${total}) for ${settings}: ${shape}.`;
}

let counter = 0;

function render({ model, el: host }) {
  const id = `se-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const limits = model.get("limits") || {};
  const state = {
    d_model: model.get("d_model"), warmup_steps: model.get("warmup_steps"), factor: model.get("factor"),
  };
  const total = model.get("total_steps");
  const root = el("div", { class: "schedule-explorer" });
  root.seModel = model;
  host.appendChild(root);
  root.appendChild(el("style", {}, STYLE));
  const controls = el("div", { class: "se-controls" });
  const inputs = {};
  const outputs = {};
  for (const [name, label, fmt] of CONTROLS) {
    const lim = limits[name] || { min: 1, max: 10000, step: 1 };
    controls.appendChild(el("label", { for: `${id}-${name}` }, label));
    const input = el("input", { type: "range", id: `${id}-${name}`, "data-control": name,
      min: String(lim.min), max: String(lim.max), step: String(lim.step) });
    input.value = String(state[name]);
    const out = el("output", { for: `${id}-${name}` }, fmt(state[name]));
    input.addEventListener("input", () => {
      const v = name === "factor" ? Math.round(parseFloat(input.value) * 10) / 10 : parseInt(input.value, 10);
      if (!Number.isFinite(v) || v === state[name]) return;
      state[name] = v;
      out.textContent = fmt(v);
      draw();
      announce();
      try {
        model.set(name, v);
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
  const peakLine = el("p", { "data-output": "peak" });
  root.appendChild(peakLine);
  const plot = el("div");
  root.appendChild(plot);
  const table = el("table", { "data-table": "rates" });
  root.appendChild(table);
  const status = el("div", { class: "se-status se-sr-only", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  root.appendChild(status);

  let current = null;
  function draw() {
    const { d_model: d, warmup_steps: w, factor: f } = state;
    const peak = schedulePeak(d, w, f, total);
    current = { peak, alt: describe(d, w, f, total, peak) };
    peakLine.setAttribute("data-step", String(peak.step));
    peakLine.setAttribute("data-lr", String(peak.lr));
    peakLine.textContent = `Peak ${fmtExp(peak.lr, 2)} at step ${peak.step}.`;
    // plot
    const W = 640, H = 300, left = 70, right = 16, top = 34, bottom = 44;
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": current.alt, "data-plot": "schedule" });
    const x = (s) => left + ((s - 1) / Math.max(1, total - 1)) * (W - left - right);
    const yMax = peak.lr * 1.08;
    const y = (lr) => H - bottom - (lr / yMax) * (H - top - bottom);
    svg.appendChild(svgEl("text", { x: W / 2, y: 14, "text-anchor": "middle", "font-size": 12, fill: "#222" },
      `d_model=${d}, warmup_steps=${w}, factor=${f.toFixed(1)}`));
    svg.appendChild(svgEl("text", { x: W / 2, y: 28, "text-anchor": "middle", "font-size": 12, fill: "#222" },
      `peak ${fmtExp(peak.lr, 2)} at step ${peak.step}`));
    svg.appendChild(svgEl("line", { x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, stroke: "#444" }));
    svg.appendChild(svgEl("line", { x1: left, y1: top, x2: left, y2: H - bottom, stroke: "#444" }));
    for (let i = 0; i <= 4; i++) {
      const s = Math.max(1, Math.round((total * i) / 4));
      svg.appendChild(svgEl("line", { x1: x(s), y1: H - bottom, x2: x(s), y2: H - bottom + 4, stroke: "#444" }));
      svg.appendChild(svgEl("text", { x: x(s), y: H - bottom + 16, "text-anchor": "middle", "font-size": 11, fill: "#333" }, String(s)));
      const lr = (yMax * i) / 4;
      svg.appendChild(svgEl("line", { x1: left - 4, y1: y(lr), x2: left, y2: y(lr), stroke: "#444" }));
      svg.appendChild(svgEl("text", { x: left - 6, y: y(lr) + 4, "text-anchor": "end", "font-size": 11, fill: "#333" },
        fmtExp(lr, 1)));
    }
    svg.appendChild(svgEl("text", { x: (left + W - right) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "#222" }, "step"));
    svg.appendChild(svgEl("text", { x: 14, y: (top + H - bottom) / 2, "text-anchor": "middle", "font-size": 12, fill: "#222",
      transform: `rotate(-90 14 ${(top + H - bottom) / 2})` }, "learning rate"));
    const points = [];
    const n = Math.min(total, 600);
    const steps = new Set([peak.step]);
    for (let i = 0; i < n; i++) steps.add(1 + Math.round(((total - 1) * i) / Math.max(1, n - 1)));
    for (const s of [...steps].sort((a, b) => a - b)) points.push(`${x(s).toFixed(1)},${y(noamLr(s, d, w, f)).toFixed(1)}`);
    svg.appendChild(svgEl("line", { x1: x(peak.step), y1: top, x2: x(peak.step), y2: H - bottom, stroke: "#777", "stroke-dasharray": "2 3" }));
    svg.appendChild(svgEl("polyline", { points: points.join(" "), fill: "none", stroke: "#1a5fb4", "stroke-width": 2 }));
    plot.replaceChildren(svg);
    // rates table
    table.replaceChildren();
    table.appendChild(el("caption", {}, "Learning rate at a few steps"));
    const r1 = el("tr");
    const r2 = el("tr");
    r1.appendChild(el("th", { scope: "row" }, "step"));
    r2.appendChild(el("th", { scope: "row" }, "rate"));
    for (const s of sampleSteps(w, total)) {
      r1.appendChild(el("td", {}, String(s)));
      const lr = noamLr(s, d, w, f);
      r2.appendChild(el("td", { "data-step": String(s), "data-value": String(lr) }, fmtExp(lr, 3)));
    }
    table.appendChild(r1);
    table.appendChild(r2);
  }

  let timer = null;
  function announce() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      status.textContent = `d_model ${state.d_model}, warmup_steps ${state.warmup_steps}, factor ${state.factor.toFixed(1)}: ` +
        `peak ${fmtExp(current.peak.lr, 2)} at step ${current.peak.step}.`;
    }, 400);
  }

  function onModel() {
    let changed = false;
    for (const [name, , fmt] of CONTROLS) {
      const v = model.get(name);
      if (v !== state[name]) {
        state[name] = v;
        inputs[name].value = String(v);
        outputs[name].textContent = fmt(v);
        changed = true;
      }
    }
    if (changed) {
      draw();
      announce();
    }
  }
  draw();
  for (const [name] of CONTROLS) model.on(`change:${name}`, onModel);
  return () => {
    for (const [name] of CONTROLS) model.off(`change:${name}`, onModel);
  };
}

export default { render };
