// Chapter 8's trained date model, run in the page: the browser half of
// lib/widgets/dates.py::DateTranslator.
//
// The widget stores the model's weights (float16, base64; lib.export_weights) and
// runs the same computation as lib.Transformer in eval mode, greedy decoding as
// lib.greedy_decode does (the most probable token at each step, until <eos> or
// max_len tokens), on every keystroke. The decoder keeps each layer's keys and
// values of the earlier steps (a KV cache): the same numbers as re-reading the
// whole prefix, computed once. Arithmetic in float64 on the float16 weights.
// No libraries, no network.
//
// First paint: the stored run of the stored source (`example`, computed with lib in
// Python) is drawn before anything is computed here.
//
// Accessibility: the text box has a label and a description; the steps are one
// toolbar of buttons (one tab stop; arrow keys, Home and End move between steps,
// and the step focused or pointed at is the one shown); the top characters and the
// cross-attention are tables with headers; a polite live region sums up each new
// output when typing pauses; errors go to a role="alert" line.
//
// DOM contract (tests/browser/test_site.py relies on it):
//   root                .date-translator; root.dtTranslate(source) -> the run (with logits);
//                       root.dtModel the widget model; root.dataset.computeMs the last run's time
//   text box            input[data-control="source"]
//   output text         [data-output="text"] (textContent = the decoded string)
//   steps               button[data-step="i"] (aria-pressed="true" on the step shown; its text is its name)
//   top characters      table[data-table="top"] tr[data-token][data-prob]
//   cross-attention     table[data-table="cross"] td[data-head][data-col][data-value] (head "mean" too)
//   announcements       .dt-status (role="status")
//   error line          .dt-error (role="alert")

const STYLE = `
.date-translator { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.35; }
.date-translator label { font-weight: 600; margin-right: 6px; }
.date-translator input[data-control="source"] { font-family: ui-monospace, monospace; font-size: 16px; width: 12em; padding: 3px 6px; }
.date-translator input:focus-visible, .date-translator button:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
.date-translator .dt-hint, .date-translator .dt-note { color: #555; font-size: 12px; margin: 4px 0; }
.date-translator .dt-error { color: #b00; font-weight: 600; margin: 4px 0; }
.date-translator .dt-error:empty { display: none; }
.date-translator .dt-out { margin: 8px 0 4px 0; }
.date-translator [data-output="text"] { font-family: ui-monospace, monospace; font-size: 18px; font-weight: 700; }
.date-translator .dt-steps { display: flex; flex-wrap: wrap; gap: 2px; margin: 6px 0; }
.date-translator .dt-steps button { font-family: ui-monospace, monospace; font-size: 15px; min-width: 26px; min-height: 30px;
  padding: 2px 4px; border: 1px solid #888; background: #fff; color: #000; cursor: pointer; }
.date-translator .dt-steps button[aria-pressed="true"] { background: #1a5fb4; color: #fff; border-color: #1a5fb4; }
.date-translator .dt-steps .dt-p { display: block; font-size: 10px; font-family: system-ui, sans-serif; }
.date-translator .dt-detail { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.date-translator .dt-scroll { max-width: 100%; min-width: 0; overflow-x: auto; }
.date-translator table { border-collapse: collapse; }
.date-translator caption { font-weight: 600; text-align: left; padding-bottom: 4px; }
.date-translator th { font-weight: normal; color: #444; padding: 2px 5px; font-size: 12px; }
.date-translator table[data-table="top"] td { padding: 2px 6px; font-variant-numeric: tabular-nums; }
.date-translator .dt-bar { display: inline-block; height: 10px; background: #1a5fb4; vertical-align: middle; margin-left: 6px; }
.date-translator table[data-table="cross"] td { min-width: 2.6em; padding: 4px 3px; text-align: center; font-size: 12px;
  font-variant-numeric: tabular-nums; border: 1px solid #ddd; }
.date-translator table[data-table="cross"] th.dt-src { font-family: ui-monospace, monospace; font-size: 14px; color: #000; }
.date-translator .dt-sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
`;

// ------------------------------------------------------------------ the model (pure functions)

/** float16 bits -> number. */
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // subnormal
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** base64 of little-endian float16 values -> Float64Array. */
export function decodeFloat16(b64) {
  const bin = atob(b64);
  const out = new Float64Array(bin.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = halfToFloat(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8));
  return out;
}

/** {name: {data (Float64Array view), shape}} from the stored layout. */
export function unpack(values, layout) {
  const tensors = {};
  let offset = 0;
  for (const [name, shape] of layout) {
    const size = shape.reduce((a, b) => a * b, 1);
    tensors[name] = { data: values.subarray(offset, offset + size), shape };
    offset += size;
  }
  if (offset !== values.length) throw new Error(`layout holds ${offset} values, the weights ${values.length}`);
  return tensors;
}

