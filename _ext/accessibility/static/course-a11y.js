// Accessibility fixes for the Jupyter widgets the book's pages draw from their stored
// state (added to every page by _ext/accessibility.py). The widget manager's views
// leave two things out, and both are added here, whenever a widget is drawn or redrawn:
//  * a slider's handle (role="slider", drawn by noUiSlider) has no accessible name:
//    it is named after the widget's visible description label (aria-labelledby);
//    a range slider's two handles are "<description>: from" and "<description>: to";
//  * an ipywidgets Image carries its description in `tooltip` (the title attribute,
//    set by lib/widgets: what the plot shows); it is copied into the alt attribute.
(function () {
  "use strict";
  let counter = 0;

  function labelSliders(root) {
    for (const handle of root.querySelectorAll(".noUi-handle[role='slider']")) {
      const widget = handle.closest(".widget-slider, .widget-hslider, .widget-vslider, .jupyter-widgets");
      const label = widget && widget.querySelector(":scope > label.widget-label");
      const text = label ? label.textContent.trim() : "";
      if (!text) continue;
      const handles = widget.querySelectorAll(".noUi-handle[role='slider']");
      if (handles.length > 1) {
        const which = handle.classList.contains("noUi-handle-upper") ? "to" : "from";
        const name = `${text}: ${which}`;
        if (handle.getAttribute("aria-label") !== name) handle.setAttribute("aria-label", name);
      } else {
        if (!label.id) label.id = `course-widget-label-${++counter}`;
        if (handle.getAttribute("aria-labelledby") !== label.id) handle.setAttribute("aria-labelledby", label.id);
      }
    }
    for (const readout of root.querySelectorAll(".widget-readout[contenteditable]")) {
      const widget = readout.closest(".jupyter-widgets");
      const label = widget && widget.querySelector(":scope > label.widget-label");
      const name = label && label.textContent.trim() ? `${label.textContent.trim()} (value)` : "";
      if (name && readout.getAttribute("aria-label") !== name) {
        readout.setAttribute("aria-label", name);
        readout.setAttribute("role", "textbox");
      }
    }
  }

  function describeImages(root) {
    for (const img of root.querySelectorAll("img.widget-image[title]")) {
      const title = img.getAttribute("title");
      if (img.getAttribute("alt") !== title) img.setAttribute("alt", title);
    }
  }

  function fix(root) {
    labelSliders(root);
    describeImages(root);
  }

  function start() {
    fix(document);
    let pending = false;
    new MutationObserver(() => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        fix(document);
      });
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["title"] });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
