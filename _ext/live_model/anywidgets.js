// The widget pages' loader (issue 35): the course's widgets are anywidget ES modules, each
// stored in the page with its state. This draws them, in place of the 3.6 MB
// @jupyter-widgets/html-manager, on every page whose stored widgets are all anywidget models
// (with their layout models): _ext/live_model.py decides, page by page.
//
// For each stored view (<script type="application/vnd.jupyter.widget-view+json">) it reads
// the model's state from the page's widget state, imports the model's `_esm` (the widget's
// own module, lib/widgets/static/*.js, as stored by the notebook), and calls its render()
// with a model object offering what the modules use: get, set (firing "change:<name>" and
// "change", as Backbone does), save_changes (nothing to save: no kernel), on and off. The
// view is drawn in a div.widget-subarea just before the view's script, where the html-manager
// put it. data-course-widgets on <html>: "ready" once every view is drawn, else "failed".

function staticModel(state) {
  const listeners = new Map();
  const fire = (event) => { for (const f of listeners.get(event) || []) f(); };
  return {
    get: (key) => state[key],
    set(key, value) {
      // Backbone's two forms: set(name, value) and set({name: value, ...}) in one update
      const changes = typeof key === "object" && key !== null ? key : { [key]: value };
      for (const [name, v] of Object.entries(changes)) state[name] = v;
      for (const name of Object.keys(changes)) fire(`change:${name}`);
      fire("change");
    },
    save_changes() {},
    on: (event, f) => listeners.set(event, [...(listeners.get(event) || []), f]),
    off: (event, f) => listeners.set(event, (listeners.get(event) || []).filter((g) => g !== f)),
  };
}

const modules = new Map(); // _esm text -> the imported module (one import per distinct widget)

function importModule(source) {
  if (!modules.has(source)) {
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    modules.set(source, import(url).finally(() => URL.revokeObjectURL(url)));
  }
  return modules.get(source);
}

async function main() {
  const store = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  if (!store) return;
  const models = JSON.parse(store.textContent).state;
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  await Promise.all(views.map(async (tag) => {
    const { model_id: id } = JSON.parse(tag.textContent);
    const model = models[id];
    if (!model || model.model_module !== "anywidget") throw new Error(`no anywidget model ${id}`);
    const state = { ...model.state };
    const module = await importModule(state._esm);
    const widget = module.default || module;
    const area = document.createElement("div");
    area.className = "widget-subarea";
    const el = document.createElement("div");
    el.className = "course-anywidget";
    area.appendChild(el);
    tag.parentElement.insertBefore(area, tag);
    if (state._css) {
      const style = document.createElement("style");
      style.textContent = state._css;
      area.prepend(style);
    }
    const m = staticModel(state);
    if (widget.initialize) await widget.initialize({ model: m });
    await widget.render({ model: m, el });
  }));
}

main().then(
  () => { document.documentElement.dataset.courseWidgets = "ready"; },
  (err) => {
    document.documentElement.dataset.courseWidgets = "failed";
    console.error("course widgets:", err);
  },
);