/** The paper's sinusoidal encoding, interleaved: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...). */
export function positionalEncoding(pos, d) {
  const pe = new Float64Array(d);
  for (let i = 0; i < d; i += 2) {
    const angle = pos / 10000 ** (i / d);
    pe[i] = Math.sin(angle);
    if (i + 1 < d) pe[i + 1] = Math.cos(angle);
  }
  return pe;
}

function linear(t, prefix, x) {
  const W = t[prefix + ".weight"];
  const b = t[prefix + ".bias"];
  const [out, inp] = W.shape;
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    let s = b ? b.data[o] : 0;
    const row = o * inp;
    for (let i = 0; i < inp; i++) s += W.data[row + i] * x[i];
    y[o] = s;
  }
  return y;
}

function layerNorm(t, prefix, x, eps) {
  const w = t[prefix + ".weight"].data;
  const b = t[prefix + ".bias"].data;
  const d = x.length;
  let mean = 0;
  for (let i = 0; i < d; i++) mean += x[i];
  mean /= d;
  let v = 0;
  for (let i = 0; i < d; i++) v += (x[i] - mean) ** 2;
  v /= d;
  const inv = 1 / Math.sqrt(v + eps);
  const y = new Float64Array(d);
  for (let i = 0; i < d; i++) y[i] = (x[i] - mean) * inv * w[i] + b[i];
  return y;
}

function add(a, b) {
  const y = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) y[i] = a[i] + b[i];
  return y;
}

function feedForward(t, prefix, x) {
  const h = linear(t, prefix + ".linear1", x);
  for (let i = 0; i < h.length; i++) if (h[i] < 0) h[i] = 0; // ReLU
  return linear(t, prefix + ".linear2", h);
}

/** One query q (d) against keys/values (lists of d-vectors), per head. Returns [out (d), weights (h × n)]. */
function attend(q, keys, values, nHeads) {
  const d = q.length;
  const dk = d / nHeads;
  const scale = 1 / Math.sqrt(dk);
  const out = new Float64Array(d);
  const weights = [];
  for (let h = 0; h < nHeads; h++) {
    const off = h * dk;
    const s = new Float64Array(keys.length);
    let max = -Infinity;
    for (let j = 0; j < keys.length; j++) {
      let dot = 0;
      for (let c = 0; c < dk; c++) dot += q[off + c] * keys[j][off + c];
      s[j] = dot * scale;
      if (s[j] > max) max = s[j];
    }
    let total = 0;
    for (let j = 0; j < s.length; j++) {
      s[j] = Math.exp(s[j] - max);
      total += s[j];
    }
    for (let j = 0; j < s.length; j++) {
      s[j] /= total;
      for (let c = 0; c < dk; c++) out[off + c] += s[j] * values[j][off + c];
    }
    weights.push(Array.from(s));
  }
  return [out, weights];
}

function embed(t, table, id, pos, config) {
  const E = t[table];
  const d = config.d_model;
  const scale = config.scale_embedding ? Math.sqrt(d) : 1;
  const pe = positionalEncoding(pos, d);
  const x = new Float64Array(d);
  for (let i = 0; i < d; i++) x[i] = E.data[id * d + i] * scale + pe[i];
  return x;
}

function sublayer(t, norm, x, f, config) {
  // post-LN: norm(x + f(x)); pre-LN: x + f(norm(x))
  if (config.norm_first) return add(x, f(layerNorm(t, norm, x, config.eps)));
  return layerNorm(t, norm, add(x, f(x)), config.eps);
}

/** Encoder over the source ids -> memory (list of d-vectors). */
export function encode(t, config, ids) {
  let xs = ids.map((id, pos) => embed(t, "src_embed.embedding.weight", id, pos, config));
  for (let l = 0; l < config.n_layers; l++) {
    const p = `encoder_layers.${l}`;
    const nf = config.norm_first;
    const inputs = nf ? xs.map((x) => layerNorm(t, `${p}.norm1`, x, config.eps)) : xs;
    const keys = inputs.map((x) => linear(t, `${p}.self_attn.w_k`, x));
    const values = inputs.map((x) => linear(t, `${p}.self_attn.w_v`, x));
    xs = xs.map((x, i) => {
      const q = linear(t, `${p}.self_attn.w_q`, inputs[i]);
      const a = linear(t, `${p}.self_attn.w_o`, attend(q, keys, values, config.n_heads)[0]);
      const y = nf ? add(x, a) : layerNorm(t, `${p}.norm1`, add(x, a), config.eps);
      return sublayer(t, `${p}.norm2`, y, (z) => feedForward(t, `${p}.feed_forward`, z), config);
    });
  }
  if (config.norm_first) xs = xs.map((x) => layerNorm(t, "encoder_norm", x, config.eps));
  return xs;
}

