// kitfox's main entry point: Node.js, and browsers or edge runtimes through a
// bundler (which resolves the `#platform` package import to the web layer).
// Browsers without a bundler import js/browser.js (the package's `browser`
// export). The API is in kitfox.js; see kitfox.d.ts and docs/wasm.md.
import * as platform from '#platform';
import { setPlatform } from './platform/current.js';

setPlatform(platform);

export { Kitfox, KitfoxError, HostError, Statement, default } from './kitfox.js';
