// The platform layer in use (js/platform/node.js or web.js): how the wasm
// bytes load and how a database name opens. Each entry point sets it once,
// when it is imported (js/index.js through the `#platform` package import,
// js/browser.js directly), so the shared modules need no bare specifier and
// run unbundled in a browser.
let current = null;

export function setPlatform(p) {
  current = p;
}

export function currentPlatform() {
  if (!current) throw new Error('kitfox: no platform layer: import kitfox from its entry point (js/index.js or js/browser.js)');
  return current;
}