/**
 * Greedy decoding of the source ids, as lib.greedy_decode. Returns
 * {tokens, steps: [{token, logits (Array), cross (n_heads × n, the last decoder layer)}]}.
 */
export function greedyDecode(t, config, ids) {
  const memory = encode(t, config, ids);
  const L = config.n_layers;
  const crossK = [];
  const crossV = [];
  for (let l = 0; l < L; l++) {
    crossK.push(memory.map((m) => linear(t, `decoder_layers.${l}.cross_attn.w_k`, m)));
    crossV.push(memory.map((m) => linear(t, `decoder_layers.${l}.cross_attn.w_v`, m)));
  }
  const selfK = Array.from({ length: L }, () => []);
  const selfV = Array.from({ length: L }, () => []);
  const steps = [];
  const tokens = [];
  let token = config.bos_id;
  for (let pos = 0; pos < config.max_len; pos++) {
    let x = embed(t, "tgt_embed.embedding.weight", token, pos, config);
    let cross = null;
    for (let l = 0; l < L; l++) {
      const p = `decoder_layers.${l}`;
      const nf = config.norm_first;
      const eps = config.eps;
      // masked self-attention: this position and the earlier ones (cached)
      const a0 = nf ? layerNorm(t, `${p}.norm1`, x, eps) : x;
      selfK[l].push(linear(t, `${p}.self_attn.w_k`, a0));
      selfV[l].push(linear(t, `${p}.self_attn.w_v`, a0));
      const sa = linear(t, `${p}.self_attn.w_o`,
        attend(linear(t, `${p}.self_attn.w_q`, a0), selfK[l], selfV[l], config.n_heads)[0]);
      x = nf ? add(x, sa) : layerNorm(t, `${p}.norm1`, add(x, sa), eps);
      // cross-attention over the encoder's output
      const c0 = nf ? layerNorm(t, `${p}.norm2`, x, eps) : x;
      const [ca, w] = attend(linear(t, `${p}.cross_attn.w_q`, c0), crossK[l], crossV[l], config.n_heads);
      cross = w;
      const co = linear(t, `${p}.cross_attn.w_o`, ca);
      x = nf ? add(x, co) : layerNorm(t, `${p}.norm2`, add(x, co), eps);
      x = sublayer(t, `${p}.norm3`, x, (z) => feedForward(t, `${p}.feed_forward`, z), config);
    }
    if (config.norm_first) x = layerNorm(t, "decoder_norm", x, config.eps);
    const logits = linear(t, "generator", x);
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i; // first maximum, as torch.argmax
    steps.push({ token: best, logits: Array.from(logits), cross });
    tokens.push(best);
    token = best;
    if (best === config.eos_id) break;
  }
  return { tokens, steps };
}

export function softmax(logits) {
  const max = Math.max(...logits);
  const e = logits.map((z) => Math.exp(z - max));
  const total = e.reduce((a, b) => a + b, 0);
  return e.map((z) => z / total);
}

/** The top k [id, probability] pairs, most probable first (ties: lower id first). */
export function topK(probs, k) {
  return probs.map((p, i) => [i, p]).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k);
}

/** Source text -> ids, or an error message naming the characters the model does not know. */
export function encodeSource(text, config) {
  const stoi = new Map(config.itos.map((s, i) => [s, i]));
  const unknown = [...new Set([...text].filter((c) => !stoi.has(c) || stoi.get(c) < 3))];
  if (!text.length) return { error: "Type a date, for example 2019-03-07." };
  if (text.length > config.max_source) return { error: `At most ${config.max_source} characters, please.` };
  if (unknown.length) {
    return { error: `The model does not know ${unknown.map((c) => `“${c}”`).join(", ")}: it reads digits, “-” and the letters of the month names.` };
  }
  return { ids: [...text].map((c) => stoi.get(c)) };
}

/** The whole run the widget shows: output text, and per step token, logits, top k, cross. */
export function translate(t, config, text) {
  const enc = encodeSource(text, config);
  if (enc.error) return { source: text, error: enc.error };
  const { steps } = greedyDecode(t, config, enc.ids);
  let output = "";
  for (const s of steps) {
    if (s.token === config.eos_id) break;
    if (s.token > 2) output += config.itos[s.token];
  }
  for (const s of steps) s.top = topK(softmax(s.logits), config.top_k);
  return { source: text, output, steps };
}

