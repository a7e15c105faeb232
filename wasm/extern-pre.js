// kitfox: placed before the Emscripten glue, outside its factory. The glue's
// Node branch reads __dirname, which an ES module does not have; kitfox
// always passes the wasm bytes in (wasmBinary), so the glue never loads files
// itself and the value is only a placeholder.
var __dirname = '.';
