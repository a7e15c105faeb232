// kitfox's entry point for browsers and workers without a bundler (the
// package's `browser` export): the same API as js/index.js over the web
// platform layer. In a dedicated worker a database name opens over OPFS;
// from a page's main thread use kitfox/worker (js/worker.js).
import * as platform from './platform/web.js';
import { setPlatform } from './platform/current.js';

setPlatform(platform);

export { Kitfox, KitfoxError, HostError, Statement, default } from './kitfox.js';
