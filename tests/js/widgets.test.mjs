// Unit tests of the widgets' JavaScript math against fixed numbers from lib
// (tests/js/fixtures.json, written by tests/js/make_fixtures.py with torch).
// Run: node --test tests/js/   (tests/test_widgets_js.py runs it under pytest)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as dates from "../../lib/widgets/static/date_translator.js";

const fixtures = JSON.parse(readFileSync(new URL("./fixtures.json", import.meta.url), "utf8"));

function maxDiff(a, b) {
  assert.equal(a.length, b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

test("float16 base64 decodes to lib's rounded weights", () => {
  for (const f of fixtures.dates) {
    const values = dates.decodeFloat16(f.weights);
    assert.ok(maxDiff(Array.from(values.subarray(0, 8)), f.first_values) === 0);
  }
});

test("float16 special values", () => {
  // 1.0 = 0x3c00, -2.0 = 0xc000, smallest subnormal 0x0001 = 2^-24, 65504 = 0x7bff
  const bytes = [0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b];
  const b64 = Buffer.from(bytes).toString("base64");
  assert.deepEqual(Array.from(dates.decodeFloat16(b64)), [1, -2, 2 ** -24, 65504]);
});

test("greedy decoding: tokens, logits, top-k and cross-attention equal lib's", () => {
  let worst = 0;
  for (const f of fixtures.dates) {
    const t = dates.unpack(dates.decodeFloat16(f.weights), f.layout);
    for (const expected of f.runs) {
      const got = dates.translate(t, f.config, expected.source);
      assert.equal(got.output, expected.output, expected.source);
      assert.deepEqual(got.steps.map((s) => s.token), expected.steps.map((s) => s.token));
      got.steps.forEach((s, i) => {
        const e = expected.steps[i];
        worst = Math.max(worst, maxDiff(s.logits, e.logits));
        assert.deepEqual(s.top.map(([id]) => id), e.top.map(([id]) => id));
        worst = Math.max(worst, maxDiff(s.top.map(([, p]) => p), e.top.map(([, p]) => p)));
        s.cross.forEach((row, h) => { worst = Math.max(worst, maxDiff(row, e.cross[h])); });
      });
    }
  }
  console.log(`date model: largest difference from lib ${worst.toExponential(2)}`);
  assert.ok(worst <= 1e-4, `largest difference ${worst}`);
});

test("unknown characters and empty input are refused with a message", () => {
  const f = fixtures.dates[0];
  assert.match(dates.encodeSource("2019/03/07", f.config).error, /“\/”/);
  assert.match(dates.encodeSource("", f.config).error, /Type a date/);
  assert.equal(dates.encodeSource("2019-3-7", f.config).ids.length, 8);
});

import * as heads from "../../lib/widgets/static/heads.js";
import * as positions from "../../lib/widgets/static/positions.js";
import * as schedule from "../../lib/widgets/static/schedule.js";

test("heads explorer: each head's weights equal lib.head_weights", () => {
  const { x, cases } = fixtures.heads;
  let worst = 0;
  for (const c of cases) {
    const w = heads.headWeights(x, c.projections, c.n_heads, c.head);
    w.forEach((row, i) => { worst = Math.max(worst, maxDiff(row, c.weights[i])); });
  }
  console.log(`heads: largest difference from lib ${worst.toExponential(2)}`);
  assert.ok(worst <= 1e-6, `largest difference ${worst}`);
});

test("positions explorer: values, dot product and cosine equal lib's encoding", () => {
  const { d_model: d, cases } = fixtures.positions;
  let worst = 0;
  for (const c of cases) {
    const v = positions.positionValues(c.a, c.b, c.lo, c.hi, d);
    worst = Math.max(worst, maxDiff(v.valuesA, c.values_a), maxDiff(v.valuesB, c.values_b), Math.abs(v.dot - c.dot));
    if (c.cosine === null) assert.ok(Number.isNaN(v.cosine));
    else worst = Math.max(worst, Math.abs(v.cosine - c.cosine));
  }
  console.log(`positions: largest difference from lib ${worst.toExponential(2)}`);
  assert.ok(worst <= 1e-6, `largest difference ${worst}`);
});

test("schedule explorer: rates and peak equal lib.noam_lr's", () => {
  for (const c of fixtures.schedule.cases) {
    const peak = schedule.schedulePeak(c.d_model, c.warmup, c.factor, c.total);
    assert.equal(peak.step, c.peak_step);
    assert.ok(Math.abs(peak.lr - c.peak_lr) <= 1e-15);
    for (const [s, lr] of c.probes) assert.ok(Math.abs(schedule.noamLr(s, c.d_model, c.warmup, c.factor) - lr) <= 1e-15);
  }
});
