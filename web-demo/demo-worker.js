// The web demo's worker module: connect(name, {module}) imports it in the
// worker that runs kitfox, and the page calls its functions with
// db.call(name, args, {onProgress}). The sample data is generated here, next
// to the database, so no document crosses postMessage.

// 16 topics: each has a category name and words its titles are made of.
const TOPICS = [
  ['travel', 'river mountain island coast trail journey harbour valley border voyage'],
  ['cooking', 'recipe bread garlic oven spice soup roast pastry sauce kitchen'],
  ['music', 'guitar melody chorus rhythm album concert piano jazz vinyl tempo'],
  ['science', 'atom quantum cell genome orbit fossil telescope molecule enzyme plasma'],
  ['sport', 'match goal league sprint marathon tennis cycling coach stadium relay'],
  ['finance', 'market bond equity budget interest loan dividend inflation ledger audit'],
  ['garden', 'tomato compost seed orchard hedge tulip soil pruning greenhouse moss'],
  ['history', 'empire castle treaty dynasty revolution archive medieval siege crown relic'],
  ['tech', 'database vector index compiler kernel browser network cache thread query'],
  ['health', 'sleep fitness vitamin heart yoga diet posture clinic therapy immune'],
  ['art', 'canvas sculpture gallery portrait mural sketch palette museum fresco ink'],
  ['nature', 'forest wolf glacier meadow storm coral desert falcon tide canyon'],
  ['film', 'director camera script premiere actor festival sequel montage studio frame'],
  ['books', 'novel chapter poem author library fable memoir saga verse publisher'],
  ['space', 'rocket planet comet nebula galaxy lunar satellite asteroid cosmos launch'],
  ['home', 'sofa lamp window carpet shelf attic garage porch curtain chimney'],
];
const COMMON = 'guide notes story review ideas basics secrets future world life days night'.split(' ');
export const CATEGORIES = TOPICS.map((t) => t[0]);

function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Unit vectors around one centre per topic (and a sub-centre per word
// pair), so that near neighbours share a topic, as embeddings would.
function generator(dim, seed) {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(Math.max(r(), 1e-300))) * Math.cos(2 * Math.PI * r());
  const unit = (v) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i] * v[i];
    s = Math.sqrt(s) || 1;
    for (let i = 0; i < v.length; i++) v[i] /= s;
    return v;
  };
  const centres = TOPICS.map(() => unit(Float32Array.from({ length: dim }, gauss)));
  const words = TOPICS.map(([, w]) => w.split(' '));
  const sd = 0.3 / Math.sqrt(dim);
  return () => {
    const t = Math.floor(r() * TOPICS.length);
    const w = words[t];
    const a = w[Math.floor(r() * w.length)];
    let b = w[Math.floor(r() * w.length)];
    if (b === a) b = COMMON[Math.floor(r() * COMMON.length)];
    const c = COMMON[Math.floor(r() * COMMON.length)];
    const title = r() < 0.5 ? `${a} ${b} ${c}` : `The ${c} of ${a} and ${b}`;
    const v = new Float32Array(dim);
    const centre = centres[t];
    for (let i = 0; i < dim; i++) v[i] = centre[i] + gauss() * sd;
    return { title, category: TOPICS[t][0], year: 1990 + Math.floor(r() * 36), embed: unit(v) };
  };
}

// Creates the collection and inserts n documents in batches (no index yet:
// the index is built afterwards in one go). Progress: {phase, done, of}.
export function createSample(db, { n = 20000, dim = 128, seed = 1, batch = 1000 }, progress) {
  const t0 = performance.now();
  db.query(`create collection docs (title text @text, category text @hash, year int, embed vector<${dim}>)`);
  const next = generator(dim, seed);
  for (let i = 0; i < n; i += batch) {
    const docs = [];
    for (let j = i; j < Math.min(n, i + batch); j++) docs.push(next());
    db.query('insert docs $1', [docs]);
    progress({ phase: 'load', done: Math.min(n, i + batch), of: n });
  }
  return { loadMs: performance.now() - t0 };
}

// Builds the HNSW index over the vectors, then checkpoints, so that a page
// refresh opens an image with the graph in it.
export function buildIndex(db, { m = 16, efConstruction = 100 }, progress) {
  progress({ phase: 'index' });
  const t0 = performance.now();
  db.query(`create index on docs (embed) @hnsw(cosine, m=${m}, ef_construction=${efConstruction})`);
  const t1 = performance.now();
  progress({ phase: 'save' });
  db.checkpoint();
  const t2 = performance.now();
  return { indexMs: t1 - t0, saveMs: t2 - t1 };
}
