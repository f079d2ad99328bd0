// bundle-library.js — `npm pack` / `npm publish` step: copies the function library of a ratelimit
// build (RATELIMIT_REDIS_LIBRARY, a file or directory; default ../../build/share/ratelimit/redis)
// into library/, so the packed package carries the exact library it speaks.
const fs = require('fs');
const path = require('path');
const from = process.env.RATELIMIT_REDIS_LIBRARY || path.join(__dirname, '..', '..', '..', 'build', 'share', 'ratelimit', 'redis');
const files = fs.statSync(from).isDirectory()
  ? fs.readdirSync(from).filter((f) => /^ratelimit_[0-9a-f]{12}\.lua$/.test(f)).map((f) => path.join(from, f))
  : [from];
if (files.length !== 1) throw new Error(`${from}: expected one ratelimit_<version>.lua, found ${files.length} (build ratelimit first)`);
const out = path.join(__dirname, '..', 'library');
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out);
fs.copyFileSync(files[0], path.join(out, path.basename(files[0])));
console.log(`bundled ${path.basename(files[0])}`);
