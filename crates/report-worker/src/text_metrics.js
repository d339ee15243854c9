// Text metrics for plotters inside a Worker. On wasm32, plotters measures a label by adding a
// <span> to `window.document.body` and reading its offsetWidth/offsetHeight; a Worker has no
// window, so rendering a chart would panic. This gives plotters exactly that DOM surface with
// the estimate plotters itself uses on native targets (its `naive` font backend: em = size /
// 1.24², width = 0.7 em per byte of UTF-8, height = em + 0.24 em), so /report's charts are laid
// out like kvbench's. Installed once, before the first chart; it touches nothing else.
const utf8 = new TextEncoder();

class HTMLElement {
  constructor() {
    this.text = "";
    this.size = 12;
  }
  set textContent(t) {
    this.text = t ?? "";
  }
  setAttribute(name, value) {
    const m = name === "style" && /font-size:\s*([0-9.]+)px/.exec(value);
    if (m) this.size = Number(m[1]);
  }
  remove() {}
  get offsetWidth() {
    const em = this.size / 1.24 / 1.24;
    return Math.round(em * 0.7 * utf8.encode(this.text).length);
  }
  get offsetHeight() {
    const em = this.size / 1.24 / 1.24;
    return Math.round(em) + Math.round(em * 0.24);
  }
}

export function install_text_metrics() {
  if (globalThis.document) return;
  const body = { append() {}, appendChild() {} };
  globalThis.document = { body, createElement: () => new HTMLElement() };
  globalThis.HTMLElement = HTMLElement;
  // web_sys::window() is `globalThis instanceof Window`.
  globalThis.Window = { [Symbol.hasInstance]: (x) => x === globalThis };
}