// ------------------------------------------------------------------ drawing

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
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

// White to blue for 0..1; black or white text, whichever contrasts more (>= 4.58:1).
function shade(x) {
  const v = Math.min(Math.max(x, 0), 1);
  const mix = [33, 102, 172].map((c) => Math.round(255 + (c - 255) * v));
  const L = luminance(mix);
  return { background: `rgb(${mix.join(", ")})`, text: 1.05 / (L + 0.05) >= (L + 0.05) / 0.05 ? "#fff" : "#000" };
}

let counter = 0;

function render({ model, el: host }) {
  const config = model.get("config");
  let tensors = null; // decoded on the first computation, kept for the next ones
  function weights() {
    if (!tensors) tensors = unpack(decodeFloat16(model.get("weights")), model.get("weight_layout"));
    return tensors;
  }
  const id = `dt-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const shown = (tok) => (tok === config.eos_id ? "end" : config.itos[tok] === " " ? "␣" : config.itos[tok]);
  const spoken = (tok) => (tok === config.eos_id ? "end of output" : config.itos[tok] === " " ? "space" : config.itos[tok] === "," ? "comma" : `“${config.itos[tok]}”`);

  const root = el("div", { class: "date-translator" });
  root.dtModel = model;
  root.dtTranslate = (text) => translate(weights(), config, text);
  host.appendChild(root);
  root.appendChild(el("style", {}, STYLE));
  const label = el("label", { for: `${id}-src` }, "Date to translate");
  const input = el("input", {
    type: "text", id: `${id}-src`, "data-control": "source", autocomplete: "off", spellcheck: "false",
    maxlength: String(config.max_source), "aria-describedby": `${id}-hint`,
  });
  input.value = model.get("source");
  root.appendChild(label);
  root.appendChild(input);
  root.appendChild(el("p", { class: "dt-hint", id: `${id}-hint` },
    "Year-month-day, as in 2019-03-07 or 2019-3-7. The model decodes greedily as you type, in this page."));
  const error = el("div", { class: "dt-error", role: "alert" });
  root.appendChild(error);
  const outLine = el("p", { class: "dt-out" }, "Output: ");
  const outText = el("output", { "data-output": "text", for: `${id}-src` });
  outLine.appendChild(outText);
  root.appendChild(outLine);
  const strip = el("div", { class: "dt-steps", role: "toolbar",
    "aria-label": "Decoding steps, one per output character: arrow keys move between them" });
  root.appendChild(strip);
  const detail = el("div", { class: "dt-detail" });
  root.appendChild(detail);
  const status = el("div", { class: "dt-status dt-sr-only", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  root.appendChild(status);
  root.appendChild(el("p", { class: "dt-note" },
    "Each step shows the characters the model found most probable and where its last decoder layer's " +
    "cross-attention looked in the source (darker: more weight). Computed by this page from the trained " +
    "weights (float16), with no server."));

  let run = null;
  let selected = 0;

  function showStep(i, focus = false) {
    if (!run || !run.steps || !run.steps.length) return;
    selected = Math.max(0, Math.min(i, run.steps.length - 1));
    for (const b of strip.querySelectorAll("button[data-step]")) {
      const on = Number(b.getAttribute("data-step")) === selected;
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.tabIndex = on ? 0 : -1;
      if (on && focus) b.focus();
    }
    const step = run.steps[selected];
    detail.replaceChildren();
    const top = el("table", { "data-table": "top" });
    top.appendChild(el("caption", {}, `Step ${selected + 1}: most probable next characters`));
    const head = el("tr");
    head.appendChild(el("th", { scope: "col" }, "character"));
    head.appendChild(el("th", { scope: "col" }, "probability"));
    top.appendChild(head);
    for (const [tok, p] of step.top) {
      const tr = el("tr", { "data-token": String(tok), "data-prob": String(p) });
      tr.appendChild(el("th", { scope: "row" }, shown(tok)));
      const td = el("td", {}, p.toFixed(3));
      td.appendChild(el("span", { class: "dt-bar", style: `width: ${Math.round(60 * p)}px`, "aria-hidden": "true" }));
      tr.appendChild(td);
      top.appendChild(tr);
    }
    detail.appendChild(top);
    const cross = el("table", { "data-table": "cross" });
    cross.appendChild(el("caption", {}, `Step ${selected + 1}: cross-attention over the source (last decoder layer)`));
    const hr = el("tr");
    hr.appendChild(el("td"));
    [...run.source].forEach((c) => hr.appendChild(el("th", { scope: "col", class: "dt-src" }, c)));
    cross.appendChild(hr);
    const rows = step.cross.map((w, h) => [`head ${h}`, String(h), w]);
    const n = step.cross[0].length;
    const mean = Array.from({ length: n }, (_, j) => step.cross.reduce((s, w) => s + w[j], 0) / step.cross.length);
    rows.push(["mean", "mean", mean]);
    for (const [name, key, w] of rows) {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, name));
      w.forEach((x, j) => {
        const colour = shade(x);
        const td = el("td", { "data-head": key, "data-col": String(j), "data-value": String(x) }, x.toFixed(2));
        td.style.background = colour.background;
        td.style.color = colour.text;
        tr.appendChild(td);
      });
      cross.appendChild(tr);
    }
    // On a narrow screen the table scrolls sideways inside its own box (reachable by Tab).
    const box = el("div", { class: "dt-scroll", tabindex: "0", role: "group",
      "aria-label": `cross-attention of step ${selected + 1}` });
    box.appendChild(cross);
    detail.appendChild(box);
  }

  function draw() {
    strip.replaceChildren();
    detail.replaceChildren();
    if (run.error) {
      error.textContent = run.error;
      outText.textContent = "";
      return;
    }
    error.textContent = "";
    outText.textContent = run.output;
    run.steps.forEach((step, i) => {
      const p = step.top.find(([tok]) => tok === step.token)[1];
      // The name comes from the content (no aria-label): what is seen is also what is read.
      const b = el("button", { type: "button", "data-step": String(i), "aria-pressed": "false" });
      b.appendChild(el("span", { "aria-hidden": "true" }, shown(step.token)));
      b.appendChild(el("span", { class: "dt-sr-only" }, `step ${i + 1}: ${spoken(step.token)}, probability `));
      b.appendChild(el("span", { class: "dt-p" }, p.toFixed(2)));
      b.tabIndex = -1;
      b.addEventListener("click", () => showStep(i));
      b.addEventListener("focus", () => showStep(i));
      b.addEventListener("mouseenter", () => showStep(i));
      strip.appendChild(b);
    });
    showStep(Math.min(selected, run.steps.length - 1));
  }

  strip.addEventListener("keydown", (event) => {
    const moves = { ArrowRight: selected + 1, ArrowDown: selected + 1, ArrowLeft: selected - 1, ArrowUp: selected - 1,
      Home: 0, End: run && run.steps ? run.steps.length - 1 : 0 };
    if (event.key in moves) {
      event.preventDefault();
      showStep(moves[event.key], true);
    }
  });

  let announceTimer = null;
  function announce() {
    clearTimeout(announceTimer);
    announceTimer = setTimeout(() => {
      if (!run) return;
      if (run.error) {
        status.textContent = run.error;
        return;
      }
      let least = 0;
      run.steps.forEach((s, i) => {
        if (s.top[0][1] < run.steps[least].top[0][1]) least = i;
      });
      const s = run.steps[least];
      const ended = run.steps[run.steps.length - 1].token === config.eos_id ? "" : ` (cut at ${config.max_len} characters)`;
      status.textContent = `${run.source} gives ${run.output}${ended}. Least sure at step ${least + 1}: ` +
        `${spoken(s.token)} with probability ${s.top[0][1].toFixed(2)}.`;
    }, 500);
  }

  function compute(text) {
    const t0 = performance.now();
    run = translate(weights(), config, text);
    draw();
    root.dataset.computeMs = String(performance.now() - t0);
    announce();
  }

  input.addEventListener("input", () => {
    compute(input.value);
    try {
      model.set("source", input.value);
      model.save_changes();
    } catch (err) {
      // static page: no kernel to tell; the page has computed everything itself
    }
  });
  function onSource() {
    const text = model.get("source");
    if (text !== input.value) {
      input.value = text;
      compute(text);
    }
  }
  model.on("change:source", onSource);

  // First paint: the stored run, if it is the stored source's; otherwise compute.
  const example = model.get("example");
  if (example && example.steps && example.source === input.value) {
    run = { source: example.source, output: example.output, steps: example.steps };
    draw();
    root.dataset.firstPaint = "stored";
    // After the first paint, when the page is idle: unpack the weights, so that the
    // reader's first keystroke does not wait for it.
    const later = window.requestIdleCallback || ((f) => setTimeout(f, 200));
    later(() => weights());
  } else {
    compute(input.value);
    root.dataset.firstPaint = "computed";
  }
  return () => model.off("change:source", onSource);
}

export default { render };
