// compile.js — `npm pack` / `npm publish` step: tsc from this package's devDependencies. On a fresh
// checkout they are not installed yet, and `tsc` alone exited 127 "not found" (issue 31 defect
// 4): say what to run instead.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const tsc = path.join(__dirname, '..', 'node_modules', '.bin', 'tsc');
if (!fs.existsSync(tsc)) {
  console.error('typescript is not installed: run `npm ci` in clients/node first, then `npm pack`');
  process.exit(1);
}
const r = spawnSync(tsc, ['-p', path.join(__dirname, '..', 'tsconfig.json')], { stdio: 'inherit' });
process.exit(r.status === null ? 1 : r.status);
