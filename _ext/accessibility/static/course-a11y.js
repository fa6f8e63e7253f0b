// Accessibility fixes for the Jupyter widgets the book's pages draw from their stored
// state (added to every page by _ext/accessibility.py). The widget manager's views
// leave two things out, and both are added here, whenever a widget is drawn or redrawn:
//  * a slider's handle (role="slider", drawn by noUiSlider) has no accessible name:
//    it is named after the widget's visible description label (aria-labelledby);
//    a range slider's two handles are "<description>: from" and "<description>: to";
//  * an ipywidgets Image carries its description in `tooltip` (the title attribute,
//    set by lib/widgets: what the plot shows); it is copied into the alt attribute.
// And for narrow screens: an inline formula wider than its column gets the class
// course-wide-math, with which course-a11y.css lets it scroll inside its own box;
// a notebook figure drawn much wider than its column (two panels side by side) gets the
// class course-wide-figure on a phone: it is shown whole, fitted to the column, with a
// link under it to the image at full size.
// The list button at the top right of the article (sphinx-book-theme's) opens the page's
// table of contents, which course-layout.css makes a drawer at every width: the theme
// binds only the navigation bar's own (hidden) button, so a click is passed on to it.
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

  function markWideMath() {
    const inline = document.querySelectorAll('.bd-article mjx-container[jax="CHTML"]:not([display="true"])');
    for (const math of inline) math.classList.remove("course-wide-math");
    for (const math of inline) {
      const column = math.closest("p, li, dd, td, th, div");
      if (column && math.getBoundingClientRect().width > column.clientWidth) math.classList.add("course-wide-math");
    }
  }

  function markWideFigures() {
    // Phones (issue 35): a figure much wider than the column is shown whole, fitted to the
    // column (no sideways scrolling, nothing cut off), with a link under it that opens the
    // image at its drawn size, where the phone zooms into its labels.
    const narrow = window.matchMedia("(max-width: 600px)").matches;
    for (const img of document.querySelectorAll(".bd-article .cell_output > img")) {
      const box = img.parentElement;
      const wide = narrow && img.naturalWidth > 1.25 * box.clientWidth;
      img.classList.toggle("course-wide-figure", wide);
      let link = box.querySelector(":scope > a.course-figure-full");
      if (wide && !link) {
        link = document.createElement("a");
        link.className = "course-figure-full";
        link.href = img.currentSrc || img.src;
        link.textContent = "Open this figure at full size";
        img.insertAdjacentElement("afterend", link);
      } else if (!wide && link) {
        link.remove();
      }
    }
  }

  function watchFigures() {
    for (const img of document.querySelectorAll(".bd-article .cell_output > img")) {
      if (!img.complete) img.addEventListener("load", markWideFigures, { once: true });
    }
    markWideFigures();
    let timer = null;
    window.addEventListener("resize", () => {
      clearTimeout(timer);
      timer = setTimeout(markWideFigures, 150);
    });
  }

  function connectContentsButton() {
    const opener = document.querySelector(".bd-header .secondary-toggle, .secondary-toggle");
    for (const button of document.querySelectorAll(".bd-header-article .secondary-toggle")) {
      if (button === opener || !opener) continue;
      button.setAttribute("aria-label", "Contents of this page");
      button.setAttribute("title", "Contents of this page");
      button.setAttribute("data-bs-title", "Contents of this page");
      button.addEventListener("click", (event) => {
        event.preventDefault();
        opener.click();
      });
    }
  }

  function whenMathIsTypeset() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(markWideMath);
      let timer = null;
      window.addEventListener("resize", () => {
        clearTimeout(timer);
        timer = setTimeout(markWideMath, 150);
      });
    } else if (document.querySelector(".math")) {
      setTimeout(whenMathIsTypeset, 50);
    }
  }

  function start() {
    fix(document);
    whenMathIsTypeset();
    watchFigures();
    connectContentsButton();
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
