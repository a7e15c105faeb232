// kitfox's entry point for Cloudflare Workers (the package's `workerd`
// export condition, which wrangler and `workerd serve wrangler.json` bundle
// with): the same API as js/index.js; the wasm comes in as a compiled module
// imported from dist/kitfox-core.wasm. See js/platform/workerd.js.
import * as platform from './platform/workerd.js';
import { setPlatform } from './platform/current.js';

setPlatform(platform);

export { Kitfox, KitfoxError, HostError, Statement, default } from './kitfox.js';
