// The first page's live model (book/intro): chapter 8's trained date translator,
// computed in the page with no kernel, no server and no widget manager.
//
// _ext/live_model.py writes date_model.json next to this file at build time: the
// state lib.DateTranslator syncs (float16 weights in base64, their layout, the
// vocabulary and sizes, the stored run of the example), from the checkpoint
// lib/train/checkpoints/date_model.pt (pinned by SHA-256). The drawing and the
// arithmetic are lib/widgets/static/date_translator.js, unchanged, copied here:
// the same ES module chapter 8's widget runs, handed a plain object for its model.
//
// DOM contract (tests/browser/test_site.py): each .course-live-model[data-model]
// gets data-live="ready" once drawn, or data-live="failed" and a message.

const here = new URL(".", import.meta.url);

/** The anywidget model interface the module uses (get, set, save_changes, on, off). */
function staticModel(state) {
  const listeners = new Map();
  return {
    get: (key) => state[key],
    set: (key, value) => {
      state[key] = value;
      for (const f of listeners.get(`change:${key}`) || []) f();
    },
    save_changes: () => {},
    on: (event, f) => listeners.set(event, [...(listeners.get(event) || []), f]),
    off: (event, f) => listeners.set(event, (listeners.get(event) || []).filter((g) => g !== f)),
  };
}

async function main() {
  const hosts = [...document.querySelectorAll(".course-live-model[data-model='date-translator']")];
  if (!hosts.length) return;
  try {
    const [module, state] = await Promise.all([
      import(new URL("date_translator.js", here).href),
      fetch(new URL("date_model.json", here)).then((r) => {
        if (!r.ok) throw new Error(`date_model.json: HTTP ${r.status}`);
        return r.json();
      }),
    ]);
    for (const host of hosts) {
      host.replaceChildren();
      module.default.render({ model: staticModel({ ...state }), el: host });
      host.dataset.live = "ready";
    }
  } catch (err) {
    for (const host of hosts) {
      host.dataset.live = "failed";
      host.textContent = `The live model could not be loaded here (${err.message}); ` +
        "chapter 8 shows it too.";
    }
  }
}

main();
